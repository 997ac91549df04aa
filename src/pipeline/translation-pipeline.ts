import type { AsrEngine, LanguageCode, SpeakerEngine, VadEngine } from "../core/contracts.js";
import { sessionContext, type SessionContext } from "../core/glossary.js";
import { spellHypothesis } from "../core/glossary-spelling.js";
import { SpeakerTracker } from "../speakers/tracker.js";
import type { VoiceChooser } from "../speakers/voice-choice.js";
import type {
  LaneInput,
  LineFrame,
  PipelineEvent,
  PipelineObserver,
  SpeakFn,
  TranslateFn,
  TranslateStreamFn,
  TranslationInput,
} from "./frames.js";
import type { Route } from "./language-plan.js";
import { BoundedQueue } from "../core/queue.js";
import { INPUT_SAMPLE_RATE } from "@relay-translate/client/protocol";
import { DEFAULT_SEGMENTER_OPTIONS, type SegmenterOptions } from "./segmenter.js";
import type { FinalizeMode } from "./stabilizer.js";
import { AudioIntake, SAMPLES_PER_MS } from "./stages/audio-intake.js";
import { EventOutput } from "./stages/output.js";
import { queueForTranslation, SegmentBuilder } from "./stages/segment-builder.js";
import { SpeakerSplit } from "./stages/speaker-split.js";
import { SynthesisStage } from "./stages/synthesis.js";
import type { PaceOptions } from "./pacing.js";
import { TranslationStage } from "./stages/translation.js";
import { UtteranceRecognition } from "./stages/utterance-recognition.js";

export type {
  PipelineEvent,
  PipelineObserver,
  PipelineStage,
  SpeakFn,
  TargetedCall,
  TranslateFn,
  TranslateStreamFn,
  TranslationCall,
} from "./frames.js";

/**
 * The streaming translation pipeline of the live surfaces (WebSocket sessions and rooms; dubbing
 * works on whole files in src/dubbing). Frames flow one way through its stages
 * (src/pipeline/stages/, one per file):
 *
 *   audio → intake (level, VAD, pre-roll) → recognition ⇄ speaker split → segment building
 *         → translation → synthesis → output (events)
 *
 * Intake through segment building run as one loop, each stage awaiting the next (recognition's
 * pace is the intake's pace). After segment building the fan-out hands each job to the lanes its
 * `routes` name — a session's one lane, a room speaker's lane per language heard — each a
 * translation and a synthesis stage running as loops of their own behind bounded queues, so slow
 * translation or synthesis never stalls recognition (nor one lane another) until a bound is reached.
 * The links and their rules:
 *
 *   link                         bound                              at the bound
 *   input → intake               `maxBacklogMs` of audio (30 s)     the chunk is dropped, reported
 *                                                                   (`inputDropped`, one error per episode)
 *   segments → fan-out,          TRANSLATION_QUEUE_JOBS jobs each   interims: the newest replaces its
 *   fan-out → each lane's                                           segment's queued one, else dropped;
 *   translation                                                     finals wait (backpressure)
 *   translation → synthesis      SPEECH_QUEUE_FRAMES line frames    waits (backpressure)
 *   synthesis (lines waiting)    MAX_WAITING_LINES lines            waits (backpressure)
 *   output                       none (drained by the surface)      —
 *
 * The fan-out also keeps the two rules every lane shares: an unidentified final is reported once,
 * and a `finalize` is passed to every lane, the `finalized` event following when all have passed it.
 *
 * Control: `finalize` and `end` travel as flush/end frames behind the audio; `close` cancels:
 * queued input is dropped and the pipeline's signal aborts every engine call in flight.
 */

/** Jobs waiting for translation. */
export const TRANSLATION_QUEUE_JOBS = 32;
/** Line frames (text pieces, flushes) waiting for synthesis. */
export const SPEECH_QUEUE_FRAMES = 64;

