/**
 * Cuts text for engines whose cost (time, and memory that grows faster than the length) rises
 * with the length of one pass: a model is given bounded pieces, and can be stopped between them.
 * Sentences stay whole where they fit; a longer one is cut after a clause mark or at a space, and
 * text with neither (unpunctuated Chinese, Japanese, a run of letters) by length.
 */

/** Characters written without spaces between words, each worth about a syllable of speech. */
const WIDE = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]/u;
/** A wide character weighs as much as this many Latin letters (a syllable against ~3 letters). */
const WIDE_WEIGHT = 3;
const SENTENCE_END = /[.!?…。！？]/u;
const CLAUSE_MARK = /[,;:、，；：]/u;

function weight(char: string): number {
  return WIDE.test(char) ? WIDE_WEIGHT : 1;
}

/**
 * `text` in consecutive pieces, none heavier than `maxWeight` (Latin letters; a Han, kana or
 * Hangul character counts `WIDE_WEIGHT`), cut at the latest sentence end that fits, else clause
 * mark, else space, else wherever the bound falls. Joined, the pieces are the text (trimmed).
 */
export function boundedChunks(text: string, maxWeight: number): string[] {
  const chars = [...text.trim()];
  const chunks: string[] = [];
  let start = 0;
  while (start < chars.length) {
    let end = start;
    let total = 0;
    let sentence = -1;
    let clause = -1;
    let space = -1;
    while (end < chars.length && total + weight(chars[end]!) <= maxWeight) {
      const char = chars[end]!;
      total += weight(char);
      end++;
      if (SENTENCE_END.test(char)) sentence = end;
      else if (CLAUSE_MARK.test(char)) clause = end;
      else if (/\s/u.test(char)) space = end;
    }
    // The bound can hold at least one character, whatever it weighs.
    if (end === start) end = start + 1;
    const cut =
      end === chars.length
        ? end
        : sentence > start
          ? sentence
          : clause > start
            ? clause
            : space > start
              ? space
              : end;
    const chunk = chars.slice(start, cut).join("").trim();
    if (chunk) chunks.push(chunk);
    start = cut;
  }
  return chunks;
}
