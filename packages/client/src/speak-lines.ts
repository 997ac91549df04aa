import { MAX_SPEAK_CHARACTERS } from "./protocol.js";

/** Where a sentence ends before whitespace (Latin and others) or on its own (CJK full stops). */
const SENTENCE_END = /[.!?…]/u;
const CJK_SENTENCE_END = /[。！？]/u;
const SPACE = /\s/u;

/**
 * A text of any length as the `speak` lines the service takes: each at most `max` characters
 * (MAX_SPEAK_CHARACTERS: Unicode code points, as the service counts them), cut after the last
 * sentence that fits, else at the last space, else at the bound itself. Whitespace around the
 * cuts is dropped; an empty text gives no line.
 */
export function speakableLines(text: string, max = MAX_SPEAK_CHARACTERS): string[] {
  const points = [...text];
  const lines: string[] = [];
  let start = 0;
  for (;;) {
    while (start < points.length && SPACE.test(points[start]!)) start++;
    if (start === points.length) return lines;
    let end = Math.min(points.length, start + max);
    if (end < points.length) {
      // A cut before `at`: scanned back from the bound, the first sentence end found is the last.
      let space = -1;
      let sentence = -1;
      for (let at = end; at > start && sentence < 0; at--) {
        const before = points[at - 1]!;
        const isSpace = SPACE.test(points[at]!);
        if ((isSpace && SENTENCE_END.test(before)) || CJK_SENTENCE_END.test(before)) sentence = at;
        else if (isSpace && space < 0) space = at;
      }
      end = sentence >= 0 ? sentence : space >= 0 ? space : end;
    }
    lines.push(points.slice(start, end).join("").trimEnd());
    start = end;
  }
}