export interface PipelineOptions {
  readonly vad: VadEngine;
  readonly asr: AsrEngine;
  /** The spoken language, or "auto": each utterance is identified by the recognizer. */
  readonly sourceLanguage: LanguageCode | "auto";
  /**
   * Where an utterance heard in `language` (undefined: not identified) goes, asked per utterance
   * (a room's listeners come and go): its lanes and the language each translates it into (the
   * language plan's `routes`). A lane's `audio` events are tagged with their language.
   */
  readonly routes: (language: LanguageCode | undefined) => readonly Route[];
  readonly translate: TranslateFn;
  /** When the translator can stream, final lines are shown (and spoken) as they grow. */
  readonly translateStream?: TranslateStreamFn;
  /** Absent when audio output is disabled. */
  readonly speak?: SpeakFn;
  /** Speech keeps pace with the speaker (src/pipeline/pacing.ts); undefined: natural speed always. */
  readonly pace?: PaceOptions | undefined;
  readonly finalizeMode: FinalizeMode;
  readonly context?: string;
  /** Whose audio: recognizers shared by every session serve accounts in turn. */
  readonly account?: string;
  /** How long `finalize` waits for audio frames still in flight. */
  readonly finalizeWaitMs?: number;
  /** Audio queued for recognition beyond this is dropped (the server is falling behind). */
  readonly maxBacklogMs?: number;
  /** How often interim hypotheses are asked of recognizers that do not push them. */
  readonly partialIntervalMs?: number;
  /** Audio kept from before speech onset so the first phoneme is not clipped. */
  readonly preRollMs?: number;
  readonly segmenter?: Partial<Omit<SegmenterOptions, "windowMs">>;
  /** Recent words (within this of the audio head) are not committed as finals yet. */
  readonly stabilizerHoldBackMs?: number;
  /**
   * Tells the speakers apart (relay-2): transcripts carry their speaker's label, and an utterance
   * is split where the voice changes inside it. The pipeline's own tracker uses it, so closing the
   * pipeline also cancels the voiceprints still waiting.
   */
  readonly speakers?: SpeakerEngine;
  /** Chooses each line's voice, from the speech of its speaker where it follows the speaker. */
  readonly voices?: VoiceChooser;
  readonly observer?: PipelineObserver;
  /** Which engine serves a call, for the observer. */
  readonly engineIds?: {
    recognize(): string;
    translate(from: LanguageCode, to: LanguageCode): string;
    synthesize(language: LanguageCode): string;
  };
}

export class TranslationPipeline {
  private readonly output = new EventOutput();
  readonly events = this.output.events;

  private readonly intake: AudioIntake;
  private readonly recognition: UtteranceRecognition;
  private context: SessionContext;
  /** Tells the recognizer about a new context ahead of the next utterance (`AsrEngine.prepare`). */
  private readonly prepareRecognition: (context: SessionContext) => void;
  private closed = false;
  /** Fired by `close()`: cancels the translation and synthesis calls still running. */
  private readonly cancellation = new AbortController();
  private readonly stages: Promise<void>;
  /** What comes after the intake: its queues and synthesis stages (every lane's, as lanes start). */
  private readonly downstream: { readonly idle: boolean }[] = [];
  private readonly voices: VoiceChooser | undefined;

