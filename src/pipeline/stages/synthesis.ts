import type { LanguageCode } from "../../core/contracts.js";
import type { LineFrame, PipelineEvent, PipelineObserver, SpeakFn, SpokenLine } from "../frames.js";
import type { BoundedQueue } from "../../core/queue.js";
import { Framer, OUTPUT_SAMPLE_RATE } from "../framer.js";
import {
  fasterVoice,
  ListenerClock,
  pauseAfter,
  SECONDS_PER_CHARACTER,
  SENTENCE_PAUSE_S,
  SilenceTrimmer,
  speedFor,
  type PaceOptions,
} from "../pacing.js";
import { SynthesisStream } from "../synthesis-stream.js";

/**
 * Lines whose speech may wait, taken but not spoken yet (a `finalized` waiting behind them counts as
 * one). Beyond it the stage stops taking frames until the oldest is done (the wait reaches back
 * through translation to recognition).
 */
export const MAX_WAITING_LINES = 16;

export interface SynthesisStageOptions {
  readonly speak: SpeakFn;
  /** Fires when the pipeline is cancelled: the synthesis in flight is aborted, the rest skipped. */
  readonly signal: AbortSignal;
  readonly emit: (event: PipelineEvent) => void;
  readonly reportError: (message: string, segmentId?: string) => void;
  readonly observer?: PipelineObserver;
  readonly engineId?: (language: LanguageCode) => string;
  /** Keeps pace with the speaker (src/pipeline/pacing.ts); undefined: natural speed always. */
  readonly pace?: PaceOptions | undefined;
}

/**
 * Stage 6, synthesis: line text in, `audio` events out. Each line is a `SynthesisStream`: its text
 * arrives in frames, and each sentence is spoken as soon as it is complete. Lines are spoken one
 * at a time, in order; each line is one clip (its last frame carries `clipEnd`), however many
 * sentences it has. Each sentence's engine silence is trimmed: the pieces of one utterance join with
 * pauses only where their punctuation ends a phrase or a sentence (`pauseAfter`), none after the
 * last piece, and with `pace` they are spoken faster while the listener of its language is behind.
 */
export class SynthesisStage {
  /** The line whose text is arriving. */
  private current: { line: SpokenLine; stream: SynthesisStream } | undefined;
  /** The speech of each line taken and not spoken yet, oldest first; each waits for the one before. */
  private readonly waiting: Promise<void>[] = [];
  /** The lines whose text is not all spoken yet, for the text still waiting (backlog to come). */
  private readonly unspoken = new Set<{ line: SpokenLine; stream: SynthesisStream }>();
  /** When each language's listener will have heard the audio sent so far. */
  private readonly listeners = new Map<LanguageCode, ListenerClock>();
  /**
   * Each language's last piece spoken: its utterance, the pause its punctuation asks for, and how
   * much of it followed the piece.
   */
  private readonly lastSpoken = new Map<LanguageCode, { segmentId: string; pause: number; paused: number }>();

  constructor(
    private readonly options: SynthesisStageOptions,
    private readonly input: BoundedQueue<LineFrame>,
  ) {}

  /** No line is waiting to be spoken or being spoken. */
  get idle(): boolean {
    return this.waiting.length === 0;
  }

  async run(): Promise<void> {
    for await (const frame of this.input) {
      if (this.options.signal.aborted) continue;
      if (frame.kind === "finalized") {
        await this.after(() => this.options.emit({ type: "finalized" }));
        continue;
      }
      if (this.current?.line !== frame.line) {
        // A line ends with its flush or cancel frame; a new one starts with its first text.
        if (frame.kind !== "text") continue;
        const stream = new SynthesisStream((sentence, ends) => this.synthesize(frame.line, sentence, ends));
        const current = { line: frame.line, stream };
        this.current = current;
        this.unspoken.add(current);
        await this.after(() =>
          this.speakLine(frame.line, stream).finally(() => this.unspoken.delete(current)),
        );
      }
      const { stream } = this.current;
      if (frame.kind === "text") stream.pushText(frame.text);
      else {
        if (frame.kind === "flush") stream.flush();
        else stream.cancel();
        this.current = undefined;
      }
    }
    // The input ended: a line cut off without its flush is spoken as it is, unless cancelled.
    if (this.options.signal.aborted) this.current?.stream.cancel();
    else this.current?.stream.flush();
    await Promise.all(this.waiting);
  }

  /**
   * Runs `step` once the lines taken before it are spoken (and the steps before it have run). Waits
   * while MAX_WAITING_LINES steps wait.
   */
  private async after(step: () => void | Promise<void>): Promise<void> {
    while (this.waiting.length >= MAX_WAITING_LINES) await this.waiting[0];
    const done: Promise<void> = (this.waiting.at(-1) ?? Promise.resolve())
      .then(step)
      .finally(() => this.waiting.splice(this.waiting.indexOf(done), 1));
    this.waiting.push(done);
  }

