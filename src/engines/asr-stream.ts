import type { AsrStream, Hypothesis } from "./types.js";

type State = "open" | "finished" | "aborted";

/**
 * The state machine the local recognisers' streams share (PocketSphinx, whisper.cpp): one utterance
 * that accepts audio, answers partial results and ends once, with `finish()` or `abort()`.
 *
 * The caller never overlaps calls; an overlapping call is rejected rather than queued because it
 * means the caller lost track of its own state. Every call after the end is rejected, naming how the
 * stream ended. Subclasses supply the engine-specific steps.
 */
export abstract class AsrStreamBase implements AsrStream {
  private state: State = "open";
  private pending = false;
  /** Samples written so far. */
  protected samples = 0;

  /** `engine` names the stream in errors (e.g. "PocketSphinx stream: write() after finish()"). */
  protected constructor(private readonly engine: string) {}

  /** Takes non-empty audio; it counts in `samples` once the returned promise (if any) resolves. */
  protected abstract accept(pcm: Int16Array): Promise<void> | void;

  /** The best hypothesis for the audio written so far. */
  protected abstract currentHypothesis(): Promise<Hypothesis>;

  /** Ends the utterance and returns the final hypothesis (the stream is finished afterwards). */
  protected abstract conclude(): Promise<Hypothesis>;

  /** After `finish()` has settled, successful or not. */
  protected afterFinish(): void {}

  /** The stream was aborted while open (a call may still be in flight: see `busy`). */
  protected abstract aborted(): void;

  /** After each call has settled (including calls that were in flight when the stream was aborted). */
  protected idle(): void {}

  write(pcm: Int16Array): Promise<void> {
    return this.exclusive("write", async () => {
      if (pcm.length === 0) return;
      // Synchronous engines take the audio and count it in one step.
      const accepting = this.accept(pcm);
      if (accepting) await accepting;
      this.samples += pcm.length;
    });
  }

  partial(): Promise<Hypothesis> {
    return this.exclusive("partial", () => this.currentHypothesis());
  }

  finish(): Promise<Hypothesis> {
    return this.exclusive("finish", async () => {
      try {
        return await this.conclude();
      } finally {
        if (this.state === "open") this.state = "finished";
        this.afterFinish();
      }
    });
  }

  /** Safe at any time. */
  abort(): void {
    if (this.state !== "open") return;
    this.state = "aborted";
    this.aborted();
  }

  protected get isOpen(): boolean {
    return this.state === "open";
  }

  protected get isAborted(): boolean {
    return this.state === "aborted";
  }

  /** A call is in flight. */
  protected get busy(): boolean {
    return this.pending;
  }

  private exclusive<T>(name: string, operation: () => Promise<T>): Promise<T> {
    if (this.state !== "open") {
      return Promise.reject(
        new Error(
          `${this.engine} stream: ${name}() after ${this.state === "finished" ? "finish()" : "abort()"}`,
        ),
      );
    }
    if (this.pending) {
      return Promise.reject(
        new Error(`${this.engine} stream: ${name}() while another call is pending (calls must not overlap)`),
      );
    }
    this.pending = true;
    let run: Promise<T>;
    try {
      run = operation();
    } catch (error) {
      run = Promise.reject(error as Error);
    }
    // Registered before the caller's own handlers, so the stream is idle again when the caller resumes.
    const settled = (): void => {
      this.pending = false;
      this.idle();
    };
    run.then(settled, settled);
    return run;
  }
}
