/**
 * Engine interfaces. Every engine declares what it can do in `capabilities`; the registry, session
 * validation and `/v1/languages` are derived from those declarations, never from a fixed list.
 *
 * Language codes are ISO 639-1 primary subtags in lower case ("en", "es").
 *
 * Cancellation: `translate`, `translateStream`, `synthesize` and `synthesizeStream` take an optional
 * `AbortSignal`. An engine honours it where it reasonably can (a queued request is dropped, a running
 * process is killed, an HTTP request is cancelled) and then rejects with the signal's reason; an
 * engine that cannot stop its work may ignore it (the caller discards the result).
 */

import type { Glossary } from "./glossary.js";
import type { PlaceholderForm } from "./term-protection.js";

export type LanguageCode = string;

/** Identifies an engine and the exact build/model behind it (part of `model_version_id`). */
export interface EngineInfo {
  /** Stable engine kind, e.g. "pocketsphinx". */
  readonly id: string;
  /** Version of the engine and of the model it loaded, e.g. "5prealpha+en-us". */
  readonly version: string;
  /** How it runs, where that matters to an operator (shown at start-up, /healthz, /v1/languages). */
  readonly detail?: string;
}

/** A model host process of an engine, as /healthz and the metrics show it (src/engines/kit/model-host/). */
export interface HostStatus {
  readonly host: string;
  /** up: a process is running; idle: none yet (started on demand); failing: the last one failed. */
  readonly state: "up" | "idle" | "failing";
  /** Failures in a row (0 once a process answers again). */
  readonly failures: number;
  /** Processes replaced, by why: a crash, a missed deadline, memory past the ceiling. */
  readonly restarts: { readonly crash: number; readonly timeout: number; readonly memory: number };
  /** Resident memory of the current process at its last reply (0 when none is running). */
  readonly rssBytes: number;
  /** The current process, when one is running. */
  readonly pid: number | undefined;
}

interface Engine {
  readonly info: EngineInfo;
  /** Engines that run models in host processes: their state. */
  hosts?(): readonly HostStatus[];
  /**
   * Parts of the engine that could not load (one voice of several, say) while the rest serve; the
   * reason goes to the log, /healthz names the part only.
   */
  readonly unavailableParts?: readonly { readonly id: string; readonly reason: string }[];
  /** Remote engines: their circuit breaker ("open": calls fail at once, the server failed too often). */
  readonly circuit?: "closed" | "open" | "half-open";
  /** Releases processes, native handles and model memory. */
  close(): Promise<void>;
}

// ---------------------------------------------------------------- voice activity detection

export interface VadCapabilities {
  readonly sampleRate: number;
  /** Samples per window passed to `VadStream.probability`. */
  readonly windowSamples: number;
}

export interface VadEngine extends Engine {
  readonly capabilities: VadCapabilities;
  /** Per-session state; cheap to create (the model itself is shared). */
  createStream(): VadStream;
}

export interface VadStream {
  /** Speech probability (0..1) of one window of `windowSamples` float samples in [-1, 1]. */
  probability(window: Float32Array): Promise<number>;
}

// ---------------------------------------------------------------- speech recognition

export interface AsrCapabilities {
  readonly languages: readonly LanguageCode[];
  /** Sample rate of the PCM16 the streams accept. */
  readonly sampleRate: number;
  /** Streams return meaningful `partial()` hypotheses while audio is still arriving. */
  readonly partialResults: boolean;
  readonly wordTimings: boolean;
  /** Hypotheses carry sentence punctuation (used by `finalizeMode=sentence`). */
  readonly punctuation: boolean;
  /** Streams opened with `language: "auto"` identify the spoken language (`Hypothesis.language`). */
  readonly languageDetection?: boolean;
}

export interface WordTiming {
  readonly word: string;
  /** Milliseconds from the first sample written to the stream. */
  readonly startMs: number;
  readonly endMs: number;
}

export interface Hypothesis {
  readonly text: string;
  /** Empty when the engine has no word timings. */
  readonly words: readonly WordTiming[];
  /** The language heard, from engines that identify it (streams opened with `language: "auto"`). */
  readonly language?: LanguageCode;
  /**
   * How sure the engine is of the words: their mean posterior probability (0-1), from engines that
   * compute one (PocketSphinx's finals). Speech in a language the engine does not know scores low.
   */
  readonly confidence?: number;
}

