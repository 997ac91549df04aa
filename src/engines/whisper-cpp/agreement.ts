import type { WordTiming } from "../../core/contracts.js";
import { prefixWordEdits } from "../kit/models/check-metrics.js";

/**
 * The streaming policy for whisper, which is not a streaming recognizer (after Macháček et al.,
 * "Turning Whisper into Real-Time Transcription System", 2023): each decode covers the audio not yet
 * committed, with the committed text as prompt; a word is committed once two consecutive decodes
 * agree on it (local agreement). So the cost of a decode is bounded by the uncommitted window rather
 * than the utterance, and words shown stop changing.
 *
 * whisper's word times are a token's estimate, often a few hundred ms off: audio cut at a committed
 * word's end loses the start of the next word or hears the end of the last one again (measured on real
 * tiny.en weights: "the arts and crafts" lost, "at at present"). So a decode starts a little before
 * the newest committed words (`overlapMs`), hears them again, and its words are aligned to them by
 * text, not by time: what follows them is new.
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
  /** Committed words starting within this of the last commit's end are decoded again, to align on. */
  readonly overlapMs: number;
}

export const DEFAULT_AGREEMENT_OPTIONS: AgreementOptions = {
  holdBackMs: 400,
  maxWindowMs: 15_000,
  keepMs: 3_000,
  overlapMs: 1_000,
};

/** A decode starts this long before the first overlapping word (its start time may be late too). */
const LEAD_MS = 200;

/** Case and punctuation do not count when comparing two decodes' words. */
function normalize(word: string): string {
  return word.toLocaleLowerCase().replace(/[\p{P}\p{S}]/gu, "");
}

export class LocalAgreement {
  private readonly committed: WordTiming[] = [];
  private pending: WordTiming[] = [];
  /** The end of the last committed word (ms). */
  private committedUntil = 0;
  /** Decodes start here (ms): a little before the overlap, or after audio with no words. */
  private windowStart = 0;
  /** Committed words before the window: the prompt. The others are the overlap. */
  private prompted = 0;

  constructor(private readonly options: AgreementOptions = DEFAULT_AGREEMENT_OPTIONS) {}

  /** Where the next decode starts (ms from the utterance's start). */
  get windowStartMs(): number {
    return this.windowStart;
  }

  /** Every committed word's text. */
  get committedText(): string {
    return this.committed.map((w) => w.word).join(" ");
  }

  /** The committed text before the window, the prompt of the next decode. */
  get promptText(): string {
    return this.committed
      .slice(0, this.prompted)
      .map((w) => w.word)
      .join(" ");
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
   * on the utterance's timeline). A decode that started elsewhere is stale and ignored.
   */
  accept(words: readonly WordTiming[], startMs: number, endMs: number): void {
    if (startMs !== this.windowStart) return;
    const fresh = this.afterOverlap(words);
    const settled = endMs - this.options.holdBackMs;
    let agreed = 0;
    while (
      agreed < fresh.length &&
      agreed < this.pending.length &&
      fresh[agreed]!.endMs <= settled &&
      normalize(fresh[agreed]!.word) === normalize(this.pending[agreed]!.word)
    )
      agreed++;
    this.commit(fresh.slice(0, agreed));
    this.pending = fresh.slice(agreed);
    if (endMs - this.committedUntil > this.options.maxWindowMs) {
      // Forced: nothing agreed for too long (noise, music, a model that keeps changing its mind).
      const keepFrom = endMs - this.options.keepMs;
      const forced = this.pending.filter((w) => w.endMs <= keepFrom);
      this.commit(forced);
      this.pending = this.pending.slice(forced.length);
      if (this.pending.length === 0 && keepFrom > this.windowStart) {
        // Audio with no words in it is dropped, and with it the overlap.
        this.windowStart = keepFrom;
        this.prompted = this.committed.length;
        return;
      }
    }
    this.moveWindow();
  }

  /** The utterance's words once the final decode of the window returned `tail`. */
  finish(tail: readonly WordTiming[]): WordTiming[] {
    return [...this.committed, ...this.afterOverlap(tail)];
  }

  /**
   * A decode's words after those that heard the overlap again: the prefix whose words are nearest
   * the overlap's (a word missed or misheard costs one).
   */
  private afterOverlap(words: readonly WordTiming[]): readonly WordTiming[] {
    const overlap = this.committed.slice(this.prompted);
    if (overlap.length === 0 || words.length === 0) return words;
    // One word ahead of the overlap is free: the decode starts a little early and may hear the end
    // of the word before it.
    const distances = prefixWordEdits(
      overlap.map((w) => normalize(w.word)),
      words.slice(0, overlap.length * 2 + 1).map((w) => normalize(w.word)),
      1,
    );
    // Of equally near prefixes, the one after which the next word starts nearest the last commit.
    const offBy = (j: number): number =>
      Math.abs((j < words.length ? words[j]!.startMs : words[j - 1]!.endMs) - this.committedUntil);
    let best = 0;
    for (let j = 1; j < distances.length; j++) {
      const nearer = distances[j]! < distances[best]!;
      if (nearer || (distances[j] === distances[best] && offBy(j) < offBy(best))) best = j;
    }
    // Nothing of the overlap heard again: every word is new.
    return distances[best]! >= overlap.length ? words : words.slice(best);
  }

  private commit(words: readonly WordTiming[]): void {
    if (words.length === 0) return;
    this.committed.push(...words);
    this.committedUntil = Math.max(this.committedUntil, words.at(-1)!.endMs);
  }

  /** The window starts before the committed words starting within `overlapMs` of the last commit's end. */
  private moveWindow(): void {
    let first = this.committed.length;
    while (
      first > this.prompted &&
      this.committedUntil - this.committed[first - 1]!.startMs <= this.options.overlapMs
    )
      first--;
    // At least the newest committed word is heard again.
    if (first === this.committed.length && first > this.prompted) first--;
    if (first <= this.prompted) return;
    const start = this.committed[first]!.startMs - LEAD_MS;
    // Only together: a decode is matched to its window by where it starts, so the overlap it heard
    // must not change while the start stays.
    if (start <= this.windowStart) return;
    this.windowStart = start;
    this.prompted = first;
  }
}
