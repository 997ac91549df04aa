/**
 * Cuts text arriving in pieces (a translation as it streams) into sentences, so each can be spoken
 * as soon as it is complete. A sentence ends at ".", "!", "?" or "…" (with any closing quotes or
 * brackets) followed by white space — the white space proves the sentence is not going on
 * ("3.5", "…" inside a word) — or at the CJK "。", "！", "？", which need none. A few common
 * abbreviations ("Dr.", "e.g.") do not end a sentence.
 */

const LATIN_END = /[.!?…]+["'”’»)\]]*\s/gu;
const CJK_END = /[。！？]+["'”’」』)\]]*/gu;

/** Words that end in a period without ending the sentence (compared in lower case). */
const ABBREVIATIONS = new Set([
  "mr.",
  "mrs.",
  "ms.",
  "dr.",
  "prof.",
  "sr.",
  "sra.",
  "st.",
  "vs.",
  "e.g.",
  "i.e.",
  "p.ej.",
  "z.b.",
]);

export class SentenceSplitter {
  private buffer = "";

  /** The text taken that no complete sentence holds yet. */
  get pending(): string {
    return this.buffer;
  }

  /** Adds text; returns the sentences it completed, in order (trimmed). */
  push(text: string): string[] {
    this.buffer += text;
    const sentences: string[] = [];
    let end: number | undefined;
    while ((end = this.firstEnd()) !== undefined) {
      const sentence = this.buffer.slice(0, end).trim();
      this.buffer = this.buffer.slice(end);
      if (sentence) sentences.push(sentence);
    }
    return sentences;
  }

  /** The text is complete: the rest, if any, is the last sentence. */
  flush(): string[] {
    const rest = this.buffer.trim();
    this.buffer = "";
    return rest ? [rest] : [];
  }

  /** Where the first complete sentence of the buffer ends, if one has. */
  private firstEnd(): number | undefined {
    let best: number | undefined;
    for (const match of this.buffer.matchAll(LATIN_END)) {
      if (isAbbreviation(this.buffer, match.index)) continue;
      best = match.index + match[0].length;
      break;
    }
    CJK_END.lastIndex = 0;
    const cjk = CJK_END.exec(this.buffer);
    if (cjk && (best === undefined || cjk.index + cjk[0].length < best)) best = cjk.index + cjk[0].length;
    return best;
  }
}

/** Whether the period at `at` ends an abbreviation rather than a sentence. */
function isAbbreviation(text: string, at: number): boolean {
  if (text[at] !== ".") return false;
  const word = /\S+$/u.exec(text.slice(0, at + 1))?.[0].toLocaleLowerCase() ?? "";
  return ABBREVIATIONS.has(word.replace(/^["'“‘«(¿¡]+/u, ""));
}
