/**
 * Finding pulled sherpa-onnx models in the models directory (src/engines/sherpa-onnx/catalogue.ts says
 * where each unpacks), for the engines that load them.
 */
import { existsSync, readdirSync } from "node:fs";
import path from "node:path";
import { z } from "zod";
import type { SherpaRecognizerOptions } from "./recognizer.js";
import type { NeuralVoiceModel } from "./tts.js";
import { ModelError } from "../kit/models/download.js";
import { loadProblem, modelRecord, readRecord } from "../kit/models/model-dir.js";
import {
  SHERPA_CATALOGUE,
  sherpaModelsOf,
  type SherpaEntryOf,
  type SherpaModelEntry,
  type SherpaModelKind,
} from "./catalogue.js";

/** The directory a sherpa-onnx model lives in once pulled. */
export function sherpaModelDir(entry: SherpaModelEntry, modelsDir: string): string {
  return path.join(modelsDir, entry.dir);
}

/** The files of `entry` that must be there for it to load (paths in the models directory). */
export function requiredFiles(entry: SherpaModelEntry, modelsDir: string): string[] {
  const dir = sherpaModelDir(entry, modelsDir);
  const relative = (() => {
    switch (entry.kind) {
      case "tts":
        return entry.tts.kind === "vits"
          ? [entry.tts.model, entry.tts.tokens]
          : [entry.tts.model, entry.tts.tokens, entry.tts.voices, ...entry.tts.lexicons];
      case "streaming-asr":
        return [entry.asr.encoder, entry.asr.decoder, entry.asr.joiner, entry.asr.tokens, entry.asr.bpeVocab];
      case "punctuation":
        return [entry.punctuation.model, entry.punctuation.bpeVocab];
      case "speaker":
        return [entry.speaker.model];
    }
  })();
  return relative.map((file) => path.join(dir, file));
}

/**
 * What keeps a pulled model from loading: files that are not what `pull` recorded or lead out of
 * the models directory (model-dir.ts), a voice's eSpeak NG data included.
 */
export function loadProblemOf(entry: SherpaModelEntry, modelsDir: string): string | undefined {
  const espeak = entry.kind === "tts" ? [path.join(sherpaModelDir(entry, modelsDir), "espeak-ng-data")] : [];
  return loadProblem(sherpaModelDir(entry, modelsDir), modelsDir, [
    ...requiredFiles(entry, modelsDir),
    ...espeak.filter((dir) => existsSync(dir)),
  ]);
}

/** Refuses to load a pulled model `loadProblemOf` finds a problem with. */
function checkLoadable(entry: SherpaModelEntry, modelsDir: string): void {
  const problem = loadProblemOf(entry, modelsDir);
  if (problem) throw new ModelError(`${entry.name} is not loaded: ${problem}`);
}

/**
 * The record of a model pulled as an archive: where from, and the archive's SHA-256 (the licence
 * is what the model's own card says, shown beside the catalogue's).
 */
export const archiveRecord = modelRecord.extend({
  url: z.string(),
  archiveSha256: z.string(),
});

/**
 * What `relay models import piper` adds to the pull record of a voice it made from Piper's own
 * layout (piper-import.ts): enough to list and load a voice the catalogue does not know.
 */
export const importedVoiceRecord = archiveRecord.extend({
  name: z.string().regex(/^piper-[\w.-]+$/u),
  imported: z.object({
    from: z.literal("piper"),
    language: z.string().min(2),
    description: z.string(),
    /** The model's size, MiB (for the table). */
    approxMiB: z.number().nonnegative(),
  }),
});

/** Where an imported Piper voice `voice` ("en_US-joe-medium") lives: where its archive would unpack. */
export const importedVoiceDir = (voice: string): string => `vits-piper-${voice}`;

/**
 * The Piper voices imported into `modelsDir` that the catalogue does not have (an imported catalogue
 * voice is simply that voice, pulled), as catalogue entries.
 */
export function importedVoices(modelsDir: string): SherpaEntryOf<"tts">[] {
  const catalogued = new Set(SHERPA_CATALOGUE.map((entry) => entry.dir));
  const names = existsSync(modelsDir) ? readdirSync(modelsDir) : [];
  return names
    .filter((dir) => dir.startsWith(importedVoiceDir("")) && !catalogued.has(dir))
    .sort()
    .flatMap((dir): SherpaEntryOf<"tts">[] => {
      const record = readRecord(path.join(modelsDir, dir), importedVoiceRecord);
      const voice = dir.slice(importedVoiceDir("").length);
      if (record?.name !== `piper-${voice}`) return [];
      const { language, description, approxMiB } = record.imported;
      return [
        {
          name: record.name,
          kind: "tts",
          file: `${voice}.onnx`,
          url: record.url,
          dir,
          languages: [language],
          approxMiB,
          default: false,
          description,
          licence: {
            text: `imported; its card: ${record.licence ?? "no licence stated"}; eSpeak NG data GPL-3.0`,
            commercialUse: "unclear",
          },
          tts: { kind: "vits", model: `${voice}.onnx`, tokens: "tokens.txt" },
        },
      ];
    });
}

