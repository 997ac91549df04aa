import { randomUUID } from "node:crypto";
import { AutomaticGain } from "../audio/level.js";
import { int16ToFloat32 } from "../audio/pcm.js";
import type { AsrEngine, AsrStream, Hypothesis, LanguageCode, VadEngine, Voice } from "../engines/types.js";
import type { SpeakerChange, SpeakerTracker } from "../speakers/tracker.js";
import type { VoiceChooser } from "../speakers/voices.js";
import { Channel } from "./channel.js";
import { DEFAULT_SEGMENTER_OPTIONS, SpeechSegmenter, type SegmenterOptions } from "./segmenter.js";
import { joinWords, TranscriptStabilizer, type FinalizeMode, type StableWord } from "./stabilizer.js";
import { TranslationHistory } from "../speech-plan.js";

/**
 * The streaming translation pipeline of the live surfaces (WebSocket sessions and rooms; dubbing
 * works on whole files in src/dubbing). Data flows one way through three sequential stages, each
 * its own loop:
 *
 *   audio → [recognition: level → VAD → segmentation → ASR → stabilisation] → [translation] → [synthesis] → events
 *
 * Stages hand work downstream through queues and never call back upstream, so slow translation or
 * synthesis never stalls recognition, and event order within a stage is preserved.
 */

/** What the translation stage asks for: the text, the session context and the recent history. */
export interface TranslationCall {
  /** The language of `text` (identified per utterance in "auto" sessions). */
  readonly from: LanguageCode;
  readonly text: string;
  readonly context: string;
  /** The session's last few final sentences and their translations, oldest first. */
  readonly previous: readonly { readonly source: string; readonly translation: string }[];
}
/** A translation the pipeline asks for: into `to`, the language `targetFor` chose for the utterance. */
export interface TargetedCall extends TranslationCall {
  readonly to: LanguageCode;
}
/** Translates one text. `signal` fires when the pipeline is closed: the work is no longer wanted. */
export type TranslateFn = (call: TargetedCall, signal: AbortSignal) => Promise<string>;
/** Streams a translation: each value is the translation so far; the last one is the translation. */
export type TranslateStreamFn = (call: TargetedCall, signal: AbortSignal) => AsyncIterable<string>;
/**
 * Renders one line of translated text (in `language`) as standalone output frames, yielded as they
 * are ready, in `voice` (the pipeline's `voices` chose it; undefined without them). `signal` fires
 * when the pipeline is closed.
 */
export type SpeakFn = (
  text: string,
  language: LanguageCode,
  voice: Voice | undefined,
  signal: AbortSignal,
) => AsyncIterable<Float32Array>;

/** Latencies a pipeline reports (see `PipelineObserver`). */
export type PipelineStage = "first_interim" | "final_transcript" | "translation" | "first_audio";

/** Where a pipeline reports its timings (the service's metrics); every call is cheap and synchronous. */
export interface PipelineObserver {
  /**
   * first_interim: speech onset → the utterance's first interim; final_transcript: end of the
   * utterance → its final; translation: a final → its translation; first_audio: a translation →
   * its first speech frame.
   */
  latency(stage: PipelineStage, seconds: number): void;
  engineCall(
    kind: "recognize" | "translate" | "synthesize",
    engine: string,
    seconds: number,
    ok: boolean,
  ): void;
  /** Seconds of input audio dropped because recognition fell behind. */
  inputDropped(seconds: number): void;
}

export interface PipelineOptions {
  readonly vad: VadEngine;
  readonly asr: AsrEngine;
  /** The spoken language, or "auto": each utterance is identified by the recogniser. */
  readonly sourceLanguage: LanguageCode | "auto";
  /**
   * The language an utterance heard in `language` is translated into; undefined: it is passed
   * through (its translation is its own text, and it is not spoken).
   */
  readonly targetFor: (language: LanguageCode) => LanguageCode | undefined;
  readonly translate: TranslateFn;
  /** When the translator can stream, final lines are shown as interim translations while it works. */
  readonly translateStream?: TranslateStreamFn;
  /** Absent when audio output is disabled. */
  readonly speak?: SpeakFn;
  readonly finalizeMode: FinalizeMode;
  readonly context?: string;
  /** How long `finalize` waits for audio frames still in flight. */
  readonly finalizeWaitMs?: number;
  /** Audio queued for recognition beyond this is dropped (the server is falling behind). */
  readonly maxBacklogMs?: number;
  /** How often interim hypotheses are taken while speech continues. */
  readonly partialIntervalMs?: number;
  /** Audio kept from before speech onset so the first phoneme is not clipped. */
  readonly preRollMs?: number;
  readonly segmenter?: Partial<Omit<SegmenterOptions, "windowMs">>;
  /** Recent words (within this of the audio head) are not committed as finals yet. */
  readonly stabilizerHoldBackMs?: number;
  /**
   * Tells the speakers apart (relay-2): transcripts carry their speaker's label, and an utterance
   * is split where the voice changes inside it.
   */
  readonly speakers?: SpeakerTracker;
  /** Chooses each line's voice, from the speech of its speaker where it follows the speaker. */
  readonly voices?: VoiceChooser;
  readonly observer?: PipelineObserver;
  /** Which engine serves a call, for the observer. */
  readonly engineIds?: {
    translate(from: LanguageCode, to: LanguageCode): string;
    synthesize(language: LanguageCode): string;
  };
}

