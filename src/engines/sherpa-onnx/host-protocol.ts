/**
 * The parameters and results of the sherpa-onnx host's methods (the service's engines ↔
 * host-main.ts, over src/engines/kit/model-host/). Typed arrays cross as they are (the channel uses
 * Node's "advanced" serialization).
 */
import type { Method } from "../kit/model-host/protocol.js";

/**
 * A voice model as sherpa-onnx's `OfflineTts` takes it. `dataDir` is eSpeak NG's data directory (the
 * phonemizer inside sherpa-onnx reads it); sherpa-onnx sets its phonemizer up once per process, so
 * the first model's directory serves every later one.
 */
export type TtsModelFiles =
  | { readonly kind: "vits"; readonly model: string; readonly tokens: string; readonly dataDir: string }
  | {
      readonly kind: "kokoro";
      readonly model: string;
      readonly tokens: string;
      readonly voices: string;
      readonly dataDir: string;
      /** Comma-separated, as sherpa-onnx takes them. */
      readonly lexicon: string;
    };

export interface LoadTtsParams {
  /** The name replies and later requests use for this model. */
  readonly name: string;
  readonly files: TtsModelFiles;
  readonly threads: number;
}

export interface LoadedTts {
  readonly speakers: number;
  readonly sampleRate: number;
}

export interface GenerateParams {
  readonly name: string;
  /**
   * The text in bounded pieces (src/engines/kit/text-chunks.ts), spoken in turn: the host checks for
   * cancellation before each, so no single pass is unbounded and a cancelled request stops soon.
   */
  readonly texts: readonly string[];
  readonly speaker: number;
  /** sherpa-onnx's speed: 1 is the model's own pace, 2 twice as fast. */
  readonly speed: number;
  /** Kokoro: the eSpeak NG voice its non-Chinese text is phonemized with ("en-us"). */
  readonly lang?: string;
}

/** A streaming transducer and, optionally, the punctuation model its finals go through. */
export interface LoadRecognizerParams {
  readonly name: string;
  readonly files: {
    readonly encoder: string;
    readonly decoder: string;
    readonly joiner: string;
    readonly tokens: string;
    readonly bpeVocab: string;
  };
  readonly punctuation?: { readonly model: string; readonly bpeVocab: string };
  readonly threads: number;
  /** Load no plain recognizer: this host serves streams with hotwords only. */
  readonly hotwordsOnly?: boolean;
}

export interface LoadedRecognizer {
  readonly punctuation: boolean;
}

export interface OpenParams {
  readonly model: string;
  /** Phrases to favour (upper case, as the model's vocabulary spells them); none for plain recognition. */
  readonly hotwords: readonly string[];
  /** Who asks: an account's hotword recognizers are bounded (host-asr.ts). */
  readonly account: string;
}

export interface StreamParams {
  readonly stream: number;
}

export interface AcceptParams extends StreamParams {
  /** 16 kHz mono samples in [-1, 1]. */
  readonly samples: Float32Array;
}

/** What the recognizer has heard of an utterance so far. */
export interface RecognitionResult {
  readonly text: string;
  /** BPE pieces ("▁" opens a word) and their times, seconds from the utterance's start. */
  readonly tokens: readonly string[];
  readonly timestamps: readonly number[];
  /** The model's endpoint rules say the utterance has ended. */
  readonly endpoint: boolean;
}

/** A recognizer host's state (for tests and benchmarks). */
export interface RecognizerStats {
  /** Native recognizers not yet freed (the plain one included where the host has one). */
  readonly recognizers: number;
  /** Hotword recognizers cached, by account. */
  readonly hotwordSets: Readonly<Record<string, number>>;
  readonly streams: number;
  readonly rss: number;
}

/** A speaker-embedding model (CAM++, WeSpeaker). */
export interface LoadSpeakerParams {
  readonly model: string;
  readonly threads: number;
}

export interface LoadedSpeaker {
  /** Embedding size (192 for CAM++). */
  readonly dim: number;
}

export interface EmbedParams {
  readonly samples: Float32Array;
  readonly sampleRate: number;
}

/** Passes of speech generation in the TTS host (for tests and benchmarks). */
export interface SherpaTtsPasses {
  readonly running: number;
  readonly mostAtOnce: number;
  readonly total: number;
  readonly rss: number;
}

/** The sherpa-onnx host's methods (host-main.ts serves them; tts.ts, recognizer.ts and speaker-embedding.ts call them). */
export interface SherpaMethods {
  /** sherpa-onnx's version. */
  readonly version: Method<null, string>;
  readonly loadTts: Method<LoadTtsParams, LoadedTts>;
  /** Speech sentence by sentence: each piece's samples as a part, then the sample rate. */
  readonly generate: Method<GenerateParams, { readonly sampleRate: number }, Float32Array>;
  readonly ttsStats: Method<null, SherpaTtsPasses>;
  readonly loadRecognizer: Method<LoadRecognizerParams, LoadedRecognizer>;
  /** Opens a stream: its id. */
  readonly open: Method<OpenParams, number>;
  readonly accept: Method<AcceptParams, RecognitionResult>;
  readonly finish: Method<StreamParams, RecognitionResult>;
  readonly close: Method<StreamParams, void>;
  readonly recognizerStats: Method<null, RecognizerStats>;
  readonly loadSpeaker: Method<LoadSpeakerParams, LoadedSpeaker>;
  /** The voiceprint, or null when the audio is too short for one. */
  readonly embed: Method<EmbedParams, Float32Array | null>;
}