/** The models of one kind relay knows in `modelsDir`: the catalogue's, and for voices the imported ones. */
export function knownModelsOf<K extends SherpaModelKind>(kind: K, modelsDir: string): SherpaEntryOf<K>[] {
  const catalogue = sherpaModelsOf(kind);
  return kind === "tts" ? [...catalogue, ...(importedVoices(modelsDir) as SherpaEntryOf<K>[])] : catalogue;
}

export function isPulled(entry: SherpaModelEntry, modelsDir: string): boolean {
  return requiredFiles(entry, modelsDir).every((file) => existsSync(file));
}

const KIND_NAMES: Record<SherpaModelKind, string> = {
  tts: "voice model",
  "streaming-asr": "streaming recognition model",
  punctuation: "punctuation model",
  speaker: "speaker model",
};

/** Whether any model of `kind` is pulled (the default engines then use it). */
export function anyPulled(kind: SherpaModelKind, modelsDir: string): boolean {
  return knownModelsOf(kind, modelsDir).some((entry) => isPulled(entry, modelsDir));
}

/**
 * The models of one kind to load: those named (each must be a pulled catalogue model of that kind),
 * or every pulled one in catalogue order; at least one.
 */
export function pulledModels<K extends SherpaModelKind>(
  kind: K,
  names: readonly string[] | undefined,
  modelsDir: string,
): SherpaEntryOf<K>[] {
  const what = KIND_NAMES[kind];
  const known = knownModelsOf(kind, modelsDir);
  const entries = names
    ? names.map((name) => {
        const entry = known.find((e) => e.name === name);
        if (!entry) {
          throw new ModelError(
            `"${name}" is not a ${what} in the catalogue (known: ${known.map((e) => e.name).join(", ")})`,
          );
        }
        if (!isPulled(entry, modelsDir)) {
          throw new ModelError(`${what} "${name}" is not pulled: run \`relay models pull ${name}\``);
        }
        return entry;
      })
    : known.filter((entry) => isPulled(entry, modelsDir));
  if (entries.length === 0) throw new ModelError(`no ${what} is pulled (\`relay models list\` shows them)`);
  return entries;
}

/** The voice models to load (`pulledModels("tts", …)`) as the TTS engine takes them. */
export function neuralVoiceModels(
  names: readonly string[] | undefined,
  modelsDir: string,
): NeuralVoiceModel[] {
  return pulledModels("tts", names, modelsDir).map((entry) => {
    const dir = sherpaModelDir(entry, modelsDir);
    const layout = entry.tts;
    const file = (name: string) => path.join(dir, name);
    // The archives carry the eSpeak NG data their phonemizer was built against.
    const dataDir = file("espeak-ng-data");
    let problem: string | undefined;
    try {
      checkLoadable(entry, modelsDir);
    } catch (error) {
      problem = (error as Error).message;
    }
    const files: NeuralVoiceModel["files"] =
      layout.kind === "vits"
        ? { kind: "vits", model: file(layout.model), tokens: file(layout.tokens), dataDir }
        : {
            kind: "kokoro",
            model: file(layout.model),
            tokens: file(layout.tokens),
            voices: file(layout.voices),
            dataDir,
            lexicon: layout.lexicons.map(file).join(","),
          };
    return {
      name: entry.name,
      languages: entry.languages,
      ...(problem ? { problem } : {}),
      ...(layout.kind === "vits" && layout.genders ? { genders: layout.genders } : {}),
      files,
    };
  });
}

/**
 * The streaming recognizer's files: the named (or the pulled) streaming model, and the named
 * punctuation model, the pulled one when not named, or none when `false`.
 */
export function recognizerFiles(
  model: string | undefined,
  punctuation: string | false | undefined,
  modelsDir: string,
): Pick<SherpaRecognizerOptions, "name" | "files" | "punctuation"> {
  const [entry] = pulledModels("streaming-asr", model === undefined ? undefined : [model], modelsDir);
  const file = (dir: string, name: string) => path.join(modelsDir, dir, name);
  const punct = punctuationModel(punctuation, modelsDir);
  checkLoadable(entry!, modelsDir);
  if (punct) checkLoadable(punct, modelsDir);
  return {
    name: entry!.name,
    files: {
      encoder: file(entry!.dir, entry!.asr.encoder),
      decoder: file(entry!.dir, entry!.asr.decoder),
      joiner: file(entry!.dir, entry!.asr.joiner),
      tokens: file(entry!.dir, entry!.asr.tokens),
      bpeVocab: file(entry!.dir, entry!.asr.bpeVocab),
    },
    ...(punct
      ? {
          punctuation: {
            model: file(punct.dir, punct.punctuation.model),
            bpeVocab: file(punct.dir, punct.punctuation.bpeVocab),
          },
        }
      : {}),
  };
}

/** The punctuation model to use: the named one, else the pulled one if any; none when `false`. */
function punctuationModel(
  punctuation: string | false | undefined,
  modelsDir: string,
): SherpaEntryOf<"punctuation"> | undefined {
  if (punctuation === false) return undefined;
  if (punctuation !== undefined) return pulledModels("punctuation", [punctuation], modelsDir)[0];
  return anyPulled("punctuation", modelsDir)
    ? pulledModels("punctuation", undefined, modelsDir)[0]
    : undefined;
}