interface TranscriptFields {
  /** Groups an original transcript with its translation (`correlation_id`). */
  readonly segmentId: string;
  readonly text: string;
  readonly isFinal: boolean;
  /** Position in the session audio, ms from the first sample received. */
  readonly startMs: number;
  readonly endMs: number;
  /** The language heard; undefined until an "auto" session's recogniser has identified it. */
  readonly language: LanguageCode | undefined;
  /** The speaker's label, when the pipeline tells speakers apart. */
  readonly speaker?: string;
}

export type PipelineEvent =
  | ({ readonly type: "original" } & TranscriptFields)
  | ({
      readonly type: "translated";
      readonly originalText: string;
      /** The library voice the speaker's lines are spoken in, once matched to their voice. */
      readonly voiceId?: number;
    } & TranscriptFields)
  /** One frame of translated speech; `clipEnd` marks the last frame of a line's clip. */
  | { readonly type: "audio"; readonly samples: Float32Array; readonly clipEnd: boolean }
  /**
   * `fatal`: the pipeline cannot continue (an engine failed); the session should end. `segmentId`:
   * the segment the failure concerns (its translation or speech is missing), when there is one.
   */
  | {
      readonly type: "error";
      readonly message: string;
      readonly fatal: boolean;
      readonly segmentId?: string;
    };

/** A run of transcript sharing one `correlation_id`. */
interface Segment {
  readonly id: string;
  readonly startMs: number;
  /** Final original words so far (stable mode accumulates; sentence mode holds one sentence). */
  readonly committed: StableWord[];
  readonly translatedSpans: string[];
  /** Last original text shown for the segment (interim or final). */
  lastShown: string;
  /** The words beyond `committed` that the last interim showed. */
  shownPending: StableWord[];
  /** Bumped on every interim so stale interim translations can be skipped. */
  interimSeq: number;
  /** The segment's language (identified per utterance in "auto" sessions). */
  language: LanguageCode | undefined;
  /**
   * Its speaker's label: the latest decision until its first final, then fixed (a change of
   * speaker starts a new segment).
   */
  speaker: string | undefined;
  /** A final has been sent for it. */
  hasFinal: boolean;
}

interface TranslationJob {
  readonly kind: "interim" | "final";
  readonly segment: Segment;
  /** Interim: the uncommitted tail; final: the newly committed span. */
  readonly sourceText: string;
  /** The full original text the emitted translation corresponds to. */
  readonly originalText: string;
  readonly endMs: number;
  readonly seq: number;
  readonly language: LanguageCode | undefined;
  readonly speaker: string | undefined;
  /** When the job was queued (performance.now()), for the translation latency. */
  readonly queuedAt: number;
}

const SAMPLES_PER_MS = 16;
/** VAD windows collected before they are written to the recogniser (3 × 32 ms). */
const ASR_BATCH_WINDOWS = 3;
/** Interim translations from a stream are sent at most this often. */
const STREAMED_INTERIM_INTERVAL_MS = 100;
/**
 * Speech handed to the voice chooser at a time (250 ms). Small, so the first voice decision lands as
 * soon as about 0.5 s of the speaker's voiced speech has been heard (profiles pool pieces until
 * then), before their first line is spoken.
 */
const PROFILE_CHUNK_SAMPLES = 4_000;

/** A VAD window of an utterance and its session position. */
interface TimedWindow {
  readonly startSample: number;
  readonly pcm: Int16Array;
}

function concat(chunks: readonly Int16Array[]): Int16Array {
  const audio = new Int16Array(chunks.reduce((sum, chunk) => sum + chunk.length, 0));
  let offset = 0;
  for (const chunk of chunks) {
    audio.set(chunk, offset);
    offset += chunk.length;
  }
  return audio;
}

async function flushToRecognizer(utterance: { stream: AsrStream; unsent: Int16Array[] }): Promise<void> {
  if (utterance.unsent.length === 0) return;
  await utterance.stream.write(concat(utterance.unsent.splice(0)));
}

export class TranslationPipeline {
  readonly events = new Channel<PipelineEvent>();

  /** Audio, or a marker: `finalize` (client request) or `silence` (the input stopped mid-silence). */
  private readonly input = new Channel<Int16Array | "finalize" | "silence">();
  private readonly translations = new Channel<TranslationJob>();
  private readonly speech = new Channel<{
    text: string;
    language: LanguageCode;
    voice: Voice | undefined;
    segmentId: string;
    queuedAt: number;
  }>();

