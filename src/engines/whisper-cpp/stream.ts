import { AsrStreamBase } from "../asr-stream.js";
import type { Hypothesis } from "../types.js";
import type { DecodeKind, ScheduledDecode } from "./scheduler.js";

export const EMPTY_HYPOTHESIS: Hypothesis = Object.freeze({ text: "", words: Object.freeze([]) });

/** What a stream needs from its engine. */
export interface StreamHost {
  /**
   * Queues a decode of this stream's audio; `snapshot` is called when the decode gets a context and
   * returns the audio to decode then (all of the utterance so far).
   */
  decode(stream: WhisperCppStream, kind: DecodeKind, snapshot: () => Int16Array): ScheduledDecode<Hypothesis>;
  /** Cancels the stream's queued and running decodes. */
  cancelAll(stream: WhisperCppStream): void;
  /** The stream is done (finished or aborted). */
  forget(stream: WhisperCppStream): void;
}

/**
 * One utterance. whisper is not a streaming recogniser: the stream keeps the utterance's audio and
 * decodes all of it again for a partial result, at a bounded rate, in the background — `partial()`
 * never waits for whisper, it starts a fresh decode when one is due and returns the newest finished one.
 * The state machine shared with PocketSphinx is in ../asr-stream.ts.
 */
export class WhisperCppStream extends AsrStreamBase {
  private audio = new Int16Array(16_000 * 4);
  private latest: Hypothesis = EMPTY_HYPOTHESIS;
  /** Samples in the audio of the newest partial decode that has started. */
  private partialMark = 0;
  private partialDecode: ScheduledDecode<Hypothesis> | undefined;

  constructor(
    private readonly host: StreamHost,
    private readonly partialIntervalSamples: number,
  ) {
    super("whisper.cpp");
  }

  protected accept(pcm: Int16Array): void {
    if (this.samples + pcm.length > this.audio.length) {
      const grown = new Int16Array(Math.max(this.audio.length * 2, this.samples + pcm.length));
      grown.set(this.audio.subarray(0, this.samples));
      this.audio = grown;
    }
    this.audio.set(pcm, this.samples);
  }

  /**
   * Starts a background decode of the whole utterance when at least `partialIntervalMs` of audio has
   * arrived since the previous one started and none is queued or running for this stream; returns the
   * newest finished partial hypothesis either way (empty until the first one is done).
   */
  protected currentHypothesis(): Promise<Hypothesis> {
    const fresh = this.samples - this.partialMark;
    if (this.partialDecode === undefined && fresh > 0 && fresh >= this.partialIntervalSamples) {
      this.startPartial();
    }
    return Promise.resolve(this.latest);
  }

  protected async conclude(): Promise<Hypothesis> {
    // A partial decode that has not started is dropped; a running one finishes unseen (whisper.cpp
    // cannot be interrupted) while the final decode waits for a context.
    this.partialDecode?.cancel();
    this.partialDecode = undefined;
    if (this.samples === 0) return EMPTY_HYPOTHESIS;
    return await this.host.decode(this, "final", () => this.snapshot()).result;
  }

  protected override afterFinish(): void {
    this.host.forget(this);
  }

  /** A pending `finish()` then rejects. */
  protected aborted(): void {
    this.partialDecode = undefined;
    this.host.cancelAll(this);
    this.host.forget(this);
  }

  private startPartial(): void {
    const decode = this.host.decode(this, "partial", () => {
      const audio = this.snapshot();
      this.partialMark = audio.length;
      return audio;
    });
    this.partialDecode = decode;
    decode.result.then(
      (hypothesis) => {
        if (this.partialDecode !== decode) return;
        this.partialDecode = undefined;
        if (this.isOpen) this.latest = hypothesis;
      },
      () => {
        // A failed or cancelled partial decode leaves the previous hypothesis; a real failure shows in
        // finish(), which decodes the same audio again.
        if (this.partialDecode === decode) this.partialDecode = undefined;
      },
    );
  }

  /** A copy of the utterance so far, in an ArrayBuffer of its own (the addon reads whole buffers). */
  private snapshot(): Int16Array {
    return this.audio.slice(0, this.samples);
  }
}
