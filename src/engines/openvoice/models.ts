/**
 * Finding a pulled tone colour model in the models directory (`<models>/tone-color/<name>/`, the
 * Hugging Face repository's files as published).
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { loadProblem } from "../kit/models/model-dir.js";
import { TONE_COLOR_CATALOGUE, type ToneColorModelEntry } from "./catalogue.js";

export function toneColorModelDir(entry: ToneColorModelEntry, modelsDir: string): string {
  return path.join(modelsDir, "tone-color", entry.name);
}

function requiredFiles(entry: ToneColorModelEntry, modelsDir: string): string[] {
  const dir = toneColorModelDir(entry, modelsDir);
  return Object.values(entry.files).map((file) => path.join(dir, file));
}

export function isToneColorPulled(entry: ToneColorModelEntry, modelsDir: string): boolean {
  return requiredFiles(entry, modelsDir).every((file) => existsSync(file));
}

/** What keeps a pulled model from loading (model-dir.ts: links out of the models directory, sizes). */
export function toneColorLoadProblem(entry: ToneColorModelEntry, modelsDir: string): string | undefined {
  return loadProblem(toneColorModelDir(entry, modelsDir), modelsDir, requiredFiles(entry, modelsDir));
}

/** The first pulled model of the catalogue, if any. */
export function pulledToneColorModel(modelsDir: string): ToneColorModelEntry | undefined {
  return TONE_COLOR_CATALOGUE.find((entry) => isToneColorPulled(entry, modelsDir));
}
