import type { AsrStream, Hypothesis } from "../types.js";
import type { Decoder } from "./decoder.js";
import { toHypothesis } from "./words.js";

/** What a stream needs from its engine to give its decoder back. */
export interface StreamOwner {
  /** The utterance is ended: the decoder can serve the next stream. */
  release(decoder: Decoder, stream: PocketSphinxStream): void;
  /** A native call failed: the decoder's state is unknown and it must be freed. */
  discard(decoder: Decoder, stream: PocketSphinxStream): void;
}

type State = "open" | "finished" | "aborted";

/**
 * One utterance on a leased decoder. The caller never overlaps calls; an overlapping call is rejected
 * rather than queued because it means the caller lost track of its own state.
 */
export class PocketSphinxStream implements AsrStream {
  private state: State = "open";
  private pending = false;
  private returned = false;
  private samples = 0;

  constructor(
    private readonly decoder: Decoder,
    private readonly owner: StreamOwner,
    private readonly sampleRate: number,
  ) {}

  write(pcm: Int16Array): Promise<void> {
    return this.exclusive("write", async () => {
      if (pcm.length === 0) return;
      // The worker thread reads the array in place: a private copy cannot be reused, resized or
      // transferred by the caller meanwhile.
      const samples = pcm.slice();
      await this.decoder.process(samples);
      this.samples += samples.length;
    });
  }

  partial(): Promise<Hypothesis> {
    return this.exclusive("partial", async () => {
      const { hyp, segments } = await this.decoder.result();
      return toHypothesis(hyp, segments, this.durationMs());
    });
  }

  finish(): Promise<Hypothesis> {
    return this.exclusive("finish", async () => {
      try {
        await this.decoder.end();
        const { hyp, segments } = await this.decoder.result();
        this.giveBack(true);
        return toHypothesis(hyp, segments, this.durationMs());
      } catch (error) {
        this.giveBack(false);
        throw error;
      } finally {
        if (this.state === "open") this.state = "finished";
      }
    });
  }

  /** Safe at any time: with a call in flight, the decoder is returned once that call has settled. */
  abort(): void {
    if (this.state !== "open") return;
    this.state = "aborted";
    if (!this.pending) this.endAndGiveBack();
  }

  private durationMs(): number {
    return (this.samples * 1000) / this.sampleRate;
  }

  private exclusive<T>(name: string, operation: () => Promise<T>): Promise<T> {
    if (this.state !== "open") {
      return Promise.reject(
        new Error(
          `PocketSphinx stream: ${name}() after ${this.state === "finished" ? "finish()" : "abort()"}`,
        ),
      );
    }
    if (this.pending) {
      return Promise.reject(
        new Error(`PocketSphinx stream: ${name}() while another call is pending (calls must not overlap)`),
      );
    }
    this.pending = true;
    const run = operation();
    // Registered before the caller's own handlers, so the stream is idle again when the caller resumes.
    const settled = (): void => {
      this.pending = false;
      if (this.state === "aborted") this.endAndGiveBack();
    };
    run.then(settled, settled);
    return run;
  }

  /** Ends the abandoned utterance off the event loop so the decoder is clean for its next stream. */
  private endAndGiveBack(): void {
    if (this.returned) return;
    this.decoder.end().then(
      () => this.giveBack(true),
      () => this.giveBack(false),
    );
  }

  private giveBack(healthy: boolean): void {
    if (this.returned) return;
    this.returned = true;
    if (healthy) this.owner.release(this.decoder, this);
    else this.owner.discard(this.decoder, this);
  }
}
