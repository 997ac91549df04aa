import { type Glossary } from "../../core/glossary.js";

/**
 * Hotwords for the streaming recognizer: the terms of a session's context (src/core/glossary.ts, the
 * parse every surface shares), the names and jargon a general model misses. Upper case, accents
 * dropped, letters and apostrophes only, as the English model's vocabulary spells words; a term
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

export function hotwordsFrom(glossary: Glossary): string[] {
  const unique = [...new Set(glossary.terms.map((term) => normalize(term.text)))].filter(
    (phrase) =>
      phrase.length >= 2 &&
      phrase.length <= MAX_PHRASE_LENGTH &&
      phrase.split(" ").length <= MAX_PHRASE_WORDS &&
      !/\d/u.test(phrase),
  );
  return unique.slice(0, MAX_HOTWORDS);
}
