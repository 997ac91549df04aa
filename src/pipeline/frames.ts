import type { Hypothesis, LanguageCode, ToneColor, TranslationCall, Voice } from "../core/contracts.js";

export type { TranslationCall } from "../core/contracts.js";

/**
 * The pipeline's types: what callers give it and get from it (the public part, shared with the
 * language plan, metrics and the wire format), and the frames its stages pass one way to each other
 * (src/pipeline/stages/). A module of types only, so every stage and every caller can import it
 * without an import cycle.
 */

// ------------------------------------------------------------------ what callers give and get

/** A translation the pipeline asks for: into `to`, the language of the utterance's lane (its route). */
export interface TargetedCall extends TranslationCall {
  readonly to: LanguageCode;
}
/** Translates one text. `signal` fires when the pipeline is closed: the work is no longer wanted. */
export type TranslateFn = (call: TargetedCall, signal: AbortSignal) => Promise<string>;
/** Streams a translation: each value is the translation so far; the last one is the translation. */
export type TranslateStreamFn = (call: TargetedCall, signal: AbortSignal) => AsyncIterable<string>;
/**
 * Renders one sentence of translated text (in `language`) as standalone output frames, yielded as
 * they are ready, in `voice` (the pipeline's `voices` chose it; undefined without them), converted
 * to `toneColor` when the speaker's own voice is known (clone voices). `signal` fires when the
 * pipeline is closed.
 */
export type SpeakFn = (
  text: string,
  language: LanguageCode,
  voice: Voice | undefined,
  signal: AbortSignal,
  toneColor?: ToneColor,
) => AsyncIterable<Float32Array>;

/** Latencies a pipeline reports (see `PipelineObserver`). */
export type PipelineStage = "first_interim" | "final_transcript" | "translation" | "first_audio";

/** Where a pipeline reports its timings (the service's metrics); every call is cheap and synchronous. */
export interface PipelineObserver {
  /**
   * first_interim: speech onset → the utterance's first interim; final_transcript: end of the
   * utterance → its final; translation: a final → its translation; first_audio: a line's first
   * translated text (a streamed translation's first piece) → its first speech frame.
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
  /** `seconds` of translated speech were spoken at `speed` times the voice's natural rate (pacing). */
  speech?(speed: number, seconds: number): void;
}

interface TranscriptFields {
  /** Groups an original transcript with its translation (`correlation_id`). */
  readonly segmentId: string;
  readonly text: string;
  readonly isFinal: boolean;
  /** Position in the session audio, ms from the first sample received. */
  readonly startMs: number;
  readonly endMs: number;
  /** The language heard; undefined until an "auto" session's recognizer has identified it. */
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
      /** The translation's language; undefined when the utterance is passed through untranslated. */
      readonly to?: LanguageCode;
    } & TranscriptFields)
  /** One frame of translated speech in `language`; `clipEnd` marks the last frame of a line's clip. */
  | {
      readonly type: "audio";
      readonly samples: Float32Array;
      readonly clipEnd: boolean;
      readonly language: LanguageCode;
    }
  /**
   * `fatal`: the pipeline cannot continue (an engine failed); the session should end. `segmentId`:
   * the segment the failure concerns (its translation or speech is missing), when there is one.
   */
  | {
      readonly type: "error";
      readonly message: string;
      readonly fatal: boolean;
      readonly segmentId?: string;
    }
  /** Everything before a `finalize` is out: its finals, their translations and speech. */
  | { readonly type: "finalized" };

// ------------------------------------------------------------------ frames between stages

/**
 * Control frames. `flush`: close what is open now (the utterance, or a line's text) without
 * waiting for more; `end`: no more input, carry what was received through, then end; `cancel`:
 * stop at once, dropping what is queued (engine calls in flight are aborted by the pipeline's
 * signal, which travels beside the frames).
 */
export type FlushFrame = {
  readonly kind: "flush";
  /** finalize: the client asked; silence: the input stopped mid-silence; end: the input ended. */
  readonly reason: "finalize" | "silence" | "end";
};
export type EndFrame = { readonly kind: "end" };
export type CancelFrame = { readonly kind: "cancel" };
export type ControlFrame = FlushFrame | EndFrame | CancelFrame;

/** Input audio: PCM16 16 kHz mono, as the client sent it. */
export type AudioFrame = { readonly kind: "audio"; readonly pcm: Int16Array };

