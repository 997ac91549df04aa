/**
 * Puts stand-in models where `relay models pull` would: the catalogue's directory and file names
 * under a models directory, so the service finds and loads them as it would the real ones.
 */
import { existsSync } from "node:fs";
import { cp, mkdir, rename, rm, symlink, writeFile } from "node:fs/promises";
import path from "node:path";
import { findMtModel } from "../../../src/engines/transformers-js/catalogue.js";
import { mtModelDir } from "../../../src/engines/transformers-js/models.js";
import { findSherpaModelOf } from "../../../src/engines/sherpa-onnx/catalogue.js";
import { findToneColorModel } from "../../../src/engines/openvoice/catalogue.js";
import { toneColorModelDir } from "../../../src/engines/openvoice/models.js";
import { writeKokoroStandIn } from "./kokoro.js";
import { writeToneColorStandIn } from "./tone-color.js";
import { writePunctuationStandIn } from "./punctuation.js";
import { writeStreamingTransducerStandIn } from "./streaming-transducer.js";
import { writeTranslationStandIn } from "./translation.js";
import { buildVitsStandIn, findEspeakNgData, piperTokensText, type VitsStandInOptions } from "./vits.js";

/**
 * The real archives carry their own espeak-ng-data; Debian's serves the stand-ins. Copied once into
 * the models directory and linked from each voice: the service refuses links leading out of it.
 */
async function linkEspeakNgData(modelsDir: string, voiceDir: string): Promise<void> {
  const shared = path.join(modelsDir, ".stand-in-espeak-ng-data");
  if (!existsSync(shared)) await cp(findEspeakNgData(), shared, { recursive: true });
  await symlink(path.relative(voiceDir, shared), path.join(voiceDir, "espeak-ng-data"));
}

/** A stand-in Piper voice as catalogue model `name` (e.g. "piper-en_US-libritts_r-medium"). */
export async function installStandInVoice(
  modelsDir: string,
  name: string,
  options: Omit<VitsStandInOptions, "dir"> = {},
): Promise<string> {
  const entry = findSherpaModelOf("tts", name);
  if (!entry) throw new Error(`${name} is not a Piper voice of the catalogue`);
  const dir = path.join(modelsDir, entry.dir);
  await mkdir(dir, { recursive: true });
  await writeFile(path.join(dir, entry.tts.model), buildVitsStandIn(options));
  await writeFile(path.join(dir, entry.tts.tokens), piperTokensText());
  await linkEspeakNgData(modelsDir, dir);
  return dir;
}

/**
 * The stand-in streaming recognizer as catalogue model "streaming-zipformer-en", and with
 * `punctuation` the stand-in punctuation model as "punct-en".
 */
export async function installStandInRecognizer(
  modelsDir: string,
  options: { punctuation: boolean; size?: "small" | "real" },
): Promise<void> {
  const asr = findSherpaModelOf("streaming-asr", "streaming-zipformer-en")!;
  const written = writeStreamingTransducerStandIn({
    dir: path.join(modelsDir, ".stand-in-asr"),
    size: options.size ?? "small",
  });
  const dir = path.join(modelsDir, asr.dir);
  await mkdir(dir, { recursive: true });
  await rename(written.encoder, path.join(dir, asr.asr.encoder));
  await rename(written.decoder, path.join(dir, asr.asr.decoder));
  await rename(written.joiner, path.join(dir, asr.asr.joiner));
  await rename(written.tokens, path.join(dir, asr.asr.tokens));
  await rename(written.bpeVocab, path.join(dir, asr.asr.bpeVocab));
  await rm(path.join(modelsDir, ".stand-in-asr"), { recursive: true, force: true });
  if (!options.punctuation) return;
  const punct = findSherpaModelOf("punctuation", "punct-en")!;
  const punctDir = path.join(modelsDir, punct.dir);
  const model = writePunctuationStandIn({ dir: punctDir });
  await rename(model.model, path.join(punctDir, punct.punctuation.model));
  if (model.bpeVocab !== path.join(punctDir, punct.punctuation.bpeVocab))
    await rename(model.bpeVocab, path.join(punctDir, punct.punctuation.bpeVocab));
}

/**
 * Kokoro's stand-in as catalogue model "kokoro-multi-lang", its speakers named as the real ones are
 * (`speakerNames`, e.g. "am_adam"), with small lexicons in Kokoro's phonemes.
 */
export async function installStandInKokoro(
  modelsDir: string,
  speakerNames: readonly string[],
): Promise<string> {
  const entry = findSherpaModelOf("tts", "kokoro-multi-lang");
  if (entry?.tts.kind !== "kokoro") throw new Error("the catalogue has no Kokoro model");
  const dir = path.join(modelsDir, entry.dir);
  const written = await writeKokoroStandIn({ dir, speakerNames });
  await rename(written.model, path.join(dir, entry.tts.model));
  await rename(written.voices, path.join(dir, entry.tts.voices));
  await rename(written.tokens, path.join(dir, entry.tts.tokens));
  const [english, chinese] = entry.tts.lexicons;
  await writeFile(path.join(dir, english!), "hello h ə l o\nworld w ɜ l d\n");
  await writeFile(path.join(dir, chinese!), "你好 n i h a o\n谢谢 ɕ j e ɕ j e\n今天 ʨ i n t j ɛ n\n");
  await linkEspeakNgData(modelsDir, dir);
  return dir;
}

/**
 * A stand-in translation model as catalogue model `name` ("opus-mt-en-es", "m2m100-418m"): it
 * echoes its input followed by the target language's marker ("go forward" → "go forward [es]").
 */
export function installStandInTranslation(
  modelsDir: string,
  name: string,
  options: { size?: "small" | "real" } = {},
): string {
  const entry = findMtModel(name);
  if (!entry) throw new Error(`${name} is not a translation model of the catalogue`);
  const dir = mtModelDir(entry, modelsDir);
  const targetTokens = entry.directions.flatMap((d) => (d.targetToken ? [d.targetToken] : []));
  writeTranslationStandIn({
    dir,
    family: entry.family,
    size: options.size ?? "small",
    ...(entry.family === "marian" ? { marker: `[${entry.directions[0]!.to}]`, targetTokens } : {}),
  });
  return dir;
}

/** The stand-in tone colour models (tone-color.ts) as catalogue model "tone-color". */
export async function installStandInToneColor(
  modelsDir: string,
  options: { size?: "small" | "real" } = {},
): Promise<string> {
  const entry = findToneColorModel("tone-color")!;
  const dir = toneColorModelDir(entry, modelsDir);
  await writeToneColorStandIn(dir, options);
  return dir;
}
