import type { WordTiming } from "../../core/contracts.js";

/**
 * The streaming policy for whisper, which is not a streaming recognizer (after Macháček et al.,
 * "Turning Whisper into Real-Time Transcription System", 2023): each decode covers only the audio not
 * yet committed, with the committed text as prompt; a word is committed once two consecutive decodes
 * agree on it (local agreement), and the audio up to its end is never decoded again. So the cost of a
 * decode is bounded by the uncommitted window rather than the utterance, and words shown stop changing.
 *
 * Written here because it is the product's own streaming logic. Timings are ms from the utterance's
 * first sample.
 */
export interface AgreementOptions {
  /** Words ending this close to the audio's end are not committed yet (they may still grow). */
  readonly holdBackMs: number;
  /**
   * The uncommitted window is kept below this: past it, the words of the newest decode are committed
   * but for the last `keepMs`, and audio in which whisper heard nothing is dropped from the window.
   */
  readonly maxWindowMs: number;
  /** Audio kept uncommitted when the window is forced down. */
  readonly keepMs: number;
}

export const DEFAULT_AGREEMENT_OPTIONS: AgreementOptions = {
  holdBackMs: 400,
  maxWindowMs: 15_000,
  keepMs: 3_000,
};

/** Case and punctuation do not count when comparing two decodes' words. */
function normalize(word: string): string {
  return word.toLocaleLowerCase().replace(/[\p{P}\p{S}]/gu, "");
}

export class LocalAgreement {
  private readonly committed: WordTiming[] = [];
  private pending: WordTiming[] = [];
  /** The audio before this (ms) is committed: decodes start here. */
  private committedUntil = 0;

  constructor(private readonly options: AgreementOptions = DEFAULT_AGREEMENT_OPTIONS) {}

  /** Where the next decode starts (ms from the utterance's start). */
  get windowStartMs(): number {
    return this.committedUntil;
  }

  /** The committed text, the prompt of the next decode. */
  get committedText(): string {
    return this.committed.map((w) => w.word).join(" ");
  }

  /** Words of the newest decode not committed yet. */
  get pendingCount(): number {
    return this.pending.length;
  }

  /** Committed words, then the newest decode's others. */
  get words(): readonly WordTiming[] {
    return [...this.committed, ...this.pending];
  }

  /**
   * Takes the words of a partial decode of the audio from `windowStartMs` to `endMs` (timings already
   * on the utterance's timeline). A decode that started before the last commit is stale and ignored.
   */
  accept(words: readonly WordTiming[], startMs: number, endMs: number): void {
    if (startMs !== this.committedUntil) return;
    const settled = endMs - this.options.holdBackMs;
    let agreed = 0;
    while (
      agreed < words.length &&
      agreed < this.pending.length &&
      words[agreed]!.endMs <= settled &&
      normalize(words[agreed]!.word) === normalize(this.pending[agreed]!.word)
    )
      agreed++;
    this.commit(words.slice(0, agreed));
    this.pending = words.slice(agreed);
    if (endMs - this.committedUntil <= this.options.maxWindowMs) return;
    // Forced: nothing agreed for too long (noise, music, a model that keeps changing its mind).
    const keepFrom = endMs - this.options.keepMs;
    const forced = this.pending.filter((w) => w.endMs <= keepFrom);
    this.commit(forced);
    this.pending = this.pending.slice(forced.length);
    if (this.pending.length === 0) this.committedUntil = Math.max(this.committedUntil, keepFrom);
  }

  /** The utterance's words once the final decode of the uncommitted window returned `tail`. */
  finish(tail: readonly WordTiming[]): WordTiming[] {
    return [...this.committed, ...tail];
  }

  private commit(words: readonly WordTiming[]): void {
    if (words.length === 0) return;
    this.committed.push(...words);
    this.committedUntil = Math.max(this.committedUntil, words.at(-1)!.endMs);
  }
}
