import { openRecognition } from "../../engines/kit/asr-stream.js";
import type { SessionContext } from "../../core/glossary.js";
import { EngineUnavailableError } from "../../core/busy.js";
import type {
  AsrEngine,
  AsrStreamOptions,
  Hypothesis,
  LanguageCode,
  RecognitionEvent,
  RecognitionStream,
} from "../../core/contracts.js";
import type { SpeakerChange } from "../../speakers/tracker.js";
import type { HypothesisFrame, PipelineObserver, SpeechFrame, TimedWindow } from "../frames.js";
import { SAMPLES_PER_MS } from "./audio-intake.js";
import type { SpeakerSplit } from "./speaker-split.js";

interface OpenUtterance {
  readonly startSample: number;
  /** Undefined while the recognition is being opened. */
  stream: RecognitionStream | undefined;
}

/** Recognizer writes collected before they are passed on (3 VAD windows): each call has a fixed cost. */
const ASR_BATCH_WINDOWS = 3;

export interface UtteranceRecognitionOptions {
  readonly asr: AsrEngine;
  readonly sourceLanguage: LanguageCode | "auto";
  /** The session context an utterance is opened with. */
  readonly context: () => SessionContext;
  /** Whose audio (`AsrStreamOptions.account`). */
  readonly account?: string;
  /** How often interim hypotheses are asked of engines that must be asked (see `openRecognition`). */
  readonly partialIntervalMs: number;
  readonly speakers: SpeakerSplit;
  /** Samples processed by the intake so far. */
  readonly processedSamples: () => number;
  /** Recognition ended the utterance at the recognizer's endpoint (the intake's VAD starts over). */
  readonly onEndpoint: () => void;
  readonly observer: PipelineObserver | undefined;
  /** The engine that opened the current stream, for the metrics (default: `asr`'s own id). */
  readonly engineId?: () => string;
  /**
   * The recognizer lost the utterance in progress (its process died or stopped answering): the
   * session is told, and recognition goes on with the next utterance.
   */
  readonly onLost: (message: string) => void;
}

/**
 * Stage 2, utterance recognition: speech in, hypotheses out. Opens one recognition per utterance
 * (push-style: the engine's own, or the polling adapter of src/engines/kit/asr-stream.ts), writes its
 * windows, and passes on what it hears — partials as the engine reports them, the final when the
 * utterance ends — with the speaker context they were heard in (`SpeakerSplit`). A change of voice
 * inside an utterance splits it in two (`split`). `next` is segment building; it runs synchronously.
 */
export class UtteranceRecognition {
  private utterance: OpenUtterance | undefined;
  /** The recognizer reported the end of the open utterance; it is finished after the current write. */
  private endpointHeard = false;

  constructor(
    private readonly options: UtteranceRecognitionOptions,
    private readonly next: (frame: HypothesisFrame, speaker: string | undefined) => void,
  ) {}

  async handle(frame: SpeechFrame): Promise<void> {
    try {
      await this.recognize(frame);
    } catch (error) {
      if (!(error instanceof EngineUnavailableError)) throw error;
      this.lose(error);
    }
  }

  /**
   * The utterance in progress is lost with the recognizer's process: its segment ends with what was
   * shown of it, and the rest of its audio is skipped until the next utterance opens a new stream.
   */
  private lose(error: Error): void {
    this.utterance?.stream?.abort();
    this.utterance = undefined;
    this.endpointHeard = false;
    this.options.onLost(`speech recognition lost an utterance (${error.message}); recognition goes on`);
    this.next({ kind: "segment-end", endMs: undefined, cut: false }, this.options.speakers.currentSpeaker);
  }

  private async recognize(frame: SpeechFrame): Promise<void> {
    const { speakers } = this.options;
    if (frame.kind === "speech-start") {
      return this.open(frame.startSample, frame.preRoll, true);
    }
    if (frame.kind === "flush") return this.finish(frame.tail);
    const { window, ending } = frame;
    const change = await speakers.track(window);
    if (change) return this.split(change, window.pcm);
    // An utterance lost with its recognizer: its remaining audio is not recognized.
    if (!this.utterance) return;
    if (ending) return this.finish(window.pcm);
    await this.utterance.stream!.write(window.pcm);
    speakers.observeWhileSpeaking();
    if (this.endpointHeard) {
      // The recognizer heard the utterance end with the audio it has: finished as at a VAD end.
      await this.finish(undefined);
      this.options.onEndpoint();
    }
  }

  private streamOptions(): AsrStreamOptions {
    const { sourceLanguage, account } = this.options;
    return {
      language: sourceLanguage,
      context: this.options.context().text,
      glossary: this.options.context().glossary,
      ...(account === undefined ? {} : { account }),
    };
  }

  private engineId(): string {
    return this.options.engineId?.() ?? this.options.asr.info.id;
  }

  abort(): void {
    this.utterance?.stream?.abort();
    this.utterance = undefined;
  }