  /**
   * Emits the line's frames as the synthesizer yields them. One frame is held back until the next
   * arrives, so the last frame of the clip can carry `clipEnd`; a synthesis that fails part-way ends
   * its clip with the frames it produced, then reports the failure.
   */
  private async speakLine(line: SpokenLine, stream: SynthesisStream): Promise<void> {
    const { signal, observer } = this.options;
    if (signal.aborted) return;
    // Trimming leaves pieces of any length: the clip is framed again into standard frames.
    const framer = new Framer();
    let held: Float32Array | undefined;
    const send = (frame: Float32Array, clipEnd: boolean) => {
      this.listener(line.language).sent(frame.length / OUTPUT_SAMPLE_RATE, performance.now());
      this.options.emit({ type: "audio", samples: frame, clipEnd, language: line.language });
    };
    let failure: Error | undefined;
    try {
      for await (const samples of stream.frames()) {
        for (const frame of framer.push(samples)) {
          if (held) send(held, false);
          // The line's first frame.
          else observer?.latency("first_audio", (performance.now() - line.queuedAt) / 1000);
          held = frame;
        }
      }
    } catch (error) {
      failure = error as Error;
      stream.cancel();
    }
    for (const frame of framer.flush()) {
      if (held) send(held, false);
      held = frame;
    }
    if (held) send(held, true);
    // A synthesis cancelled with the pipeline did not fail.
    if (failure && !signal.aborted)
      this.options.reportError(`speech synthesis failed: ${failure.message}`, line.segmentId);
  }

  private listener(language: LanguageCode): ListenerClock {
    let clock = this.listeners.get(language);
    if (!clock) this.listeners.set(language, (clock = new ListenerClock()));
    return clock;
  }

  /**
   * What the listener of `language` still has to hear: the audio sent and not played yet, and the
   * text waiting to be spoken as the seconds it would take.
   */
  private backlog(language: LanguageCode): number {
    let characters = 0;
    for (const { line, stream } of this.unspoken)
      if (line.language === language) characters += stream.waitingCharacters;
    return this.listener(language).backlog(performance.now()) + characters * SECONDS_PER_CHARACTER;
  }

  /**
   * One sentence's speech, its engine silence trimmed, at the speed the listener's backlog asks for;
   * its engine call reported once the engine has answered (or failed). The pause its punctuation asks
   * for (`pauseAfter`) follows it when more of its line follows (that pause also carries its last
   * frames out); otherwise it is owed to whatever is spoken next, which starts with what is still
   * missing of it (a sentence pause when that is another utterance) once the silence the listener
   * has had since is counted: no pause trails the last piece, and a speaker's real gap is not
   * lengthened.
   */
  private async *synthesize(
    line: SpokenLine,
    sentence: string,
    ends: () => boolean,
  ): AsyncIterable<Float32Array> {
    const { pace, observer } = this.options;
    const speed = pace ? speedFor(this.backlog(line.language), pace) : 1;
    const clock = this.listener(line.language);
    const before = this.lastSpoken.get(line.language);
    const wanted =
      before === undefined ? 0 : before.segmentId === line.segmentId ? before.pause : SENTENCE_PAUSE_S;
    const trimmer = new SilenceTrimmer(OUTPUT_SAMPLE_RATE, () =>
      Math.max(0, wanted - (before?.paused ?? 0) - clock.silentFor(performance.now())),
    );
    let seconds = 0;
    for await (const samples of this.engineSpeech(line, sentence, speed))
      for (const piece of trimmer.push(samples)) {
        seconds += piece.length / OUTPUT_SAMPLE_RATE;
        yield piece;
      }
    if (!trimmer.spoke) return;
    const pause = pauseAfter(sentence);
    const paused = ends() ? 0 : pause;
    yield* trimmer.end(paused);
    this.lastSpoken.set(line.language, { segmentId: line.segmentId, pause, paused });
    observer?.speech?.(speed, seconds - trimmer.leadSeconds);
  }

  private async *engineSpeech(
    line: SpokenLine,
    sentence: string,
    speed: number,
  ): AsyncIterable<Float32Array> {
    const { signal, observer, engineId } = this.options;
    const startedAt = performance.now();
    const report = (ok: boolean) => {
      if (engineId)
        observer?.engineCall(
          "synthesize",
          engineId(line.language),
          (performance.now() - startedAt) / 1000,
          ok,
        );
    };
    // Nothing new is synthesized once the pipeline is cancelled.
    if (signal.aborted) return;
    let answered = false;
    try {
      for await (const samples of this.options.speak(
        sentence,
        line.language,
        line.voice && fasterVoice(line.voice, speed),
        signal,
        line.toneColor,
      )) {
        if (!answered) report(true);
        answered = true;
        yield samples;
      }
    } catch (error) {
      if (!answered && !signal.aborted) report(false);
      throw error;
    }
  }
}