  constructor(options: PipelineOptions) {
    const { vad, asr, observer } = options;
    this.voices = options.voices;
    if (
      vad.capabilities.sampleRate !== INPUT_SAMPLE_RATE ||
      asr.capabilities.sampleRate !== INPUT_SAMPLE_RATE
    ) {
      throw new Error("the pipeline takes 16 kHz input; the configured VAD and ASR must accept 16 kHz");
    }
    // One preparation at a time, then only the latest context: a client that changes its context
    // in a loop costs one preparation at a time. A recognizer that cannot get ready now does so when
    // the utterance opens its stream.
    let preparing = false;
    let next: SessionContext | undefined;
    this.prepareRecognition = (context) => {
      if (!asr.prepare || context.glossary.terms.length === 0) return;
      next = context;
      if (preparing) return;
      preparing = true;
      void (async () => {
        for (let wanted: SessionContext | undefined = next; wanted && !this.closed; wanted = next) {
          next = undefined;
          const { text, glossary } = wanted;
          await asr.prepare!({ language: options.sourceLanguage, context: text, glossary }).catch(
            () => undefined,
          );
        }
        preparing = false;
      })();
    };
    this.context = sessionContext(options.context);
    this.prepareRecognition(this.context);
    const { emit, reportError } = this.output;
    const { signal } = this.cancellation;
    this.intake = new AudioIntake({
      vad,
      segmenter: { ...DEFAULT_SEGMENTER_OPTIONS, ...options.segmenter },
      preRollMs: options.preRollMs ?? 300,
      maxBacklogMs: options.maxBacklogMs ?? 30_000,
      finalizeWaitMs: options.finalizeWaitMs ?? 300,
      onDropped: (seconds, firstOfEpisode) => {
        observer?.inputDropped(seconds);
        if (firstOfEpisode)
          reportError("the server is falling behind this session's audio; audio is being dropped");
      },
    });
    const translations = new BoundedQueue<TranslationInput>(TRANSLATION_QUEUE_JOBS);
    this.downstream.push(translations);
    const tracker = options.speakers && new SpeakerTracker(options.speakers, signal);
    const speakers = new SpeakerSplit(tracker, options.voices);
    const segments = new SegmentBuilder(
      {
        finalizeMode: options.finalizeMode,
        sourceLanguage: options.sourceLanguage,
        punctuated: asr.capabilities.punctuation,
        stabilizerHoldBackMs: options.stabilizerHoldBackMs ?? 600,
        labelling: speakers.labelling,
        positionMs: () => Math.floor(this.intake.processedSamples / SAMPLES_PER_MS),
        emit,
        observer,
      },
      translations,
    );
    this.recognition = new UtteranceRecognition(
      {
        asr,
        sourceLanguage: options.sourceLanguage,
        context: () => this.context,
        ...(options.account === undefined ? {} : { account: options.account }),
        partialIntervalMs: options.partialIntervalMs ?? 150,
        speakers,
        processedSamples: () => this.intake.processedSamples,
        onEndpoint: () => this.intake.utteranceEnded(),
        onLost: (message) => reportError(message),
        observer,
        ...(options.engineIds ? { engineId: options.engineIds.recognize } : {}),
      },
      (frame, speaker) =>
        segments.handle(
          "hypothesis" in frame
            ? { ...frame, hypothesis: spellHypothesis(frame.hypothesis, this.context.glossary) }
            : frame,
          speaker,
        ),
    );
    /** One lane: a translation stage (and synthesis stage) behind its own queue. */
    const lane = (input: BoundedQueue<LaneInput>): Promise<unknown> => {
      const speech = options.speak ? new BoundedQueue<LineFrame>(SPEECH_QUEUE_FRAMES) : undefined;
      this.downstream.push(input);
      if (speech) this.downstream.push(speech);
      const translation = new TranslationStage(
        {
          translate: options.translate,
          ...(options.translateStream ? { translateStream: options.translateStream } : {}),
          ...(options.voices ? { voices: options.voices } : {}),
          context: () => this.context,
          signal,
          emit,
          reportError,
          ...(observer ? { observer } : {}),
          ...(options.engineIds ? { engineId: options.engineIds.translate } : {}),
        },
        input,
        speech,
      );
      const synthesis =
        options.speak && speech
          ? new SynthesisStage(
              {
                speak: options.speak,
                signal,
                emit,
                reportError,
                ...(observer ? { observer } : {}),
                ...(options.engineIds ? { engineId: options.engineIds.synthesize } : {}),
                pace: options.pace,
              },
              speech,
            )
          : undefined;
      if (synthesis) this.downstream.push(synthesis);
      return Promise.all([translation.run(), synthesis?.run()]);
    };
    const translating = fanOut(translations, options.routes, { signal, emit, reportError }, lane);
    const recognizing = this.intake
      .run(async (frame) => {
        await this.recognition.handle(frame);
        await segments.deliver();
        // Travels behind the finals the flush committed: `finalized` comes out after them.
        if (frame.kind === "flush" && frame.reason === "finalize")
          await translations.put({ kind: "finalized" });
      })
      .catch((error: unknown) => this.output.fail(`speech recognition failed: ${(error as Error).message}`))
      .finally(async () => {
        this.recognition.abort();
        // Finals built before a failure are still translated.
        await segments.deliver();
        translations.close();
      });
    this.stages = Promise.all([recognizing, translating]).then(() => this.output.close());
  }

  /** Queues PCM16 16 kHz mono audio. Never blocks; drops audio when recognition is far behind. */
  pushAudio(pcm: Int16Array): void {
    this.intake.push(pcm);
  }

