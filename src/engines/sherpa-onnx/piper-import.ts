/**
 * `relay models import piper <voice.onnx>`: a Piper voice as Piper publishes it (rhasspy/piper-voices,
 * `piper.download_voices`: `<voice>.onnx` beside `<voice>.onnx.json`) made into what sherpa-onnx loads
 * and relay's pulled Piper voices hold (`vits-piper-<voice>/`: the model with sherpa-onnx's metadata,
 * `tokens.txt`, `espeak-ng-data/`, the model card), with the same record `pull` leaves, so the
 * service, `verify` and `check` take it as they take a pulled voice.
 *
 * What sherpa-onnx needs, from k2-fsa/sherpa-onnx at 634265c9 (2026-08-08): its VITS loader
 * (sherpa-onnx/csrc/offline-tts-vits-model.cc) requires `sample_rate`, `n_speakers`, `language` and
 * `comment` (containing "piper" selects Piper's inputs and, with a data dir, eSpeak NG phonemes) and
 * reads `voice` (the eSpeak NG voice) with an empty default; scripts/piper/add_meta_data.py, its own
 * conversion of Piper voices, writes those plus `model_type`, `version`, `has_espeak`, `has_g2pw`,
 * and tokens.txt as `<symbol> <first id>` per `phoneme_id_map` entry without "\n". Its token reader
 * (piper-phonemize-lexicon.cc `ReadTokens`) takes one code point per symbol and ends the process
 * otherwise, and its phoneme-to-id step needs `_`, `^` and `$`: checked here first.
 */
import { existsSync } from "node:fs";
import {
  chmod,
  cp,
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rename,
  rm,
  stat,
  writeFile,
} from "node:fs/promises";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import onnxProto from "onnx-proto";
import { z } from "zod";
import { fileDigest, ModelError } from "../kit/models/download.js";
import { plainText, writeRecord } from "../kit/models/model-dir.js";
import { sherpaModelsOf } from "./catalogue.js";
import { checkModelFile } from "./model-check.js";
import { importedVoiceDir, importedVoiceRecord, isPulled, sherpaModelDir } from "./models.js";
import { statedLicence } from "./pull.js";

// onnx-proto is CommonJS: its namespace is a property of the default export.
const { onnx } = onnxProto;
type ModelProto = ReturnType<typeof onnx.ModelProto.decode>;

/** The parts of Piper's voice config (`<voice>.onnx.json`, piper/config.py) the import reads. */
const piperConfig = z.object({
  audio: z.object({ sample_rate: z.number().int().positive() }),
  espeak: z.object({ voice: z.string().min(1) }),
  num_speakers: z.number().int().positive(),
  phoneme_type: z.string().optional(),
  phoneme_id_map: z.record(z.string(), z.array(z.number().int().nonnegative()).min(1)),
  language: z
    .object({ family: z.string().min(2), name_english: z.string().min(1) })
    .partial()
    .optional(),
  dataset: z.string().optional(),
});
type PiperConfig = z.infer<typeof piperConfig>;

/** Piper's export (piper/voice.py `phoneme_ids_to_audio`): `sid` only on a multi-speaker voice. */
const PIPER_INPUTS = ["input", "input_lengths", "scales"];
/** The ids sherpa-onnx frames every sentence with (pad, start, end: piper-phonemize's map). */
const FRAMING = ["_", "^", "$"];
/** Where Piper keeps a voice's card beside its files (rhasspy/piper-voices). */
const CARD = "MODEL_CARD";
const MiB = 1024 * 1024;

export interface PiperImportOptions {
  /** eSpeak NG's data for the phonemizer; default: a pulled Piper voice's, else eSpeak NG's own. */
  readonly espeakData?: string;
}

export interface PiperImportResult {
  readonly name: string;
  readonly dir: string;
  readonly language: string;
  readonly speakers: number;
  readonly espeakData: string;
  readonly licence: string | undefined;
}

