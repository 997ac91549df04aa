/**
 * The parameters and results of the transformers.js host's methods (index.ts ↔ host-main.ts, over
 * src/engines/kit/model-host/).
 */
import type { LanguageCode } from "../../core/contracts.js";
import type { Method } from "../kit/model-host/protocol.js";

/** A pulled translation model, as the host loads it. */
export interface TranslationModelFiles {
  /** The catalogue name (`opus-mt-en-es`), which names it in the host's table of loaded models. */
  readonly name: string;
  /** Its directory: config.json, tokenizer.json, onnx/… as Hugging Face publishes them. */
  readonly dir: string;
  /** Marian (Opus-MT: one direction) or M2M100 (many-to-many: told the languages per call). */
  readonly family: "marian" | "m2m100";
}

/** One batch: sentences in the same direction through one model. */
export interface TranslateBatchParams {
  readonly model: TranslationModelFiles;
  readonly from: LanguageCode;
  readonly to: LanguageCode;
  readonly texts: readonly string[];
}

export interface TranslateBatchResult {
  /** One per text, in order. */
  readonly translations: readonly string[];
}

export interface HostStats {
  /** Loaded models, least recently used first. */
  readonly loaded: readonly string[];
  readonly rss: number;
}

/** The translation host's methods (host-main.ts serves them; index.ts calls them). */
export interface TranslationMethods {
  /** transformers.js's version. */
  readonly version: Method<null, string>;
  readonly load: Method<TranslationModelFiles, null>;
  readonly translate: Method<TranslateBatchParams, TranslateBatchResult>;
  readonly stats: Method<null, HostStats>;
}
