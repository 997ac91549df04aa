/**
 * Checks a model file before sherpa-onnx loads it. sherpa-onnx ends its process (`_Exit(-1)`), with
 * nothing thrown, when a model lacks metadata it requires; a truncated download fails deep inside
 * onnxruntime. Here such a file is refused with a message that names the file and what is wrong.
 *
 * The keys are those sherpa-onnx reads without a default (sherpa-onnx/csrc at 634265c9, 2026-08-08:
 * `SHERPA_ONNX_READ_META_DATA` and `_STR` in offline-tts-vits-model.cc).
 */
import { readFile } from "node:fs/promises";
import onnxProto from "onnx-proto";

// onnx-proto is CommonJS: its namespace is a property of the default export.
const { onnx } = onnxProto;

export type ModelFileKind = "vits";

const REQUIRED: Record<ModelFileKind, readonly string[]> = {
  vits: ["sample_rate", "n_speakers", "language", "comment"],
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
  return metadata;
}