/** One VAD window of speech and its session position (samples from the first one received). */
export interface TimedWindow {
  readonly startSample: number;
  readonly pcm: Int16Array;
}

/** Audio intake → recognition: speech as the VAD delimits it. */
export type SpeechFrame =
  /** Speech began; `preRoll` holds the windows just before the onset, oldest first. */
  | { readonly kind: "speech-start"; readonly startSample: number; readonly preRoll: readonly TimedWindow[] }
  /** A window of the open utterance; `ending`: the VAD heard the utterance end with it. */
  | { readonly kind: "speech"; readonly window: TimedWindow; readonly ending: boolean }
  /** The utterance was cut short (see `FlushFrame`): `tail` is audio short of a VAD window. */
  | {
      readonly kind: "flush";
      readonly reason: FlushFrame["reason"];
      readonly tail: Int16Array | undefined;
    };

/** Recognition → segment building: what the recognizer heard, with the context it was heard in. */
export type HypothesisFrame =
  /** A new utterance (or the part after a change of speaker) begins at `startSample`. */
  | { readonly kind: "utterance-start"; readonly startSample: number; readonly onset: boolean }
  /** An interim hypothesis of the open utterance. */
  | {
      readonly kind: "partial";
      readonly hypothesis: Hypothesis;
      /** Utterance audio the hypothesis covers, ms. */
      readonly audioMs: number;
      /** Words ending after this (ms into the utterance) may still change speaker: not final yet. */
      readonly commitBeforeMs: number;
    }
  /** The utterance's final hypothesis; `untimedEndMs`: where words without timings end. */
  | { readonly kind: "final"; readonly hypothesis: Hypothesis; readonly untimedEndMs: number | undefined }
  /** The segment ends at `endMs` (after a final; `cut`: the voice changed there). */
  | { readonly kind: "segment-end"; readonly endMs: number | undefined; readonly cut: boolean };

/** A segment's state as its translations are built (owned by segment building, read downstream). */
export interface Segment {
  readonly id: string;
  readonly startMs: number;
  /** Bumped on every interim so stale interim translations can be skipped. */
  interimSeq: number;
}

/**
 * A `finalize` carried through the stages behind the work before it. The fan-out hands every lane
 * one with `passed`, which the lane's last stage calls once everything before it is out; the
 * `finalized` event follows when every lane has passed it.
 */
export type FinalizedFrame = { readonly kind: "finalized" };
export type LaneFinalizedFrame = FinalizedFrame & { readonly passed: () => void };

/** Segment building → translation: one text to translate. */
export interface TranslationJob {
  readonly kind: "interim" | "final";
  readonly segment: Segment;
  /** Interim: the uncommitted tail; final: the newly committed span. */
  readonly sourceText: string;
  /** The full original text the emitted translation corresponds to. */
  readonly originalText: string;
  readonly endMs: number;
  readonly seq: number;
  readonly language: LanguageCode | undefined;
  /** The speaker as the tracker labels them (their voice is chosen by it). */
  readonly speaker: string | undefined;
  /** The speaker's label as transcripts show it; undefined when the pipeline does not tell speakers apart. */
  readonly label: string | undefined;
  /** When the job was queued (performance.now()), for the translation latency. */
  readonly queuedAt: number;
}

/** What the link from segment building to the fan-out carries. */
export type TranslationInput = TranslationJob | FinalizedFrame;

/** A job on a lane: the language it is translated into there (undefined: passed through untranslated). */
export type RoutedJob = TranslationJob & { readonly to: LanguageCode | undefined };

/** What the link from the fan-out to a lane's translation carries. */
export type LaneInput = RoutedJob | LaneFinalizedFrame;

/** One spoken line: a final span's translation, in its language and voice. */
export interface SpokenLine {
  readonly segmentId: string;
  readonly language: LanguageCode;
  readonly voice: Voice | undefined;
  /** The speaker's own timbre the voice is converted to, when known (clone voices). */
  readonly toneColor?: ToneColor | undefined;
  /** When its first text was queued (performance.now()), for the first_audio latency. */
  readonly queuedAt: number;
}

/**
 * Translation → synthesis: a line's text in chunks as the translation grows. `flush` ends the
 * line (what is left is spoken); `cancel` drops the text not spoken yet (its translation failed).
 */
export type LineFrame =
  | { readonly kind: "text"; readonly line: SpokenLine; readonly text: string }
  | { readonly kind: "flush" | "cancel"; readonly line: SpokenLine }
  | LaneFinalizedFrame;
