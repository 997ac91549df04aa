/**
 * The parameters and results of the OpenVoice host's methods (index.ts ↔ host-main.ts, over
 * src/engines/kit/model-host/). Audio crosses at the model's sample rate, mono, in [-1, 1].
 */
import type { SpectrogramSettings } from "../../audio/spectrogram.js";
import type { Method } from "../kit/model-host/protocol.js";

export interface LoadToneColorParams {
  /** The spectrogram the models take (configuration.json, checked by model-check.ts). */
  readonly spectrogram: SpectrogramSettings;
  readonly extractor: string;
  readonly converter: string;
  /** onnxruntime intra-op threads per model. */
  readonly threads: number;
}

export interface LoadedToneColor {
  /** Values in a tone colour (256 for OpenVoice V2). */
  readonly dim: number;
  /** onnxruntime-node's version. */
  readonly runtime: string;
}

export interface ExtractParams {
  readonly samples: Float32Array;
}

export interface ConvertParams {
  readonly samples: Float32Array;
  /** The tone colour of the voice being replaced (the extractor's on the whole sentence). */
  readonly source: Float32Array;
  /** The tone colour to convert to. */
  readonly target: Float32Array;
  /** How much of the source's variation the flow keeps (OpenVoice's `tau`, 0.3 upstream). */
  readonly tau: number;
}

export interface OpenVoiceMethods {
  readonly load: Method<LoadToneColorParams, LoadedToneColor>;
  readonly extract: Method<ExtractParams, Float32Array>;
  readonly convert: Method<ConvertParams, Float32Array>;
}