export interface AsrStreamOptions {
  /** The spoken language, or "auto" for engines that declare `languageDetection`. */
  readonly language: LanguageCode | "auto";
  /**
   * With "auto": identification chooses among these languages only (a session's `languageHints`,
   * or the pair of a two-way session). Absent: any language the engine knows. When identification
   * lands outside them, the utterance is taken to be in the first candidate.
   */
  readonly candidates?: readonly LanguageCode[];
  /** Free-text session context (names, jargon); engines that cannot use it ignore it. */
  readonly context?: string;
  /**
   * The context's terms (src/core/glossary.ts): recognizers that take a vocabulary or hotwords add
   * them; those that read `context` as text need not.
   */
  readonly glossary?: Glossary;
  /**
   * Who asks (an account id), for a fair share of engines shared by every session: work queued in a
   * model host is served account by account. Absent: the service's own work.
   */
  readonly account?: string;
}

/** One utterance. Calls are serialized by the caller: never two pending calls on one stream. */
export interface AsrStream {
  write(pcm: Int16Array): Promise<void>;
  /** Best hypothesis for the audio written so far. */
  partial(): Promise<Hypothesis>;
  /** Ends the utterance and returns the final hypothesis; the stream is unusable afterwards. */
  finish(): Promise<Hypothesis>;
  /** Ends the utterance without a result (session closed). */
  abort(): void;
}

/**
 * What a recognizer reports on its own while an utterance is heard: a partial hypothesis (covering
 * `audioMs` of the utterance's audio), or the end of the utterance (an endpoint it detected).
 */
export type RecognitionEvent =
  | { readonly type: "partial"; readonly hypothesis: Hypothesis; readonly audioMs: number }
  | { readonly type: "endpoint" };

export interface RecognitionOptions extends AsrStreamOptions {
  /** Receives the stream's events, in order, until it has finished or been aborted. */
  readonly onEvent: (event: RecognitionEvent) => void;
}

/**
 * One utterance on a recognizer that pushes its results (see `RecognitionEvent`) instead of being
 * asked for them. Calls are serialized by the caller, as for `AsrStream`.
 */
export interface RecognitionStream {
  write(pcm: Int16Array): Promise<void>;
  /** Ends the utterance, after `lastAudio` when given, and returns the final hypothesis. */
  finish(lastAudio?: Int16Array): Promise<Hypothesis>;
  /** Ends the utterance without a result; no event follows. */
  abort(): void;
}

export interface AsrEngine extends Engine {
  readonly capabilities: AsrCapabilities;
  /** May wait for a free decoder when the engine bounds its concurrency. */
  createStream(options: AsrStreamOptions): Promise<AsrStream>;
  /**
   * Gets ready for streams opened with these options before they come (a session's glossary to add
   * to a vocabulary, say), so the first utterance does not wait for it. Never required.
   */
  prepare?(options: AsrStreamOptions): Promise<void>;
  /**
   * Engines that stream results themselves (partials and endpoints as they hear them). The others
   * are asked for partials by the polling adapter (`openRecognition` in src/engines/kit/asr-stream.ts).
   */
  openRecognition?(options: RecognitionOptions): Promise<RecognitionStream>;
}

// ---------------------------------------------------------------- machine translation

export interface TranslationPair {
  readonly from: LanguageCode;
  readonly to: LanguageCode;
}

export interface MtCapabilities {
  readonly pairs: readonly TranslationPair[];
  /**
   * Whether `context` in a request influences the translation. Engines that read it get the glossary
   * in the request too; for the others, the router carries the glossary's terms through as
   * placeholders of the form they declare in `placeholder`.
   */
  readonly usesContext: boolean;
  /** The placeholder this engine passes through unchanged best (measured: `npm run bench:context`). */
  readonly placeholder?: PlaceholderForm;
  /** Whether the engine implements `translateStream` (partial translations while it works). */
  readonly streaming?: boolean;
}

