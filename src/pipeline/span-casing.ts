import { translationTerms, type Glossary } from "../core/glossary.js";

/**
 * A translated span as shown in its segment. A translator takes every input for a sentence and
 * capitalizes its first word — Apertium the first word it knows, after unknown words it copies and
 * interjections ("hola Estudio"). That capital is undone unless it opens the segment, so every
 * translation of the segment (interim, streamed or final) shows the words in the same case. A span
 * the recognizer began with a capital (a sentence start) and names copied from it keep theirs.
 * When the recognizer writes case (whisper), a capital inside the span is taken for a name
 * ("a Londres") and only a capital on the span's first word is undone. The words of the session
 * glossary's targets keep theirs too ("italy" heard, "Italy" written).
 */
export function spanInSegment(
  /** The segment's spans translated before this one (into the same language). */
  earlierSpans: readonly string[],
  source: string,
  translated: string,
  glossary?: Glossary,
): string {
  if (source.charAt(0) !== source.charAt(0).toLocaleLowerCase()) return translated;
  const sourceIsCased = source !== source.toLocaleLowerCase();
  const targets = glossary ? translationTerms(glossary).map((term) => term.target) : [];
  const copied = new Set([source, ...targets].flatMap((text) => text.split(/\s+/u)));
  for (const { 0: word, index } of translated.matchAll(/\S+/gu)) {
    const letter = /\p{L}/u.exec(word);
    if (!letter || letter[0] === letter[0].toLocaleLowerCase() || copied.has(word)) continue;
    if (index === 0 && earlierSpans.length === 0) return translated;
    if (index > 0 && sourceIsCased) return translated;
    const at = index + letter.index;
    return translated.slice(0, at) + letter[0].toLocaleLowerCase() + translated.slice(at + letter[0].length);
  }
  return translated;
}