  /** Brings quiet microphones up to a level the VAD and the recogniser hear (see src/audio/level.ts). */
  private readonly level = new AutomaticGain();
  private readonly vadStream;
  private readonly segmenter: SpeechSegmenter;
  private readonly windowSamples: number;
  private readonly window: Int16Array;
  private windowFill = 0;
  /** Windows preceding speech onset, newest last. */
  private readonly preRoll: Int16Array[] = [];
  private readonly preRollWindows: number;
  private readonly partialIntervalSamples: number;
  private readonly maxBacklogSamples: number;

  private context: string;
  private readonly history = new TranslationHistory();
  /** The language identified for the current utterance ("auto" sessions). */
  private heardLanguage: LanguageCode | undefined;
  /** The speaker of the speech being recognised, as the tracker last decided. */
  private speaking: string | undefined;
  private receivedSamples = 0;
  private processedSamples = 0;
  private backlogSamples = 0;
  /** Audio was dropped in the current backlog episode (it ends when the backlog has drained). */
  private backlogWarned = false;
  private finalizeTimer: NodeJS.Timeout | undefined;
  private silenceTimer: NodeJS.Timeout | undefined;

  private utterance:
    | {
        stream: AsrStream;
        startSample: number;
        sinceLastPartial: number;
        stabilizer: TranscriptStabilizer;
        /** Audio not yet handed to the recogniser (written in batches: each call has a fixed cost). */
        unsent: Int16Array[];
        /**
         * The utterance's audio, kept while the speaker tracker may split it (bounded by the
         * segmenter's longest utterance).
         */
        audio: TimedWindow[];
        /** Speech not yet handed to the voice chooser (its speaker is not decided yet, or it is short). */
        unobserved: TimedWindow[];
        /** When its onset was heard (performance.now()); undefined once its first interim is out. */
        awaitingInterimSince: number | undefined;
      }
    | undefined;
  private segment: Segment | undefined;
  private closed = false;
  /** Fired by `close()`: cancels the translation and synthesis calls still running. */
  private readonly cancellation = new AbortController();
  /** `end()` was called: no more input, but what was received is still carried through. */
  private ended = false;
  private readonly stages: Promise<void>;

  constructor(private readonly options: PipelineOptions) {
    const { vad } = options;
    if (vad.capabilities.sampleRate !== 16_000 || options.asr.capabilities.sampleRate !== 16_000) {
      throw new Error("the pipeline takes 16 kHz input; the configured VAD and ASR must accept 16 kHz");
    }
    this.vadStream = vad.createStream();
    this.windowSamples = vad.capabilities.windowSamples;
    this.window = new Int16Array(this.windowSamples);
    const windowMs = this.windowSamples / SAMPLES_PER_MS;
    this.segmenter = new SpeechSegmenter({ ...DEFAULT_SEGMENTER_OPTIONS, ...options.segmenter, windowMs });
    this.preRollWindows = Math.ceil((options.preRollMs ?? 300) / windowMs);
    this.partialIntervalSamples = (options.partialIntervalMs ?? 150) * SAMPLES_PER_MS;
    this.maxBacklogSamples = (options.maxBacklogMs ?? 30_000) * SAMPLES_PER_MS;
    this.context = options.context ?? "";
    this.stages = Promise.all([this.recognitionStage(), this.translationStage(), this.synthesisStage()]).then(
      () => this.events.close(),
    );
  }

  /** Queues PCM16 16 kHz mono audio. Never blocks; drops audio when recognition is far behind. */
  pushAudio(pcm: Int16Array): void {
    if (this.closed || this.ended || pcm.length === 0) return;
    clearTimeout(this.silenceTimer);
    this.receivedSamples += pcm.length;
    if (this.backlogSamples + pcm.length > this.maxBacklogSamples) {
      this.options.observer?.inputDropped(pcm.length / (SAMPLES_PER_MS * 1000));
      // Once per episode: until the backlog has drained, audio accepted between drops is no news.
      if (!this.backlogWarned) {
        this.backlogWarned = true;
        this.reportError("the server is falling behind this session's audio; audio is being dropped");
      }
      return;
    }
    this.backlogSamples += pcm.length;
    this.input.push(pcm);
  }

  /** Commits the current segment after waiting for audio still in flight. Repeated calls coalesce. */
  finalize(): void {
    if (this.closed || this.ended || this.finalizeTimer) return;
    this.finalizeTimer = setTimeout(() => {
      this.finalizeTimer = undefined;
      this.input.push("finalize");
    }, this.options.finalizeWaitMs ?? 300);
  }

  /** Applies to the next recognised utterance and every later translation. */
  setContext(context: string): void {
    this.context = context;
  }

  /** Session position of the audio received so far, in ms. */
  get receivedMs(): number {
    return Math.floor(this.receivedSamples / SAMPLES_PER_MS);
  }

