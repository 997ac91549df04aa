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

/**
 * Speaking in phrases: the stabiliser commits an utterance a few words at a time (often 1–3 words
 * on PocketSphinx), and each commit is a line. A line whose text ends without punctuation is an
 * unfinished phrase: while its listener still has at least HOLD_BACKLOG_S of audio to hear, it is
 * held and spoken together with the next line of its utterance, up to MAX_PHRASE_WORDS words. A
 * listener with nothing left to hear gets each line at once (first audio is not delayed), and a held
 * phrase is spoken when the listener's audio runs down to HOLD_BACKLOG_S (time enough for an engine's
 * first frame), when another utterance or a `finalized` comes, or when the input ends: holding costs
 * the listener no silence and no lag, and the engine speaks whole phrases with their intonation.
 */
export const HOLD_BACKLOG_S = 0.6;
export const MAX_PHRASE_WORDS = 8;

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
  /** Each language's unfinished phrase held for the next line of its utterance (HOLD_BACKLOG_S). */
  private readonly held = new Map<
    LanguageCode,
    { line: SpokenLine; text: string; timer: ReturnType<typeof setTimeout> }
  >();

  constructor(
    private readonly options: SynthesisStageOptions,
    private readonly input: BoundedQueue<LineFrame>,
  ) {}

  /** No line is held, waiting to be spoken or being spoken. */
  get idle(): boolean {
    return this.waiting.length === 0 && this.held.size === 0;
  }

  async run(): Promise<void> {
    for await (const frame of this.input) {
      if (this.options.signal.aborted) continue;
      if (frame.kind === "finalized") {
        for (const language of [...this.held.keys()]) await this.release(language);
        await this.after(() => frame.passed());
        continue;
      }
      if (this.current?.line !== frame.line) {
        // A line ends with its flush or cancel frame; a new one starts with its first text.
        if (frame.kind !== "text") continue;
        this.current = await this.start(frame.line, await this.carriedInto(frame.line));
      }
      const { line, stream } = this.current!;
      if (frame.kind === "text") stream.pushText(frame.text);
      else {
        if (frame.kind === "cancel") stream.cancel();
        else if (!this.hold(line, stream)) stream.flush();
        this.current = undefined;
      }
    }
    // The input ended: a line cut off without its flush is spoken as it is, unless cancelled, and so
    // is a held phrase.
    if (this.options.signal.aborted) {
      this.current?.stream.cancel();
      for (const { timer } of this.held.values()) clearTimeout(timer);
      this.held.clear();
    } else {
      this.current?.stream.flush();
      for (const language of [...this.held.keys()]) await this.release(language);
    }
    await Promise.all(this.waiting);
  }

  /**
   * A stream for `line`, spoken after the lines taken before it; `carried`: a held phrase spoken
   * ahead of its text, whose line's first text was queued first (first_audio counts from it).
   */
  private async start(
    line: SpokenLine,
    carried?: { line: SpokenLine; text: string },
  ): Promise<{ line: SpokenLine; stream: SynthesisStream }> {
    const stream = new SynthesisStream(
      (sentence, ends) => this.synthesize(line, sentence, ends),
      carried?.text,
    );
    const started = { line, stream };
    this.unspoken.add(started);
    const queuedAt = carried?.line.queuedAt ?? line.queuedAt;
    await this.after(() =>
      this.speakLine(line, stream, queuedAt).finally(() => this.unspoken.delete(started)),
    );
    return started;
  }

  /**
   * The phrase held for `line`'s language when `line` continues it (same utterance, same voice);
   * a held phrase that `line` does not continue is spoken first.
   */
  private async carriedInto(line: SpokenLine): Promise<{ line: SpokenLine; text: string } | undefined> {
    const held = this.held.get(line.language);
    if (!held) return undefined;
    const continues =
      held.line.segmentId === line.segmentId &&
      held.line.voice?.id === line.voice?.id &&
      held.line.toneColor === line.toneColor;
    if (!continues) {
      await this.release(line.language);
      return undefined;
    }
    clearTimeout(held.timer);
    this.held.delete(line.language);
    return held;
  }

  /**
   * Holds the unfinished phrase that ends a flushed line (HOLD_BACKLOG_S) when its listener has
   * enough to hear meanwhile; false when the line is to be spoken to its end now.
   */
  private hold(line: SpokenLine, stream: SynthesisStream): boolean {
    const ahead = this.listener(line.language).backlog(performance.now());
    const unfinished = stream.unfinished.trim();
    if (
      ahead < HOLD_BACKLOG_S ||
      unfinished === "" ||
      pauseAfter(unfinished) > 0 ||
      unfinished.split(/\s+/u).length >= MAX_PHRASE_WORDS
    )
      return false;
    const text = stream.takeUnfinished();
    this.held.set(line.language, { line, text, timer: this.releaseLater(line.language, ahead) });
    return true;
  }

  /** Speaks the held phrase of `language` once its listener's audio runs down to HOLD_BACKLOG_S. */
  private releaseLater(language: LanguageCode, ahead: number): ReturnType<typeof setTimeout> {
    return setTimeout(
      () => {
        const held = this.held.get(language);
        if (!held || this.options.signal.aborted) return;
        // Audio sent meanwhile (earlier lines' speech) leaves the listener more to hear.
        const left = this.listener(language).backlog(performance.now());
        if (left > HOLD_BACKLOG_S) held.timer = this.releaseLater(language, left);
        else void this.release(language);
      },
      (ahead - HOLD_BACKLOG_S) * 1000,
    );
  }

  /** Speaks `language`'s held phrase, if any, as a line of its own. */
  private async release(language: LanguageCode): Promise<void> {
    const held = this.held.get(language);
    if (!held) return;
    clearTimeout(held.timer);
    this.held.delete(language);
    (await this.start(held.line, held)).stream.flush();
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
  private async speakLine(line: SpokenLine, stream: SynthesisStream, queuedAt: number): Promise<void> {
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
          else observer?.latency("first_audio", (performance.now() - queuedAt) / 1000);
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
    let characters = this.held.get(language)?.text.replace(/\s/gu, "").length ?? 0;
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