export interface TranslateRequest {
  readonly text: string;
  readonly from: LanguageCode;
  readonly to: LanguageCode;
  /** Free-text session context (topic, names, jargon). */
  readonly context?: string;
  /** The context's terms, for engines that read context (an LLM's prompt lists them). */
  readonly glossary?: Glossary;
  /** Human-readable names of the languages, when the client gave them (`sourceLanguageLabel`…). */
  readonly fromLabel?: string;
  readonly toLabel?: string;
  /** The session's most recent sentences and their translations, oldest first, for coherence. */
  readonly previous?: readonly { readonly source: string; readonly translation: string }[];
  /**
   * An interim's translation: a busy engine may refuse it (`EngineBusyError`), a later interim or
   * the final replaces it.
   */
  readonly interim?: boolean;
  /**
   * Who asks (an account id), for a fair share of engines shared by every session: work queued in a
   * model host is served account by account. Absent: the service's own work.
   */
  readonly account?: string;
}

/** What the translation stage asks for: the text, the session context and the recent history. */
export interface TranslationCall {
  /** The language of `text` (identified per utterance in "auto" sessions). */
  readonly from: LanguageCode;
  readonly text: string;
  readonly context: string;
  /** The context's terms: kept verbatim or as their given target (src/engines/routing/registry.ts). */
  readonly glossary?: Glossary;
  /** The session's last few final sentences and their translations, oldest first. */
  readonly previous: readonly { readonly source: string; readonly translation: string }[];
  /** An interim's translation (a busy engine may refuse it: a later one replaces it). */
  readonly interim?: boolean;
  /** Who asks, for a fair share of shared engines (`TranslateRequest.account`). */
  readonly account?: string;
}

export interface MtEngine extends Engine {
  readonly capabilities: MtCapabilities;
  translate(request: TranslateRequest, signal?: AbortSignal): Promise<string>;
  /** Yields the translation so far (each value the whole text up to now); the last value is final. */
  translateStream?(request: TranslateRequest, signal?: AbortSignal): AsyncIterable<string>;
  /**
   * Starts what the engine starts lazily (processes, models), so a first request pays no cold start:
   * for `pairs` when given (the engine may start more), else for every pair it declares.
   */
  warmUp?(pairs?: readonly TranslationPair[]): Promise<void>;
}

// ---------------------------------------------------------------- speech synthesis

/** How one library voice sounds; every TTS engine renders it as closely as it can. */
export interface VoiceTimbre {
  /** eSpeak NG voice variant name (e.g. "m3", "f2", "klatt"). */
  readonly variant: string;
  /** Base pitch, 0..99 (eSpeak scale, 50 = default). */
  readonly pitch: number;
  /** Pitch range, 0..99 (eSpeak scale, 50 = default). */
  readonly pitchRange: number;
  /** Speaking-rate factor, 1 = engine default. */
  readonly rate: number;
  /**
   * Regional accent: language → locale spoken instead (e.g. en → en-gb-scotland). Only voices
   * flagged with a strong accent have one.
   */
  readonly accentLocales?: Readonly<Record<LanguageCode, string>>;
}

export interface Voice {
  readonly id: number;
  readonly name: string;
  readonly gender: "female" | "male";
  /** Voices with a strong regional accent are valid explicitly but never chosen automatically. */
  readonly strongAccent: boolean;
  readonly timbre: VoiceTimbre;
}

export interface TtsCapabilities {
  readonly languages: readonly LanguageCode[];
}

export interface SynthesisRequest {
  readonly text: string;
  readonly language: LanguageCode;
  readonly voice: Voice;
  /**
   * Who asks (an account id), for a fair share of engines shared by every session: work queued in a
   * model host is served account by account. Absent: the service's own work.
   */
  readonly account?: string;
}

export interface SynthesizedAudio {
  /** Mono samples in [-1, 1]. */
  readonly samples: Float32Array;
  readonly sampleRate: number;
}

