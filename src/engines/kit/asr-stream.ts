import { concatPcm } from "../../audio/pcm.js";
import { EngineUnavailableError } from "../../core/busy.js";
import type {
  AsrEngine,
  AsrStream,
  Hypothesis,
  RecognitionOptions,
  RecognitionStream,
} from "../../core/contracts.js";

type State = "open" | "finished" | "aborted";

/**
 * The state machine the local recognizers' streams share (PocketSphinx, whisper.cpp): one utterance
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

export interface PollingOptions {
  /** How often a partial is asked for, in samples of audio written (none if the engine has none). */
  readonly intervalSamples: number;
  /**
   * Writes are collected until this many have arrived before they are passed on: each call of a
   * polled engine has a fixed cost.
   */
  readonly batchWrites: number;
}

/**
 * An utterance's recognition with results pushed to `options.onEvent`: the engine's own
 * `openRecognition` when it streams results, otherwise its `AsrStream` asked for a partial every
 * `polling.intervalSamples` of audio. `lead` is audio the utterance begins with (the pre-roll, or
 * the part after a change of speaker); it does not count toward the first poll.
 */
export async function openRecognition(
  engine: AsrEngine,
  options: RecognitionOptions,
  polling: PollingOptions,
  lead: readonly Int16Array[] = [],
): Promise<RecognitionStream> {
  if (engine.openRecognition) {
    try {
      const stream = await engine.openRecognition(options);
      for (const pcm of lead) await stream.write(pcm);
      return stream;
    } catch (error) {
      // Its process is down (restarting): `createStream` below may still serve, and the registry's
      // recognizer hands it to the next engine for the language.
      if (!(error instanceof EngineUnavailableError)) throw error;
    }
  }
  const stream = await engine.createStream(options);
  const intervalSamples = engine.capabilities.partialResults ? polling.intervalSamples : Infinity;
  const samplesPerMs = engine.capabilities.sampleRate / 1000;
  return new PollingRecognition(stream, options.onEvent, { ...polling, intervalSamples }, samplesPerMs, lead);
}

/** The adapter for engines that must be asked for partials (whisper.cpp, PocketSphinx, OpenAI). */
class PollingRecognition implements RecognitionStream {
  private readonly unsent: Int16Array[];
  private written = 0;
  private sinceLastPartial = 0;
  private open = true;

  constructor(
    private readonly stream: AsrStream,
    private readonly onEvent: RecognitionOptions["onEvent"],
    private readonly polling: PollingOptions,
    private readonly samplesPerMs: number,
    lead: readonly Int16Array[],
  ) {
    this.unsent = [...lead];
  }

  async write(pcm: Int16Array): Promise<void> {
    this.unsent.push(pcm);
    if (this.unsent.length >= this.polling.batchWrites) await this.passOn();
    this.sinceLastPartial += pcm.length;
    if (this.sinceLastPartial < this.polling.intervalSamples) return;
    this.sinceLastPartial = 0;
    await this.passOn();
    const hypothesis = await this.stream.partial();
    if (this.open) this.onEvent({ type: "partial", hypothesis, audioMs: this.written / this.samplesPerMs });
  }

  async finish(lastAudio?: Int16Array): Promise<Hypothesis> {
    if (lastAudio) this.unsent.push(lastAudio);
    await this.passOn();
    this.open = false;
    return this.stream.finish();
  }

  abort(): void {
    this.open = false;
    this.stream.abort();
  }

  private async passOn(): Promise<void> {
    if (this.unsent.length === 0) return;
    const audio = concatPcm(this.unsent.splice(0));
    await this.stream.write(audio);
    this.written += audio.length;
  }
}