  /**
   * Ends the input as if the speaker had stopped: the audio already received, including an
   * utterance still in progress, is recognised, translated and spoken; then `events` ends.
   */
  async end(): Promise<void> {
    if (!this.closed && !this.ended) {
      this.ended = true;
      clearTimeout(this.finalizeTimer);
      clearTimeout(this.silenceTimer);
      this.input.push("finalize");
      this.input.close();
    }
    await this.stages;
  }

  /**
   * Stops all stages and cancels the translation and synthesis calls still running; events already
   * queued are still delivered, then `events` ends.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.finalizeTimer);
    clearTimeout(this.silenceTimer);
    this.input.close();
    this.cancellation.abort(new Error("the session was closed"));
    await this.stages;
  }

  // ------------------------------------------------------------------ recognition stage

  private async recognitionStage(): Promise<void> {
    try {
      for await (const item of this.input) {
        if (this.closed) break;
        if (item === "finalize") {
          await this.finishUtterance(true);
          continue;
        }
        if (item === "silence") {
          // Unless a `finalize` closed the utterance first.
          if (this.segmenter.silenceToEndMs !== undefined) await this.finishUtterance(true);
          continue;
        }
        this.backlogSamples -= item.length;
        await this.consumeAudio(this.level.process(item));
        if (this.backlogSamples === 0) {
          this.backlogWarned = false;
          this.awaitSilence();
        }
      }
    } catch (error) {
      this.events.push({
        type: "error",
        message: `speech recognition failed: ${(error as Error).message}`,
        fatal: true,
      });
    } finally {
      this.utterance?.stream.abort();
      this.utterance = undefined;
      this.translations.close();
    }
  }

  /**
   * All audio received is processed. If the utterance was ending (trailing silence), no audio
   * arriving counts as the silence going on: a client that stops sending after about 300 ms of
   * zeros (or any silence) instead of sending `finalize` still gets its finals, once the silence
   * has lasted as long as the segmenter's end silence. Audio arriving first cancels this.
   */
  private awaitSilence(): void {
    const remainingMs = this.segmenter.silenceToEndMs;
    if (remainingMs === undefined) return;
    this.silenceTimer = setTimeout(() => this.input.push("silence"), remainingMs);
  }

  private async consumeAudio(pcm: Int16Array): Promise<void> {
    let offset = 0;
    while (offset < pcm.length) {
      const take = Math.min(this.windowSamples - this.windowFill, pcm.length - offset);
      this.window.set(pcm.subarray(offset, offset + take), this.windowFill);
      this.windowFill += take;
      offset += take;
      if (this.windowFill === this.windowSamples) {
        this.windowFill = 0;
        await this.consumeWindow(this.window.slice());
      }
    }
  }

  private async consumeWindow(window: Int16Array): Promise<void> {
    const windowStart = this.processedSamples;
    this.processedSamples += window.length;
    const probability = await this.vadStream.probability(int16ToFloat32(window));
    const event = this.segmenter.update(probability);

    if (!this.utterance) {
      if (event !== "start") {
        this.preRoll.push(window);
        if (this.preRoll.length > this.preRollWindows) this.preRoll.shift();
        return;
      }
      const preRoll = this.preRoll.splice(0);
      const startSample = windowStart - preRoll.length * this.windowSamples;
      this.heardLanguage = undefined;
      this.utterance = await this.openUtterance(startSample, []);
      preRoll.forEach((pcm, i) => {
        this.utterance!.unsent.push(pcm);
        this.trackSpeech({ startSample: startSample + i * this.windowSamples, pcm });
      });
      this.segment ??= this.newSegment(Math.floor(startSample / SAMPLES_PER_MS));
    }

    const utterance = this.utterance;
    utterance.unsent.push(window);
    const change = this.trackSpeech({ startSample: windowStart, pcm: window });
    if (utterance.unsent.length >= ASR_BATCH_WINDOWS) await flushToRecognizer(utterance);
    if (change) {
      await this.splitUtterance(change);
      return;
    }
    if (event === "end") {
      await this.finishUtterance(false);
      return;
    }
    utterance.sinceLastPartial += window.length;
    if (
      utterance.sinceLastPartial >= this.partialIntervalSamples &&
      this.options.asr.capabilities.partialResults
    ) {
      utterance.sinceLastPartial = 0;
      await flushToRecognizer(utterance);
      const hypothesis = await utterance.stream.partial();
      this.hear(hypothesis);
      const audioMs = (this.processedSamples - utterance.startSample) / SAMPLES_PER_MS;
      // A final carries its speaker's label for good: words stay interim until the tracker has
      // decided who says them and can no longer split them off as another voice.
      const tracker = this.options.speakers;
      const commitBeforeMs = tracker
        ? (tracker.settledBefore - utterance.startSample) / SAMPLES_PER_MS
        : Infinity;
      this.applyStabiliser(
        utterance.stabilizer.update(toStableWords(hypothesis), audioMs, commitBeforeMs),
        utterance.startSample,
        false,
      );
    }
    // After this window's transcripts are out, so measuring the voice never delays them.
    if (this.options.speakers?.current.decided !== false) this.observeSpeech(PROFILE_CHUNK_SAMPLES);
  }