/** Imports the Piper voice `model` (its `.onnx.json` beside it) into `modelsDir`. */
export async function importPiperVoice(
  model: string,
  modelsDir: string,
  options: PiperImportOptions = {},
): Promise<PiperImportResult> {
  const voice = path.basename(model).replace(/\.onnx$/u, "");
  if (!model.endsWith(".onnx") || !/^[\w-][\w.-]*$/u.test(voice))
    throw new ModelError(`${model}: a Piper voice is a <voice>.onnx file (letters, digits, "_", "-", ".")`);
  const config = await readConfig(`${model}.json`);
  const language = config.language?.family;
  if (!language) throw new ModelError(`${model}.json states no language (language.family)`);
  const tokens = tokensText(config, `${model}.json`);
  const bytes = await readFile(model).catch((error: Error) => {
    throw new ModelError(`cannot read ${model}: ${error.message}`);
  });
  const proto = decodeModel(bytes, model);
  const inputs = [...PIPER_INPUTS, ...(config.num_speakers > 1 ? ["sid"] : [])];
  const given = new Set((proto.graph?.input ?? []).map((input) => input.name));
  const missing = inputs.filter((input) => !given.has(input));
  if (missing.length > 0)
    throw new ModelError(`${model} is not Piper's export: it lacks the inputs ${missing.join(", ")}`);
  const espeakData = options.espeakData ?? (await defaultEspeakData(modelsDir));
  if (!existsSync(path.join(espeakData, "phontab")))
    throw new ModelError(`${espeakData} is not an espeak-ng-data directory (it has no phontab)`);

  const name = `piper-${voice}`;
  const dir = importedVoiceDir(voice);
  const target = path.join(modelsDir, dir);
  await mkdir(modelsDir, { recursive: true });
  // What an import that died left behind.
  for (const entry of await readdir(modelsDir))
    if (entry.startsWith(`.import-${dir}-`))
      await rm(path.join(modelsDir, entry), { recursive: true, force: true });
  const staging = await mkdtemp(path.join(modelsDir, `.import-${dir}-`));
  try {
    // mkdtemp's 0700: a voice's directory is readable as a pulled one is.
    await chmod(staging, 0o755);
    const onnxFile = path.join(staging, `${voice}.onnx`);
    await writeFile(onnxFile, withMetadata(bytes, proto, sherpaMetadata(config, language), model));
    // What sherpa-onnx would end its process over is refused here instead.
    await checkModelFile(onnxFile, "vits");
    await writeFile(path.join(staging, "tokens.txt"), tokens);
    // A copy, not a link: the voice must not break when the data it came from goes.
    await cp(espeakData, path.join(staging, "espeak-ng-data"), { recursive: true, dereference: true });
    const card = path.join(path.dirname(model), CARD);
    if ((await lstat(card).catch(() => undefined))?.isFile()) await cp(card, path.join(staging, CARD));
    const licence = await statedLicence(staging);
    const files: Record<string, string> = {};
    const sizes: Record<string, number> = {};
    for (const file of [`${voice}.onnx`, "tokens.txt"]) {
      files[file] = await fileDigest(path.join(staging, file), "sha256");
      sizes[file] = (await stat(path.join(staging, file))).size;
    }
    const speakers = config.num_speakers === 1 ? "1 speaker" : `${config.num_speakers} speakers`;
    const record: z.infer<typeof importedVoiceRecord> = {
      name,
      url: pathToFileURL(path.resolve(model)).href,
      // pull's record: here the SHA-256 of the file imported, before its metadata was added.
      archiveSha256: await fileDigest(model, "sha256"),
      files,
      sizes,
      ...(licence ? { licence } : {}),
      imported: {
        from: "piper",
        language,
        description: `Imported Piper voice: ${plainText(config.language?.name_english ?? language, 40)}, ${speakers}${
          config.dataset ? ` (${plainText(config.dataset, 40)})` : ""
        }`,
        approxMiB: Math.round(bytes.length / MiB),
      },
    };
    await writeRecord(staging, record);
    await rm(target, { recursive: true, force: true });
    await rename(staging, target);
    return { name, dir: target, language, speakers: config.num_speakers, espeakData, licence };
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

function decodeModel(bytes: Buffer, shown: string): ModelProto {
  let proto: ModelProto;
  try {
    proto = onnx.ModelProto.decode(bytes);
  } catch (error) {
    throw new ModelError(`${shown} is not a complete ONNX model (${(error as Error).message})`);
  }
  if (!proto.graph?.node?.length) throw new ModelError(`${shown} is not an ONNX model (it has no graph)`);
  return proto;
}

async function readConfig(file: string): Promise<PiperConfig> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    throw new ModelError(
      `cannot read ${file} (Piper's voice config, beside the .onnx): ${(error as Error).message}`,
    );
  }
  let parsed: PiperConfig;
  try {
    parsed = piperConfig.parse(JSON.parse(text));
  } catch (error) {
    throw new ModelError(`${file} is not a Piper voice config: ${plainText((error as Error).message)}`);
  }
  // Other phoneme types (pinyin, text) need a lexicon or g2pW that relay does not set up.
  if ((parsed.phoneme_type ?? "espeak") !== "espeak")
    throw new ModelError(`${file}: phoneme_type "${parsed.phoneme_type}" is not supported (only espeak)`);
  return parsed;
}

