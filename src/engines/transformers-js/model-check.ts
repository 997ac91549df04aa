/**
 * Checks a translation model's directory before the host loads it: a truncated or foreign file
 * otherwise fails deep inside transformers.js or onnxruntime at the first sentence. The inputs are
 * those transformers.js feeds an encoder-decoder model (its `encoder_forward` / `decoder_forward`):
 * a file without them is refused here with the file and what it lacks.
 */
import { readFile } from "node:fs/promises";
import path from "node:path";
import onnxProto from "onnx-proto";

// onnx-proto is CommonJS: its namespace is a property of the default export.
const { onnx } = onnxProto;

const REQUIRED_INPUTS: Record<string, readonly string[]> = {
  "onnx/encoder_model_quantized.onnx": ["input_ids", "attention_mask"],
  "onnx/decoder_model_merged_quantized.onnx": [
    "input_ids",
    "encoder_hidden_states",
    "encoder_attention_mask",
    "use_cache_branch",
    "past_key_values.0.decoder.key",
    "past_key_values.0.encoder.value",
  ],
};

/** `model_type` in each family's config.json. */
const MODEL_TYPES = { marian: "marian", m2m100: "m2m_100" } as const;

/** What keeps the model in `dir` from loading as a `family` model, if anything. */
export async function problemWithTranslationModel(
  dir: string,
  family: "marian" | "m2m100",
): Promise<string | undefined> {
  const config = await readJson(path.join(dir, "config.json"));
  if (typeof config === "string") return config;
  const modelType = (config as { model_type?: unknown }).model_type;
  if (modelType !== MODEL_TYPES[family])
    return `config.json says model_type ${String(modelType)}, not ${MODEL_TYPES[family]}`;
  const tokenizer = await readJson(path.join(dir, "tokenizer.json"));
  if (typeof tokenizer === "string") return tokenizer;
  for (const [file, inputs] of Object.entries(REQUIRED_INPUTS)) {
    let names: Set<string>;
    try {
      const model = onnx.ModelProto.decode(await readFile(path.join(dir, file)));
      names = new Set((model.graph?.input ?? []).map((input) => input.name ?? ""));
    } catch (error) {
      return `${file} is not a complete ONNX model (${(error as Error).message})`;
    }
    const missing = inputs.filter((input) => !names.has(input));
    if (missing.length > 0) return `${file} lacks the inputs transformers.js feeds it: ${missing.join(", ")}`;
  }
  return undefined;
}

/** The file's JSON, or why it has none. */
async function readJson(file: string): Promise<unknown> {
  try {
    const value: unknown = JSON.parse(await readFile(file, "utf8"));
    return typeof value === "object" && value !== null
      ? value
      : `${path.basename(file)} is not a JSON object`;
  } catch (error) {
    return `${path.basename(file)}: ${(error as Error).message}`;
  }
}
