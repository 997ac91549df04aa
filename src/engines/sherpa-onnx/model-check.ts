/**
 * Checks a model file before sherpa-onnx loads it. sherpa-onnx ends its process (`_Exit(-1)`), with
 * nothing thrown, when a model lacks metadata it requires; a truncated download fails deep inside
 * onnxruntime. Here such a file is refused with a message that names the file and what is wrong.
 *
 * The keys are those sherpa-onnx reads without a default (sherpa-onnx/csrc at 634265c9, 2026-08-08:
 * `SHERPA_ONNX_READ_META_DATA` and `_STR` in offline-tts-vits-model.cc,
 * online-zipformer2-transducer-model.cc, online-cnn-bilstm-model-meta-data.h and
 * speaker-embedding-extractor-model.cc; each confirmed by loading a stand-in without the key).
 */
import { readFile, stat } from "node:fs/promises";
import onnxProto from "onnx-proto";

// onnx-proto is CommonJS: its namespace is a property of the default export.
const { onnx } = onnxProto;

export type ModelFileKind =
  "vits" | "kokoro" | "zipformer2-encoder" | "transducer-decoder" | "punctuation" | "speaker-embedding";

const REQUIRED: Record<ModelFileKind, readonly string[]> = {
  vits: ["sample_rate", "n_speakers", "language", "comment"],
  kokoro: ["sample_rate", "n_speakers", "has_espeak", "style_dim", "speaker_names"],
  "zipformer2-encoder": [
    "encoder_dims",
    "query_head_dims",
    "value_head_dims",
    "num_heads",
    "num_encoder_layers",
    "cnn_module_kernels",
    "left_context_len",
    "T",
    "decode_chunk_len",
  ],
  "transducer-decoder": ["vocab_size", "context_size"],
  punctuation: ["COMMA", "PERIOD", "QUESTION", "UPPER", "CAP", "MIX_CASE"],
  "speaker-embedding": ["framework", "output_dim", "sample_rate", "normalize_samples", "language"],
};

/**
 * Values sherpa-onnx crashes on rather than refuses: an unknown speaker-model `framework` (a
 * segmentation fault), a `feature_normalize_type` other than these (the process ends at the first
 * embedding).
 */
const ALLOWED: Partial<Record<ModelFileKind, Record<string, readonly string[]>>> = {
  "speaker-embedding": {
    framework: ["3d-speaker", "wespeaker", "nemo"],
    feature_normalize_type: ["", "global-mean"],
  },
};

export class ModelFileError extends Error {
  override readonly name = "ModelFileError";
}

/** The model's metadata (ONNX `metadata_props`); throws ModelFileError when the file is not a whole ONNX model. */
export async function readModelMetadata(file: string): Promise<Map<string, string>> {
  let bytes: Buffer;
  try {
    bytes = await readFile(file);
  } catch (error) {
    throw new ModelFileError(`cannot read model ${file}: ${(error as Error).message}`);
  }
  let model: ReturnType<typeof onnx.ModelProto.decode>;
  try {
    model = onnx.ModelProto.decode(bytes);
  } catch (error) {
    throw new ModelFileError(
      `${file} is not a complete ONNX model (${(error as Error).message}); pull it again with \`relay models pull\``,
    );
  }
  if (!model.graph?.node?.length) {
    throw new ModelFileError(
      `${file} is not an ONNX model (it has no graph); pull it again with \`relay models pull\``,
    );
  }
  return new Map(model.metadataProps.map((entry) => [entry.key ?? "", entry.value ?? ""]));
}

/** Refuses a model that sherpa-onnx would end its process over; returns its metadata. */
export async function checkModelFile(file: string, kind: ModelFileKind): Promise<Map<string, string>> {
  const metadata = await readModelMetadata(file);
  const missing = REQUIRED[kind].filter((key) => !metadata.get(key));
  if (missing.length > 0) {
    throw new ModelFileError(
      `${file} lacks the metadata sherpa-onnx requires of a ${kind} model: ${missing.join(", ")}`,
    );
  }
  for (const [key, values] of Object.entries(ALLOWED[kind] ?? {})) {
    const value = metadata.get(key) ?? "";
    if (!values.includes(value)) {
      throw new ModelFileError(
        `${file}: sherpa-onnx cannot use ${key} "${value}" (it takes ${values.filter(Boolean).join(", ")})`,
      );
    }
  }
  return metadata;
}

/**
 * Kokoro's voices.bin must hold exactly one style matrix (`style_dim`) per speaker: sherpa-onnx ends
 * its process over any other size.
 */
export async function checkKokoroVoices(file: string, metadata: ReadonlyMap<string, string>): Promise<void> {
  const dims = (metadata.get("style_dim") ?? "").split(",").map(Number);
  const speakers = Number(metadata.get("n_speakers"));
  const expected = dims.reduce((product, dim) => product * dim, 1) * speakers * 4;
  const size = await stat(file).then(
    (info) => info.size,
    () => undefined,
  );
  if (size === undefined) throw new ModelFileError(`cannot read Kokoro voices ${file}`);
  if (!(dims.length === 3 && expected > 0 && size === expected)) {
    throw new ModelFileError(
      `${file} holds ${size} bytes where the model's style_dim ${metadata.get("style_dim")} and ${speakers} speakers need ${expected}; pull it again with \`relay models pull\``,
    );
  }
}