/** tokens.txt as sherpa-onnx reads it: `<symbol> <id>` a line (the space symbol is ` <id>`). */
function tokensText(config: PiperConfig, file: string): string {
  const map = config.phoneme_id_map;
  const absent = FRAMING.filter((symbol) => !(symbol in map));
  if (absent.length > 0) throw new ModelError(`${file}: phoneme_id_map lacks ${absent.join(" ")}`);
  const lines: string[] = [];
  for (const [symbol, ids] of Object.entries(map)) {
    // A line-based reader cannot hold a line break, and eSpeak NG's phonemes never are one.
    if (symbol === "\n") continue;
    if ([...symbol].length !== 1 || (/\s/u.test(symbol) && symbol !== " "))
      throw new ModelError(
        `${file}: phoneme "${plainText(symbol, 20)}" is not one printable character (sherpa-onnx cannot read it)`,
      );
    lines.push(`${symbol} ${ids[0]}`);
  }
  return `${lines.join("\n")}\n`;
}

/** The metadata scripts/piper/add_meta_data.py gives a Piper voice (see the top of this file). */
function sherpaMetadata(config: PiperConfig, language: string): Record<string, string> {
  return {
    model_type: "vits",
    comment: "piper",
    language: config.language?.name_english ?? language,
    voice: config.espeak.voice,
    version: "1",
    has_espeak: "1",
    has_g2pw: "0",
    n_speakers: String(config.num_speakers),
    // Upstream's conversion corrects this one mis-stated rate; no voice is really at 22500 Hz.
    sample_rate: String(config.audio.sample_rate === 22500 ? 22050 : config.audio.sample_rate),
  };
}

/**
 * The model with `metadata` added, without decoding and re-encoding its weights: ModelProto's
 * `metadata_props` is field 14, `repeated StringStringEntryProto` (key = 1, value = 2; onnx/onnx.proto),
 * and protobuf parses a repeated field's entries wherever they occur in a message, appending each
 * (a parser merges concatenated messages), so the serialized entries appended to the file's bytes
 * are valid ONNX. A key the model already has is refused: which of two would be read is not defined.
 */
function withMetadata(
  bytes: Buffer,
  proto: ModelProto,
  metadata: Record<string, string>,
  shown: string,
): Buffer {
  const existing = proto.metadataProps.map((entry) => entry.key ?? "");
  const clash = existing.filter((key) => key in metadata);
  if (clash.length > 0)
    throw new ModelError(
      `${shown} already has sherpa-onnx's metadata (${clash.join(", ")}): it is not in Piper's own layout`,
    );
  const entries = onnx.ModelProto.encode({
    metadataProps: Object.entries(metadata).map(([key, value]) => ({ key, value })),
  }).finish();
  return Buffer.concat([bytes, entries]);
}

/**
 * The eSpeak NG data a voice is phonemized with: a pulled Piper voice's (what sherpa-onnx's archives
 * ship with its phonemizer), else the data eSpeak NG itself reports (relay's embedded voice, setup
 * installs it).
 */
async function defaultEspeakData(modelsDir: string): Promise<string> {
  const pulled = sherpaModelsOf("tts").find(
    (entry) =>
      entry.tts.kind === "vits" &&
      isPulled(entry, modelsDir) &&
      existsSync(path.join(sherpaModelDir(entry, modelsDir), "espeak-ng-data", "phontab")),
  );
  if (pulled) return path.join(sherpaModelDir(pulled, modelsDir), "espeak-ng-data");
  const reported = await promisify(execFile)("espeak-ng", ["--version"], { timeout: 10_000 }).then(
    ({ stdout }) => /Data at:\s*(.+)$/mu.exec(stdout)?.[1]?.trim(),
    () => undefined,
  );
  if (!reported)
    throw new ModelError(
      "no eSpeak NG data found: pull a Piper voice, install espeak-ng, or pass --espeak-data <dir>",
    );
  return reported;
}
