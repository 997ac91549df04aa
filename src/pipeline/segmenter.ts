/**
 * Turns per-window speech probabilities into utterance boundaries.
 * Hysteresis (start above `threshold`, end only after `endSilenceMs` below `negThreshold`) keeps
 * short dips inside words from splitting an utterance; a cap bounds utterance length so a
 * recognizer never has to hold minutes of audio.
 */
export interface SegmenterOptions {
  readonly windowMs: number;
  readonly threshold: number;
  readonly negThreshold: number;
  /** Consecutive speech windows needed to open an utterance. */
  readonly startWindows: number;
  /** Trailing silence that closes an utterance. */
  readonly endSilenceMs: number;
  readonly maxUtteranceMs: number;
}

export const DEFAULT_SEGMENTER_OPTIONS: Omit<SegmenterOptions, "windowMs"> = {
  threshold: 0.5,
  negThreshold: 0.35,
  startWindows: 2,
  endSilenceMs: 500,
  maxUtteranceMs: 15_000,
};

export type SegmenterEvent = "start" | "end" | undefined;

export class SpeechSegmenter {
  private speaking = false;
  private speechRun = 0;
  private silenceMs = 0;
  private utteranceMs = 0;

  constructor(private readonly options: SegmenterOptions) {}

  get inUtterance(): boolean {
    return this.speaking;
  }

  /**
   * Silence still needed to close the open utterance, once it has started ending (the last window
   * was silence); undefined otherwise.
   */
  get silenceToEndMs(): number | undefined {
    return this.speaking && this.silenceMs > 0 ? this.options.endSilenceMs - this.silenceMs : undefined;
  }

  /** Feeds one window's probability; returns "start" on the window that opens an utterance, "end" on the one that closes it. */
  update(probability: number): SegmenterEvent {
    const { windowMs, threshold, negThreshold, startWindows, endSilenceMs, maxUtteranceMs } = this.options;
    if (!this.speaking) {
      this.speechRun = probability >= threshold ? this.speechRun + 1 : 0;
      if (this.speechRun < startWindows) return undefined;
      this.speaking = true;
      this.silenceMs = 0;
      this.utteranceMs = this.speechRun * windowMs;
      return "start";
    }
    this.utteranceMs += windowMs;
    this.silenceMs = probability < negThreshold ? this.silenceMs + windowMs : 0;
    if (this.silenceMs >= endSilenceMs || this.utteranceMs >= maxUtteranceMs) {
      this.reset();
      return "end";
    }
    return undefined;
  }

  /** Forgets the current utterance (after an explicit finalize). */
  reset(): void {
    this.speaking = false;
    this.speechRun = 0;
    this.silenceMs = 0;
    this.utteranceMs = 0;
  }
}