  /** A new utterance (or the part of one after a change of speaker) starting at `startSample`. */
  private async openUtterance(
    startSample: number,
    audio: TimedWindow[],
  ): Promise<NonNullable<TranslationPipeline["utterance"]>> {
    const stream = await this.options.asr.createStream({
      language: this.options.sourceLanguage,
      context: this.context,
    });
    return {
      stream,
      startSample,
      sinceLastPartial: 0,
      unsent: audio.map((window) => window.pcm),
      audio,
      unobserved: this.options.voices ? [...audio] : [],
      awaitingInterimSince: performance.now(),
      stabilizer: new TranscriptStabilizer(this.options.finalizeMode, {
        holdBackMs: this.options.stabilizerHoldBackMs ?? 600,
        punctuated: this.options.asr.capabilities.punctuation,
      }),
    };
  }

  /** Hands a window of the open utterance to the speaker tracker and keeps it for the voices. */
  private trackSpeech(window: TimedWindow): SpeakerChange | undefined {
    const utterance = this.utterance!;
    if (this.options.voices) utterance.unobserved.push(window);
    const tracker = this.options.speakers;
    if (!tracker) return undefined;
    utterance.audio.push(window);
    const change = tracker.push(int16ToFloat32(window.pcm), window.startSample);
    this.speaking = tracker.current.speaker;
    return change;
  }

  /**
   * Hands the open utterance's speech to the voice chooser, under the current speaker, once at
   * least `minSamples` of it has gathered (speech before `beforeSample` only, when given).
   */
  private observeSpeech(minSamples: number, beforeSample = Infinity): void {
    const utterance = this.utterance;
    const voices = this.options.voices;
    if (!utterance || !voices) return;
    const taken = utterance.unobserved.filter((window) => window.startSample < beforeSample);
    if (taken.reduce((sum, window) => sum + window.pcm.length, 0) < Math.max(1, minSamples)) return;
    utterance.unobserved = utterance.unobserved.filter((window) => window.startSample >= beforeSample);
    voices.observe(this.speaking, concat(taken.map((window) => window.pcm)));
  }

  /**
   * The voice changed inside the utterance: what came before the change is finished as its own
   * segment, under the earlier speaker, and the rest opens a new utterance and segment. No final
   * lies past the change (words become final only once the tracker can no longer split before
   * them), so the later part repeats none. With word timings the recogniser's words are cut at
   * the change (a word across it stays whole in the earlier part, and the later part starts after
   * it); without, the earlier part is recognised again on its own. The later part (the tracker's
   * window, about 2 s) is recognised again.
   */
  private async splitUtterance(change: SpeakerChange): Promise<void> {
    const utterance = this.utterance!;
    let cutSample = change.atSample;
    let hypothesis: Hypothesis;
    if (this.options.asr.capabilities.wordTimings) {
      await flushToRecognizer(utterance);
      const whole = await utterance.stream.finish();
      const cutInUtteranceMs = (cutSample - utterance.startSample) / SAMPLES_PER_MS;
      const words = whole.words.filter((word) => word.startMs < cutInUtteranceMs);
      hypothesis = { ...whole, text: words.map((word) => word.word).join(" "), words };
      const lastEnd = utterance.startSample + Math.ceil((words.at(-1)?.endMs ?? 0) * SAMPLES_PER_MS);
      cutSample = Math.min(Math.max(cutSample, lastEnd), this.processedSamples);
    } else {
      utterance.stream.abort();
      const stream = await this.options.asr.createStream({
        language: this.options.sourceLanguage,
        context: this.context,
      });
      const head = utterance.audio
        .filter((window) => window.startSample < cutSample)
        .map((window) => window.pcm.subarray(0, cutSample - window.startSample));
      await stream.write(concat(head));
      hypothesis = await stream.finish();
    }
    const cutMs = Math.floor(cutSample / SAMPLES_PER_MS);
    this.speaking = change.before;
    this.hear(hypothesis);
    this.applyStabiliser(
      utterance.stabilizer.finish(toStableWords(hypothesis)),
      utterance.startSample,
      true,
      cutMs,
    );
    // Words an interim showed past the cut are the next speaker's: they are not committed here.
    if (this.segment) this.segment.shownPending = [];
    this.closeSegment(cutMs);
    this.observeSpeech(0, change.atSample);

    this.speaking = change.speaker;
    // From the cut on, including the part of the window it falls in.
    const rest = utterance.audio
      .filter((window) => window.startSample + window.pcm.length > cutSample)
      .map((window) =>
        window.startSample >= cutSample
          ? window
          : { startSample: cutSample, pcm: window.pcm.subarray(cutSample - window.startSample) },
      );
    this.utterance = await this.openUtterance(cutSample, rest);
    this.segment = this.newSegment(cutMs);
  }