  /**
   * A new utterance (or the part of one after a change of speaker) starting at `startSample`, with
   * `lead` (its pre-roll, or its audio since the change) written first.
   */
  private async open(startSample: number, lead: readonly TimedWindow[], onset: boolean): Promise<void> {
    const { asr, partialIntervalMs, speakers } = this.options;
    const utterance: OpenUtterance = { startSample, stream: undefined };
    this.utterance = utterance;
    this.endpointHeard = false;
    // The pre-roll of an onset is tracked now; the part after a split was tracked already.
    speakers.begin(onset ? [] : [...lead]);
    if (onset) for (const window of lead) await speakers.track(window);
    this.next({ kind: "utterance-start", startSample, onset }, speakers.currentSpeaker);
    const onEvent = (event: RecognitionEvent) => {
      // Events of an utterance already finished (or split) are stale.
      if (this.utterance !== utterance) return;
      if (event.type === "endpoint") this.endpointHeard = true;
      else this.partial(event.hypothesis, event.audioMs);
    };
    utterance.stream = await openRecognition(
      asr,
      { ...this.streamOptions(), onEvent },
      { intervalSamples: partialIntervalMs * SAMPLES_PER_MS, batchWrites: ASR_BATCH_WINDOWS },
      lead.map((window) => window.pcm),
    );
  }

  private partial(hypothesis: Hypothesis, audioMs: number): void {
    const { speakers } = this.options;
    // A final carries its speaker's label for good: words stay interim until the tracker has
    // decided who says them and can no longer split them off as another voice.
    const commitBeforeMs = (speakers.settledBeforeSample - this.utterance!.startSample) / SAMPLES_PER_MS;
    this.next({ kind: "partial", hypothesis, audioMs, commitBeforeMs }, speakers.currentSpeaker);
  }

  /**
   * Ends the open utterance (VAD end, length cap, a flush) after its `lastAudio`, and passes on its
   * final; then its segment ends.
   */
  private async finish(lastAudio: Int16Array | undefined): Promise<void> {
    const { speakers, observer } = this.options;
    const utterance = this.utterance;
    if (utterance) {
      // The utterance's finals carry the tracker's decision for its last run.
      await speakers.endUtterance();
      const endedAt = performance.now();
      let hypothesis: Hypothesis;
      try {
        hypothesis = await utterance.stream!.finish(lastAudio);
      } catch (error) {
        observer?.engineCall("recognize", this.engineId(), (performance.now() - endedAt) / 1000, false);
        throw error;
      } finally {
        this.utterance = undefined;
      }
      observer?.engineCall("recognize", this.engineId(), (performance.now() - endedAt) / 1000, true);
      this.next({ kind: "final", hypothesis, untimedEndMs: undefined }, speakers.currentSpeaker);
      observer?.latency("final_transcript", (performance.now() - endedAt) / 1000);
      speakers.observe(0);
    }
    this.next({ kind: "segment-end", endMs: undefined, cut: false }, speakers.currentSpeaker);
  }

  /**
   * The voice changed inside the utterance: what came before the change is finished as its own
   * segment, under the earlier speaker, and the rest opens a new utterance and segment. No final
   * lies past the change (words become final only once the tracker can no longer split before
   * them), so the later part repeats none. With word timings the recognizer's words are cut at
   * the change (a word across it stays whole in the earlier part, and the later part starts after
   * it); without, the earlier part is recognized again on its own. The later part (the tracker's
   * window, about 2 s) is recognized again.
   */
  private async split(change: SpeakerChange, window: Int16Array): Promise<void> {
    const { asr, speakers } = this.options;
    const utterance = this.utterance!;
    this.utterance = undefined;
    let cutSample = change.atSample;
    let hypothesis: Hypothesis;
    if (asr.capabilities.wordTimings) {
      const whole = await utterance.stream!.finish(window);
      const cutInUtteranceMs = (cutSample - utterance.startSample) / SAMPLES_PER_MS;
      const words = whole.words.filter((word) => word.startMs < cutInUtteranceMs);
      hypothesis = { ...whole, text: words.map((word) => word.word).join(" "), words };
      const lastEnd = utterance.startSample + Math.ceil((words.at(-1)?.endMs ?? 0) * SAMPLES_PER_MS);
      cutSample = Math.min(Math.max(cutSample, lastEnd), this.options.processedSamples());
    } else {
      utterance.stream!.abort();
      const stream = await asr.createStream(this.streamOptions());
      await stream.write(speakers.audioBefore(cutSample));
      hypothesis = await stream.finish();
    }
    const cutMs = Math.floor(cutSample / SAMPLES_PER_MS);
    speakers.currentSpeaker = change.before;
    this.next({ kind: "final", hypothesis, untimedEndMs: cutMs }, speakers.currentSpeaker);
    this.next({ kind: "segment-end", endMs: cutMs, cut: true }, speakers.currentSpeaker);
    speakers.observe(0, change.atSample);
    speakers.currentSpeaker = change.speaker;
    await this.open(cutSample, speakers.audioFrom(cutSample), false);
  }
}