export interface TtsEngine extends Engine {
  readonly capabilities: TtsCapabilities;
  /** The whole clip. */
  synthesize(request: SynthesisRequest, signal?: AbortSignal): Promise<SynthesizedAudio>;
  /**
   * The clip in consecutive chunks as the engine produces them (joined, they are the clip), for
   * engines that really produce audio progressively. Callers use `streamSynthesis`
   * (src/engines/kit/synthesis.ts), which falls back to `synthesize` as one chunk for the others.
   */
  synthesizeStream?(request: SynthesisRequest, signal?: AbortSignal): AsyncIterable<SynthesizedAudio>;
}

// ---------------------------------------------------------------- speakers

/**
 * What a stretch of speech says about who is speaking. Opaque to everything but the engine that
 * made it; voiceprints of one person are pooled with `SpeakerEngine.merge`.
 */
export interface Voiceprint {
  /** Seconds of speech it rests on. */
  readonly speechSeconds: number;
}

export interface SpeakerCapabilities {
  /** Sample rate of the samples `voiceprint` takes. */
  readonly sampleRate: number;
  /**
   * Voiceprints at a `distance` below this are taken for the same person, and above
   * `newSpeakerAbove` for different people (between the two: not sure yet). The engine's own scale:
   * the speaker tracker (src/speakers/) reads only these numbers.
   */
  readonly sameSpeakerBelow: number;
  readonly newSpeakerAbove: number;
}

/**
 * Tells speakers apart (relay-2 speaker labels, per-speaker voices). The embedded engine models
 * each voice with MFCC statistics; a speaker-embedding network (sherpa-onnx, CAM++) fits the same
 * three calls: embed, average, cosine distance.
 */
export interface SpeakerEngine extends Engine {
  readonly capabilities: SpeakerCapabilities;
  /**
   * The voiceprint of one stretch of speech (mono samples in [-1, 1]). Asynchronous: a network
   * engine runs in another process. `signal` drops the request where the engine can.
   */
  voiceprint(samples: Float32Array, signal?: AbortSignal): Promise<Voiceprint>;
  /** The voiceprint of both stretches together. */
  merge(a: Voiceprint, b: Voiceprint): Voiceprint;
  /** How unlike two voiceprints are: 0 for the same voice, growing with the difference. */
  distance(a: Voiceprint, b: Voiceprint): number;
}

// ---------------------------------------------------------------- tone colour (voice_type=clone)

/**
 * A speaker's timbre as the converter's extractor measures it (OpenVoice V2: a 256-value vector).
 * Made only from audio of the room, session or job it serves and kept in its memory: never stored,
 * logged or shared (docs/privacy.md).
 */
export interface ToneColor {
  readonly vector: Float32Array;
  /** Seconds of speech it was extracted from. */
  readonly seconds: number;
}

export interface ToneColorCapabilities {
  /** Sample rate the engine works at (22,050 Hz for OpenVoice V2); other rates are resampled. */
  readonly sampleRate: number;
  /** Seconds of a speaker's speech before their tone colour is extracted. */
  readonly minSeconds: number;
}

export interface ToneColorRequest {
  /** Drops the request where the engine can. */
  readonly signal?: AbortSignal;
  /** Whose room, session or job: the converter serves accounts in turn. */
  readonly account?: string;
  /**
   * Wait for a turn when the converter is busy (dubbing). Without it (live speech) a sentence is
   * refused at once with `EngineBusyError` unless the converter is free: late speech is worse than
   * the library voice.
   */
  readonly mayWait?: boolean;
}

/**
 * Turns speech into a speaker's own voice (rooms' `voice_type=clone`, sessions' `voiceType=clone`,
 * dubbing's `voice=clone`): the library voice speaks, the converter moves its timbre to the
 * speaker's. Mono samples in [-1, 1].
 */
export interface ToneColorEngine extends Engine {
  readonly capabilities: ToneColorCapabilities;
  /** The tone colour of a stretch of one speaker's speech. */
  toneColor(audio: SynthesizedAudio, request?: ToneColorRequest): Promise<ToneColor>;
  /**
   * `audio` in the voice of `target`, at the engine's sample rate: consecutive pieces (joined, the
   * whole), each as soon as it is converted, so speech can start before the sentence is done.
   */
  convert(
    audio: SynthesizedAudio,
    target: ToneColor,
    request?: ToneColorRequest,
  ): AsyncIterable<SynthesizedAudio>;
}
