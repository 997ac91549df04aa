/**
 * Finding pulled translation models in the models directory (`<models>/mt/<name>/`, in Hugging
 * Face's layout), for the transformers-js engine.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import type { TranslationModel } from "./index.js";
import { ModelError } from "../kit/models/download.js";
import { loadProblem } from "../kit/models/model-dir.js";
import { findMtModel, MT_CATALOGUE, type MtModelEntry } from "./catalogue.js";

/** Files transformers.js cannot load a model without (with `dtype: "q8"`). */
const REQUIRED_MT_FILES = [
  "config.json",
  "tokenizer.json",
  "tokenizer_config.json",
  "onnx/encoder_model_quantized.onnx",
  "onnx/decoder_model_merged_quantized.onnx",
] as const;

export function mtModelDir(entry: MtModelEntry, modelsDir: string): string {
  return path.join(modelsDir, "mt", entry.name);
}

export function isMtPulled(entry: MtModelEntry, modelsDir: string): boolean {
  const dir = mtModelDir(entry, modelsDir);
  return REQUIRED_MT_FILES.every((file) => existsSync(path.join(dir, file)));
}

/** What keeps a pulled model from loading (model-dir.ts: links out of the models directory, sizes). */
export function mtLoadProblem(entry: MtModelEntry, modelsDir: string): string | undefined {
  const dir = mtModelDir(entry, modelsDir);
  return loadProblem(
    dir,
    modelsDir,
    REQUIRED_MT_FILES.map((file) => path.join(dir, file)),
  );
}

export function anyMtPulled(modelsDir: string): boolean {
  return MT_CATALOGUE.some((entry) => isMtPulled(entry, modelsDir));
}

/**
 * The models to load: those named (each must be pulled), or every pulled one in catalogue order
 * (direct Opus-MT models before the many-to-many one, so a direction both serve goes to Opus-MT).
 */
export function translationModels(
  names: readonly string[] | undefined,
  modelsDir: string,
): TranslationModel[] {
  const entries = names
    ? names.map((name) => {
        const entry = findMtModel(name);
        if (!entry) throw new ModelError(`unknown translation model "${name}" (see relay models list)`);
        if (!isMtPulled(entry, modelsDir))
          throw new ModelError(`translation model ${name} is not pulled (relay models pull ${name})`);
        return entry;
      })
    : MT_CATALOGUE.filter((entry) => isMtPulled(entry, modelsDir));
  return entries.map((entry) => {
    const dir = mtModelDir(entry, modelsDir);
    const problem = mtLoadProblem(entry, modelsDir);
    return {
      name: entry.name,
      dir,
      family: entry.family,
      directions: entry.directions,
      ...(problem ? { problem: `${entry.name} is not loaded: ${problem}` } : {}),
    };
  });
}
