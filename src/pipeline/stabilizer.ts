/**
 * Decides which recognized words are stable enough to be sent as `is_final: true`.
 *
 * Streaming recognizers revise their best hypothesis as audio arrives. A word is committed when
 * two consecutive hypotheses agree on it (local agreement) and it is not the newest word (which
 * may be cut mid-word). Committed words are never revised: later hypotheses are aligned to them
 * by position. `stable` commits as soon as `minCommitWords` agree; `sentence` commits only up to a
 * sentence-ending word, so each commit is one sentence. `finish` commits everything left.
 */
export type FinalizeMode = "stable" | "sentence";

export interface StableWord {
  readonly text: string;
  /** Milliseconds from the start of the utterance, when the recognizer gives word timings. */
  readonly endMs?: number;
}

export interface StabilizerUpdate {
  /** Newly committed word runs, in order (each one is a final). */
  readonly commits: StableWord[][];
  /** Words recognized but not committed yet (the interim tail). */
  readonly pending: StableWord[];
}

const SENTENCE_END = /[.!?。！？…]["'”’)\]]*$/u;

export class TranscriptStabilizer {
  private committedCount = 0;
  private previousTail: StableWord[] = [];
  /**
   * For each word of `previousTail`: the utterance audio (ms) of the first hypothesis that showed
   * it where it is, all hypotheses since agreeing. The word was heard within that audio: it ends
   * by then, which bounds the end of words without timings.
   */
  private previousHeardBy: number[] = [];

  constructor(
    private readonly mode: FinalizeMode,
    private readonly options: {
      minCommitWords?: number;
      holdBackMs?: number;
      /** Whether the recognizer punctuates; without punctuation a sentence ends only with the utterance. */
      punctuated?: boolean;
    } = {},
  ) {}

  /**
   * `audioMs`: utterance audio decoded so far. With word timings, words ending within
   * `holdBackMs` of it are not committed yet: recognizers revise recent words most.
   * `commitBeforeMs`: words ending after it (without timings: heard in audio reaching past it)
   * are not committed now, whatever the agreement (they are not ready to be final for another
   * reason: their speaker may still change).
   */
  update(hypothesis: readonly StableWord[], audioMs = Infinity, commitBeforeMs = Infinity): StabilizerUpdate {
    const tail = hypothesis.slice(this.committedCount);
    const agreed = commonPrefixLength(this.previousTail, tail);
    const heardBy = tail.map((_, i) => (i < agreed ? this.previousHeardBy[i]! : audioMs));
    this.previousTail = tail;
    this.previousHeardBy = heardBy;
    const settledBefore = audioMs - (this.options.holdBackMs ?? 0);
    let settled = 0;
    while (settled < tail.length && (tail[settled]!.endMs ?? -Infinity) <= settledBefore) settled++;
    const timed = tail.length > 0 && tail.every((word) => word.endMs !== undefined);
    let ready = 0;
    while (ready < tail.length && (tail[ready]!.endMs ?? heardBy[ready]!) <= commitBeforeMs) ready++;
    // Never commit the newest word while audio is still arriving.
    const lockable = Math.min(agreed, tail.length - 1, timed ? settled : Infinity, ready);
    const minCommitWords = this.options.minCommitWords ?? 2;
    const commitLength =
      this.mode === "stable"
        ? lockable >= minCommitWords
          ? lockable
          : 0
        : this.options.punctuated === false
          ? 0
          : lastSentenceEnd(tail, lockable) + 1;
    return this.commit(tail, commitLength);
  }

  /** The utterance ended: every remaining word is committed. */
  finish(hypothesis: readonly StableWord[]): StabilizerUpdate {
    const tail = hypothesis.slice(this.committedCount);
    const update = this.commit(tail, tail.length);
    this.committedCount = 0;
    this.previousTail = [];
    this.previousHeardBy = [];
    return update;
  }

  private commit(tail: StableWord[], length: number): StabilizerUpdate {
    if (length <= 0) return { commits: [], pending: tail };
    const committed = tail.slice(0, length);
    this.committedCount += length;
    this.previousTail = this.previousTail.slice(length);
    this.previousHeardBy = this.previousHeardBy.slice(length);
    const commits =
      this.mode === "sentence" && this.options.punctuated !== false ? splitSentences(committed) : [committed];
    return { commits, pending: tail.slice(length) };
  }
}

function normalize(word: string): string {
  return word.toLocaleLowerCase();
}

function commonPrefixLength(a: readonly StableWord[], b: readonly StableWord[]): number {
  let i = 0;
  while (i < a.length && i < b.length && normalize(a[i]!.text) === normalize(b[i]!.text)) i++;
  return i;
}

/** Index of the last sentence-ending word among the first `limit` words, or -1. */
function lastSentenceEnd(words: readonly StableWord[], limit: number): number {
  for (let i = limit - 1; i >= 0; i--) if (SENTENCE_END.test(words[i]!.text)) return i;
  return -1;
}

function splitSentences(words: StableWord[]): StableWord[][] {
  const sentences: StableWord[][] = [];
  let current: StableWord[] = [];
  for (const word of words) {
    current.push(word);
    if (SENTENCE_END.test(word.text)) {
      sentences.push(current);
      current = [];
    }
  }
  if (current.length > 0) sentences.push(current);
  return sentences;
}

export function joinWords(words: readonly StableWord[]): string {
  return words.map((w) => w.text).join(" ");
}
