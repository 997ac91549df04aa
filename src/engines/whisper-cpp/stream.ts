import type { AsrStream, Hypothesis } from "../types.js";
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

type State = "open" | "finished" | "aborted";

/**
 * One utterance. whisper is not a streaming recogniser: the stream keeps the utterance's audio and
 * decodes all of it again for a partial result, at a bounded rate, in the background — `partial()`
 * never waits for whisper, it starts a fresh decode when one is due and returns the newest finished one.
 */
export class WhisperCppStream implements AsrStream {
  private state: State = "open";
  private pending = false;
  private audio = new Int16Array(16_000 * 4);
  private samples = 0;
  private latest: Hypothesis = EMPTY_HYPOTHESIS;
  /** Samples in the audio of the newest partial decode that has started. */
  private partialMark = 0;
  private partialDecode: ScheduledDecode<Hypothesis> | undefined;

  constructor(
    private readonly host: StreamHost,
    private readonly partialIntervalSamples: number,
  ) {}

  write(pcm: Int16Array): Promise<void> {
    return this.exclusive("write", () => {
      if (this.samples + pcm.length > this.audio.length) {
        const grown = new Int16Array(Math.max(this.audio.length * 2, this.samples + pcm.length));
        grown.set(this.audio.subarray(0, this.samples));
        this.audio = grown;
      }
      this.audio.set(pcm, this.samples);
      this.samples += pcm.length;
      return Promise.resolve();
    });
  }

  /**
   * Starts a background decode of the whole utterance when at least `partialIntervalMs` of audio has
   * arrived since the previous one started and none is queued or running for this stream; returns the
   * newest finished partial hypothesis either way (empty until the first one is done).
   */
  partial(): Promise<Hypothesis> {
    return this.exclusive("partial", () => {
      const fresh = this.samples - this.partialMark;
      if (this.partialDecode === undefined && fresh > 0 && fresh >= this.partialIntervalSamples) {
        this.startPartial();
      }
      return Promise.resolve(this.latest);
    });
  }

  finish(): Promise<Hypothesis> {
    return this.exclusive("finish", async () => {
      // A partial decode that has not started is dropped; a running one finishes unseen (whisper.cpp
      // cannot be interrupted) while the final decode waits for a context.
      this.partialDecode?.cancel();
      this.partialDecode = undefined;
      try {
        if (this.samples === 0) return EMPTY_HYPOTHESIS;
        return await this.host.decode(this, "final", () => this.snapshot()).result;
      } finally {
        if (this.state === "open") this.state = "finished";
        this.host.forget(this);
      }
    });
  }

  /** Safe at any time; a pending `finish()` then rejects. */
  abort(): void {
    if (this.state !== "open") return;
    this.state = "aborted";
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
        if (this.state === "open") this.latest = hypothesis;
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

  private exclusive<T>(name: string, operation: () => Promise<T>): Promise<T> {
    if (this.state !== "open") {
      return Promise.reject(
        new Error(
          `whisper.cpp stream: ${name}() after ${this.state === "finished" ? "finish()" : "abort()"}`,
        ),
      );
    }
    if (this.pending) {
      return Promise.reject(
        new Error(`whisper.cpp stream: ${name}() while another call is pending (calls must not overlap)`),
      );
    }
    this.pending = true;
    let run: Promise<T>;
    try {
      run = operation();
    } catch (error) {
      run = Promise.reject(error as Error);
    }
    const settled = (): void => {
      this.pending = false;
    };
    run.then(settled, settled);
    return run;
  }
}