  /**
   * Commits the current segment after waiting for audio still in flight; a `finalized` event follows
   * once everything received before it is out (its finals, translations and speech). Calls within
   * that wait coalesce (one `finalized`).
   */
  finalize(): void {
    this.intake.finalize();
  }

  /**
   * Applies to the next recognized utterance and every later translation. Returns the terms it found
   * past the glossary's bound, which are not used.
   */
  setContext(context: string): number {
    this.context = sessionContext(context);
    this.prepareRecognition(this.context);
    return this.context.glossary.ignored;
  }

  /** Terms of the session's context past the glossary's bound (not used). */
  get ignoredTerms(): number {
    return this.context.glossary.ignored;
  }

  /** Session position of the audio received so far, in ms. */
  get receivedMs(): number {
    return Math.floor(this.intake.receivedSamples / SAMPLES_PER_MS);
  }

  /** Audio received and not yet recognized, in ms (what `maxBacklogMs` bounds). */
  get backlogMs(): number {
    return Math.floor((this.intake.receivedSamples - this.intake.processedSamples) / SAMPLES_PER_MS);
  }

  /**
   * Some stage has work in hand: audio not yet recognized, a flush due, a job or line queued or
   * being translated or spoken. False once everything received has been carried to the output.
   */
  get working(): boolean {
    return this.intake.working || this.downstream.some((part) => !part.idle);
  }

  /**
   * Ends the input as if the speaker had stopped: the audio already received, including an
   * utterance still in progress, is recognized, translated and spoken; then `events` ends.
   */
  async end(): Promise<void> {
    if (!this.closed) this.intake.end();
    await this.stages;
  }

  /**
   * Stops all stages and cancels the translation and synthesis calls still running; events already
   * queued are still delivered, then `events` ends.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.intake.cancel();
    this.cancellation.abort(new Error("the session was closed"));
    // Speakers' measurements (tone colours) end with the session.
    this.voices?.close?.();
    await this.stages;
  }
}

/** What a final whose language was not identified ("auto", two-way) is reported with. */
export const UNIDENTIFIED_LANGUAGE = "the language of this utterance could not be identified";

/**
 * Hands each translation job to the lanes its routes name, creating lanes as they first appear;
 * a lane's queue has the link's bound and rule (`queueForTranslation`). Reports an unidentified
 * final once, whatever its routes, and passes each `finalize` to every lane: `finalized` is emitted
 * once they all have passed it (at once when there is no lane yet: nothing is in flight). Resolves
 * when the input has ended and every lane has finished.
 */
async function fanOut(
  jobs: BoundedQueue<TranslationInput>,
  routes: (language: LanguageCode | undefined) => readonly Route[],
  output: {
    readonly signal: AbortSignal;
    readonly emit: (event: PipelineEvent) => void;
    readonly reportError: (message: string, segmentId?: string) => void;
  },
  startLane: (input: BoundedQueue<LaneInput>) => Promise<unknown>,
): Promise<void> {
  const { signal, emit, reportError } = output;
  const lanes = new Map<string, { input: BoundedQueue<LaneInput>; done: Promise<unknown> }>();
  try {
    for await (const job of jobs) {
      if (signal.aborted) continue;
      if (job.kind === "finalized") {
        let waiting = lanes.size;
        const passed = () => {
          if (--waiting === 0) emit({ type: "finalized" });
        };
        if (waiting === 0) emit({ type: "finalized" });
        for (const { input } of lanes.values()) await input.put({ kind: "finalized", passed });
        continue;
      }
      if (job.language === undefined && job.kind === "final")
        reportError(UNIDENTIFIED_LANGUAGE, job.segment.id);
      for (const { lane: name, to } of routes(job.language)) {
        let lane = lanes.get(name);
        if (!lane) {
          const input = new BoundedQueue<LaneInput>(TRANSLATION_QUEUE_JOBS);
          lane = { input, done: startLane(input) };
          lanes.set(name, lane);
        }
        await queueForTranslation(lane.input, { ...job, to });
      }
    }
  } finally {
    for (const { input } of lanes.values()) input.close();
    await Promise.all([...lanes.values()].map(({ done }) => done));
  }
}
