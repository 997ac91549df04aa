/**
 * Hotwords from a session's `context` for the streaming recognizer: the names and terms a speaker
 * is likely to say that a general model misses. A context is free text ("Quarterly review with
 * Anneliese Brandt, topics: Kubernetes, OKRs"): a short comma- or line-separated item is taken as a
 * phrase, and from longer prose the capitalized words (names, products). Upper case, accents
 * dropped, letters and apostrophes only, as the English model's vocabulary spells words; a phrase
 * with digits is left out (the model writes numbers as words, so "K8s" could never match).
 */

/** Phrases passed at most: each makes beam search a little slower. */
export const MAX_HOTWORDS = 32;
const MAX_PHRASE_WORDS = 4;
const MAX_PHRASE_LENGTH = 40;

function normalize(phrase: string): string {
  return phrase
    .normalize("NFD")
    .replace(/\p{M}/gu, "")
    .toUpperCase()
    .replace(/[^A-Z'\d ]+/gu, " ")
    .replace(/\s+/gu, " ")
    .trim();
}

export function hotwordsFromContext(context: string | undefined): string[] {
  if (!context) return [];
  const phrases: string[] = [];
  for (const item of context.split(/[,;\n:]+/u)) {
    const words = item.trim().split(/\s+/u).filter(Boolean);
    if (words.length === 0) continue;
    if (words.length <= MAX_PHRASE_WORDS) phrases.push(words.join(" "));
    else phrases.push(...words.slice(1).filter((word) => /^\p{Lu}/u.test(word)));
  }
  const unique = [...new Set(phrases.map(normalize))].filter(
    (phrase) => phrase.length >= 2 && phrase.length <= MAX_PHRASE_LENGTH && !/\d/u.test(phrase),
  );
  return unique.slice(0, MAX_HOTWORDS);
}