  /** Notes the language an "auto" recogniser identified, for the segment being built. */
  private hear(hypothesis: Hypothesis): void {
    if (this.options.sourceLanguage === "auto" && hypothesis.language)
      this.heardLanguage = hypothesis.language;
  }

  /**
   * Ends the open utterance (VAD end, length cap, `finalize` or input that stopped mid-silence) and
   * emits its finals. `cut`: the input was cut short of a VAD window (not a VAD end).
   */
  private async finishUtterance(cut: boolean): Promise<void> {
    if (cut) {
      // Audio that does not fill a VAD window (sent within the finalize wait, or last before the
      // input stopped) still counts.
      if (this.utterance && this.windowFill > 0)
        this.utterance.unsent.push(this.window.slice(0, this.windowFill));
      this.processedSamples += this.windowFill;
      this.windowFill = 0;
      this.segmenter.reset();
      this.preRoll.length = 0;
    }
    const utterance = this.utterance;
    if (utterance) {
      // The utterance's finals carry the tracker's decision for its last run.
      if (this.options.speakers) this.speaking = this.options.speakers.endUtterance().speaker;
      const endedAt = performance.now();
      await flushToRecognizer(utterance);
      let hypothesis: Hypothesis;
      try {
        hypothesis = await utterance.stream.finish();
      } catch (error) {
        this.options.observer?.engineCall(
          "recognize",
          this.options.asr.info.id,
          (performance.now() - endedAt) / 1000,
          false,
        );
        throw error;
      }
      this.options.observer?.engineCall(
        "recognize",
        this.options.asr.info.id,
        (performance.now() - endedAt) / 1000,
        true,
      );
      this.hear(hypothesis);
      this.applyStabiliser(
        utterance.stabilizer.finish(toStableWords(hypothesis)),
        utterance.startSample,
        true,
      );
      this.options.observer?.latency("final_transcript", (performance.now() - endedAt) / 1000);
      this.observeSpeech(0);
    }
    this.utterance = undefined;
    this.closeSegment();
  }

  /** Closes the open segment: interim text no final covers gets one (ending at `endMs`). */
  private closeSegment(endMs = this.positionMs()): void {
    const segment = this.segment;
    this.segment = undefined;
    // Interim text that no final covers must be closed by a final, even an empty one. When the
    // recogniser's last pass withdrew words an interim showed and a final already holds the rest,
    // the shown words are committed: a final never repeats the previous one.
    if (segment && segment.lastShown !== joinWords(segment.committed))
      this.emitFinal(segment, segment.committed.length > 0 ? segment.shownPending : [], endMs);
  }

  /** `untimedEndMs`: where words without timings end (by default, the audio processed so far). */
  private applyStabiliser(
    update: { commits: StableWord[][]; pending: StableWord[] },
    utteranceStartSample: number,
    utteranceEnded: boolean,
    untimedEndMs = this.positionMs(),
  ): void {
    const utteranceStartMs = Math.floor(utteranceStartSample / SAMPLES_PER_MS);
    const endOf = (words: readonly StableWord[]): number => {
      const last = words.at(-1)?.endMs;
      return last === undefined ? untimedEndMs : utteranceStartMs + last;
    };
    for (const commit of update.commits) {
      const segment = (this.segment ??= this.newSegment(utteranceStartMs));
      this.emitFinal(segment, commit, endOf(commit));
      if (this.options.finalizeMode === "sentence") this.segment = undefined;
    }
    if (utteranceEnded || update.pending.length === 0) return;
    const segment = (this.segment ??= this.newSegment(utteranceStartMs));
    const committedText = this.options.finalizeMode === "stable" ? joinWords(segment.committed) : "";
    const pendingText = joinWords(update.pending);
    const text = [committedText, pendingText].filter(Boolean).join(" ");
    if (text === segment.lastShown) return;
    segment.lastShown = text;
    segment.shownPending = update.pending;
    segment.language = this.languageOf(segment);
    if (!segment.hasFinal) segment.speaker = this.speaking;
    const endMs = endOf(update.pending);
    if (this.utterance?.awaitingInterimSince !== undefined) {
      this.options.observer?.latency(
        "first_interim",
        (performance.now() - this.utterance.awaitingInterimSince) / 1000,
      );
      this.utterance.awaitingInterimSince = undefined;
    }
    this.events.push({
      type: "original",
      segmentId: segment.id,
      text,
      isFinal: false,
      startMs: segment.startMs,
      endMs,
      language: segment.language,
      ...this.speakerOf(segment),
    });
    this.translations.push({
      kind: "interim",
      segment,
      sourceText: pendingText,
      originalText: text,
      endMs,
      seq: ++segment.interimSeq,
      language: segment.language,
      speaker: segment.speaker,
      queuedAt: performance.now(),
    });
  }

