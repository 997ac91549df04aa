/**
 * Finding pulled sherpa-onnx models in the models directory (src/models/sherpa-catalogue.ts says
 * where each unpacks), for the engines that load them.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import type { NeuralVoiceModel } from "../engines/sherpa-onnx/tts.js";
import { ModelError } from "./download.js";
import { findSherpaModel, SHERPA_CATALOGUE, type SherpaModelEntry } from "./sherpa-catalogue.js";

/** The directory a sherpa-onnx model lives in once pulled. */
export function sherpaModelDir(entry: SherpaModelEntry, modelsDir: string): string {
  return path.join(modelsDir, entry.dir);
}

/** The files of `entry` that must be there for it to load (paths in the models directory). */
export function requiredFiles(entry: SherpaModelEntry, modelsDir: string): string[] {
  const dir = sherpaModelDir(entry, modelsDir);
  const relative = [entry.tts.model, entry.tts.tokens];
  return relative.map((file) => path.join(dir, file));
}

export function isPulled(entry: SherpaModelEntry, modelsDir: string): boolean {
  return requiredFiles(entry, modelsDir).every((file) => existsSync(file));
}

/** Whether any neural voice is pulled (the default engines then put sherpa-onnx before eSpeak NG). */
export function neuralVoicesPulled(modelsDir: string): boolean {
  return SHERPA_CATALOGUE.some((entry) => entry.kind === "tts" && isPulled(entry, modelsDir));
}

/**
 * The voice models to load: those named (each must be a pulled catalogue TTS model), or every pulled
 * one in catalogue order.
 */
export function neuralVoiceModels(
  names: readonly string[] | undefined,
  modelsDir: string,
): NeuralVoiceModel[] {
  const entries = names
    ? names.map((name) => {
        const entry = findSherpaModel(name);
        if (!entry) {
          const known = SHERPA_CATALOGUE.map((e) => e.name);
          throw new ModelError(
            `"${name}" is not a voice model in the catalogue (known: ${known.join(", ")})`,
          );
        }
        if (!isPulled(entry, modelsDir)) {
          throw new ModelError(`voice model "${name}" is not pulled: run \`relay models pull ${name}\``);
        }
        return entry;
      })
    : SHERPA_CATALOGUE.filter((entry) => entry.kind === "tts" && isPulled(entry, modelsDir));
  if (entries.length === 0)
    throw new ModelError("no neural voice is pulled (`relay models list` shows them)");
  return entries.map((entry) => {
    const dir = sherpaModelDir(entry, modelsDir);
    const layout = entry.tts;
    const file = (name: string) => path.join(dir, name);
    // Piper archives carry the eSpeak NG data their phonemizer was built against.
    const dataDir = file("espeak-ng-data");
    return {
      name: entry.name,
      languages: entry.languages,
      ...(layout.genders ? { genders: layout.genders } : {}),
      files: { kind: "vits", model: file(layout.model), tokens: file(layout.tokens), dataDir },
    };
  });
}