  private emitFinal(segment: Segment, words: StableWord[], endMs: number): void {
    segment.committed.push(...words);
    const originalText = joinWords(segment.committed);
    segment.lastShown = originalText;
    segment.shownPending = [];
    segment.language = this.languageOf(segment);
    if (!segment.hasFinal) segment.speaker = this.speaking;
    segment.hasFinal = true;
    this.events.push({
      type: "original",
      segmentId: segment.id,
      text: originalText,
      isFinal: true,
      startMs: segment.startMs,
      endMs,
      language: segment.language,
      ...this.speakerOf(segment),
    });
    const sourceText = joinWords(words);
    this.translations.push({
      kind: "final",
      segment,
      sourceText,
      originalText,
      endMs,
      seq: segment.interimSeq,
      language: segment.language,
      speaker: segment.speaker,
      queuedAt: performance.now(),
    });
  }

  private newSegment(startMs: number): Segment {
    return {
      id: randomUUID(),
      startMs,
      committed: [],
      translatedSpans: [],
      lastShown: "",
      shownPending: [],
      interimSeq: 0,
      language: undefined,
      speaker: this.speaking,
      hasFinal: false,
    };
  }

  /** The `speaker` field of a segment's transcripts: only when the pipeline tells speakers apart. */
  private speakerOf(segment: { speaker: string | undefined }): { speaker?: string } {
    return this.options.speakers && segment.speaker !== undefined ? { speaker: segment.speaker } : {};
  }

  private languageOf(segment: Segment): LanguageCode | undefined {
    const { sourceLanguage } = this.options;
    return sourceLanguage === "auto" ? (this.heardLanguage ?? segment.language) : sourceLanguage;
  }

  private positionMs(): number {
    return Math.floor(this.processedSamples / SAMPLES_PER_MS);
  }

  // ------------------------------------------------------------------ translation stage

  private async translationStage(): Promise<void> {
    for await (const job of this.translations) {
      const { segment } = job;
      if (this.closed) continue;
      // Only the newest interim of a segment is worth translating.
      if (job.kind === "interim" && job.seq !== segment.interimSeq) continue;
      // Translation waits for the language to be identified ("auto"); the original transcript did not.
      const to = job.language === undefined ? undefined : this.options.targetFor(job.language);
      /** The span's translation; undefined when there is none (the failure has been reported). */
      let translatedSpan: string | undefined;
      if (job.language === undefined) {
        if (job.kind === "interim") continue;
        this.reportError("the language of this utterance could not be identified", segment.id);
      } else {
        const calling = job.sourceText !== "" && to !== undefined;
        const startedAt = performance.now();
        const reportCall = (ok: boolean) => {
          if (calling && this.options.engineIds)
            this.options.observer?.engineCall(
              "translate",
              this.options.engineIds.translate(job.language!, to!),
              (performance.now() - startedAt) / 1000,
              ok,
            );
        };
        try {
          translatedSpan = calling ? await this.translate(job, job.language, to) : job.sourceText;
          reportCall(true);
        } catch (error) {
          // A call cancelled by `close()` did not fail.
          if (this.closed) continue;
          reportCall(false);
          // The segment is named so the client can tell which line lost (part of) its translation.
          this.reportError(`translation failed: ${(error as Error).message}`, segment.id);
          if (job.kind === "interim") continue;
        }
      }
      // A final whose span has no translation still gets its translated final, without the span
      // (nothing is spoken for it), so a client waiting for the segment's translation is not left
      // waiting; the `error` before it says why.
      if (job.kind === "final" && translatedSpan !== undefined)
        this.history.record(job.sourceText, translatedSpan);
      const previous = segment.translatedSpans;
      if (translatedSpan !== undefined)
        translatedSpan = spanInSegment(segment, job.sourceText, translatedSpan);
      if (job.kind === "final" && translatedSpan) previous.push(translatedSpan);
      const text = [...previous, job.kind === "interim" ? translatedSpan : ""].filter(Boolean).join(" ");
      // The voice is chosen as the line is shown, so its `voiceId` is the voice that speaks it.
      const voice =
        to !== undefined && translatedSpan !== undefined
          ? this.options.voices?.voiceFor(job.speaker, to)
          : undefined;
      this.events.push({
        type: "translated",
        segmentId: segment.id,
        text,
        originalText: job.originalText,
        isFinal: job.kind === "final",
        startMs: segment.startMs,
        endMs: job.endMs,
        language: job.language,
        ...this.speakerOf(job),
        ...(voice?.matched ? { voiceId: voice.voice.id } : {}),
      });
      if (job.kind === "final")
        this.options.observer?.latency("translation", (performance.now() - job.queuedAt) / 1000);
      if (job.kind === "final" && translatedSpan && this.options.speak && to !== undefined)
        this.speech.push({
          text: translatedSpan,
          language: to,
          voice: voice?.voice,
          segmentId: segment.id,
          queuedAt: performance.now(),
        });
    }
    this.speech.close();
  }

  /**
   * One translation. A final line from a streaming translator is shown as it grows, as interim
   * translations of its segment, so a slow (LLM) translator still shows progress. A value is shown
   * only once a newer one proves it is not the whole translation, which the final carries anyway:
   * a translator that cannot stream yields just that one value, and it is not sent twice.
   */
  private async translate(job: TranslationJob, from: LanguageCode, to: LanguageCode): Promise<string> {
    const call: TargetedCall = {
      from,
      to,
      text: job.sourceText,
      context: this.context,
      previous: this.history.recent,
    };
    const stream = this.options.translateStream;
    const { signal } = this.cancellation;
    if (job.kind !== "final" || !stream) return this.options.translate(call, signal);
    const { segment } = job;
    let latest: string | undefined;
    let shownAt = 0;
    for await (const partial of stream(call, signal)) {
      const now = performance.now();
      if (latest !== undefined && now - shownAt >= STREAMED_INTERIM_INTERVAL_MS && !this.closed) {
        shownAt = now;
        this.events.push({
          type: "translated",
          segmentId: segment.id,
          text: [...segment.translatedSpans, spanInSegment(segment, job.sourceText, latest)]
            .filter(Boolean)
            .join(" "),
          originalText: job.originalText,
          isFinal: false,
          startMs: segment.startMs,
          endMs: job.endMs,
          language: from,
          ...this.speakerOf(job),
        });
      }
      latest = partial;
    }
    return latest ?? "";
  }

  // ------------------------------------------------------------------ synthesis stage

  /**
   * Emits each line's frames as the synthesiser yields them. One frame is held back until the next
   * arrives, so the last frame of the clip can carry `clipEnd`; a synthesis that fails part-way ends
   * its clip with the frames it produced, then reports the failure.
   */
  private async synthesisStage(): Promise<void> {
    for await (const { text, language, voice, segmentId, queuedAt } of this.speech) {
      if (this.closed) continue;
      let held: Float32Array | undefined;
      let failure: Error | undefined;
      const startedAt = performance.now();
      const synthesized = (ok: boolean) => {
        if (this.options.engineIds)
          this.options.observer?.engineCall(
            "synthesize",
            this.options.engineIds.synthesize(language),
            (performance.now() - startedAt) / 1000,
            ok,
          );
      };
      try {
        for await (const samples of this.options.speak!(text, language, voice, this.cancellation.signal)) {
          if (held) this.events.push({ type: "audio", samples: held, clipEnd: false });
          else {
            // The first frame: the synthesiser has answered.
            synthesized(true);
            this.options.observer?.latency("first_audio", (performance.now() - queuedAt) / 1000);
          }
          held = samples;
        }
      } catch (error) {
        failure = error as Error;
        if (!held && !this.closed) synthesized(false);
      }
      if (held) this.events.push({ type: "audio", samples: held, clipEnd: true });
      // A synthesis cancelled by `close()` did not fail.
      if (failure && !this.closed) this.reportError(`speech synthesis failed: ${failure.message}`, segmentId);
    }
  }

  /** Emits a non-fatal `error` event: the session goes on (a line may lack its translation or speech). */
  private reportError(message: string, segmentId?: string): void {
    this.events.push({ type: "error", message, fatal: false, ...(segmentId ? { segmentId } : {}) });
  }
}

/**
 * A translated span as shown in its segment. A translator takes every input for a sentence and
 * capitalises its first word — Apertium the first word it knows, after unknown words it copies and
 * interjections ("hola Estudio"). That capital is undone unless it opens the segment, so every
 * translation of the segment (interim, streamed or final) shows the words in the same case. A span
 * the recogniser began with a capital (a sentence start) and names copied from it keep theirs.
 * When the recogniser writes case (whisper), a capital inside the span is taken for a name
 * ("a Londres") and only a capital on the span's first word is undone.
 */
function spanInSegment(segment: Segment, source: string, translated: string): string {
  if (source.charAt(0) !== source.charAt(0).toLocaleLowerCase()) return translated;
  const sourceIsCased = source !== source.toLocaleLowerCase();
  const copied = new Set(source.split(/\s+/u));
  for (const { 0: word, index } of translated.matchAll(/\S+/gu)) {
    const letter = /\p{L}/u.exec(word);
    if (!letter || letter[0] === letter[0].toLocaleLowerCase() || copied.has(word)) continue;
    if (index === 0 && segment.translatedSpans.length === 0) return translated;
    if (index > 0 && sourceIsCased) return translated;
    const at = index + letter.index;
    return translated.slice(0, at) + letter[0].toLocaleLowerCase() + translated.slice(at + letter[0].length);
  }
  return translated;
}

function toStableWords(hypothesis: Hypothesis): StableWord[] {
  const timed = hypothesis.words;
  const words = hypothesis.text.split(/\s+/u).filter(Boolean);
  // Word timings are used only when they line up with the text (engines may omit them on partials).
  if (timed.length === words.length) return timed.map((w, i) => ({ text: words[i]!, endMs: w.endMs }));
  return words.map((text) => ({ text }));
}
