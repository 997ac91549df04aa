import { readdir, stat } from "node:fs/promises";
import path from "node:path";
import {
  CATALOGUE,
  findModel,
  formatPublishedSize,
  type ModelEntry,
} from "../engines/whisper-cpp/catalogue.js";
import {
  downloadModel,
  formatMiB,
  modelPath,
  modelsDir,
  ModelError,
  partialPath,
  type DownloadOptions,
  type DownloadProgress,
} from "../engines/kit/models/download.js";
import { verifyModel } from "../engines/whisper-cpp/models.js";
import {
  findMtModel,
  MT_CATALOGUE,
  type MtModelEntry,
  type MtQuality,
} from "../engines/transformers-js/catalogue.js";
import { isMtPulled, mtModelDir } from "../engines/transformers-js/models.js";
import { pullMtModel, readMtManifest, verifyMtModel } from "../engines/transformers-js/pull.js";
import {
  SHERPA_CATALOGUE,
  findSherpaModel,
  type SherpaModelEntry,
} from "../engines/sherpa-onnx/catalogue.js";
import { importedVoices, isPulled } from "../engines/sherpa-onnx/models.js";
import { plainText } from "../engines/kit/models/model-dir.js";
import { pullSherpaModel, readManifest, verifySherpaModel } from "../engines/sherpa-onnx/pull.js";
import { findToneColorModel, TONE_COLOR_CATALOGUE } from "../engines/openvoice/catalogue.js";
import { isToneColorPulled } from "../engines/openvoice/models.js";
import { verifyToneColorModel } from "../engines/openvoice/pull.js";
import { CliError } from "./network.js";
import { printTable } from "./output.js";
import { listToneColorModels, toneColorPullSteps } from "./models-tone-color.js";
import { ProgressLine } from "./progress.js";

/**
 * `relay models list | pull <name> | verify [name]`: the whisper.cpp models, the sherpa-onnx
 * models (voices, streaming recognition, punctuation, speaker embeddings), the translation
 * models (transformers.js) and the tone colour model (OpenVoice, models-tone-color.ts) on this machine. `relay models pull mt de-en` pulls the model of a
 * translation direction.
 */

/** Where the models are: `--dir`, else the service's own MODELS_DIR or DATA_DIR/models. */
export const dirOf = (options: { readonly dir?: string }): string => options.dir ?? modelsDir(process.env);

function knownNames(): string {
  return [...CATALOGUE, ...SHERPA_CATALOGUE, ...MT_CATALOGUE, ...TONE_COLOR_CATALOGUE]
    .map((model) => model.name)
    .join(", ");
}

function entryOrFail(name: string): ModelEntry {
  const entry = findModel(name);
  if (!entry) throw new CliError(`unknown model "${name}" (known: ${knownNames()})`);
  return entry;
}

/** The sherpa-onnx catalogue and the Piper voices imported into `dir` (`relay models import piper`). */
const sherpaModels = (dir: string): SherpaModelEntry[] => [...SHERPA_CATALOGUE, ...importedVoices(dir)];

async function fileSize(file: string): Promise<number | undefined> {
  const info = await stat(file).catch(() => undefined);
  return info?.isFile() ? info.size : undefined;
}

/** `relay models list`: the catalogue, and which models are in the models directory. */
export async function listModels(dir: string): Promise<number> {
  const rows: string[][] = [];
  for (const entry of CATALOGUE) {
    const pulled = await fileSize(modelPath(entry, dir));
    const partial = await fileSize(partialPath(entry, dir));
    const state =
      pulled !== undefined ? "yes" : partial !== undefined ? `partial (${formatMiB(partial)})` : "no";
    rows.push([entry.name, formatPublishedSize(entry) ?? "-", entry.languages, state, entry.description]);
  }
  printTable(["NAME", "SIZE", "LANGUAGES", "PULLED", "DESCRIPTION"], rows);
  console.log(`\nmodels directory: ${dir}`);
  console.log('SIZE "-": upstream publishes no size or checksum for that model (verify cannot check it).');
  const known = new Set(CATALOGUE.map((entry) => entry.file));
  const others = (await readdir(dir).catch(() => [] as string[])).filter(
    (file) => file.endsWith(".bin") && !known.has(file),
  );
  if (others.length > 0) console.log(`other model files there: ${others.sort().join(", ")}`);
  console.log(
    "\nNeural models (sherpa-onnx; SIZE: download; DEFAULT: pulled by `npm run setup`; COMMERCIAL: whether the licence clearly allows commercial use):\n",
  );
  printTable(
    ["NAME", "KIND", "LANGUAGES", "SIZE", "DEFAULT", "PULLED", "COMMERCIAL", "LICENCE", "DESCRIPTION"],
    await Promise.all(
      sherpaModels(dir).map(async (entry) => {
        const partial = await fileSize(
          partialPath(entry, entry.file.endsWith(".tar.bz2") ? dir : `${dir}/${entry.dir}`),
        );
        const state = isPulled(entry, dir)
          ? "yes"
          : partial !== undefined
            ? `partial (${formatMiB(partial)})`
            : "no";
        return [
          entry.name,
          entry.kind,
          entry.languages.join(",") || "any",
          `~${entry.approxMiB} MiB`,
          entry.default ? "yes" : "",
          state,
          entry.licence.commercialUse,
          licenceOf(entry, readManifest(path.join(dir, entry.dir))?.licence),
          entry.description,
        ];
      }),
    ),
  );
  await listTranslationModels(dir);
  listToneColorModels(dir);
  return 0;
}

/**
 * The catalogue's licence, and what the pulled model's own card states where it says something
 * else (plain text: the card is the archive's).
 */
function licenceOf(entry: SherpaModelEntry, stated: string | undefined): string {
  const card = stated === undefined ? "" : plainText(stated, 80);
  return card && !entry.licence.text.includes(card)
    ? `${entry.licence.text} (its card: ${card})`
    : entry.licence.text;
}

/** "en-es BLEU 26.7, COMET 0.850 (FLORES-101 devtest) [1]": the first test set's figures. */
function qualityOf(entry: MtModelEntry, sources: string[]): string {
  const [first] = entry.quality;
  if (!first) return "none published";
  const same = (q: MtQuality) => q.testSet === first.testSet && q.direction === first.direction;
  const figures = entry.quality.filter(same).map((q) => `${q.metric} ${q.value}`);
  if (!sources.includes(first.source)) sources.push(first.source);
  return `${first.direction} ${figures.join(", ")} (${first.testSet}) [${sources.indexOf(first.source) + 1}]`;
}

async function listTranslationModels(dir: string): Promise<void> {
  console.log(
    "\nTranslation models (transformers.js; DEFAULT: pulled by `npm run setup`; `relay models pull mt de-en` pulls a direction's model; other pairs go through English):\n",
  );
  const sources: string[] = [];
  const rows = await Promise.all(
    MT_CATALOGUE.map(async (entry) => {
      const pulled = isMtPulled(entry, dir);
      const manifest = pulled ? readMtManifest(mtModelDir(entry, dir)) : undefined;
      const decoder = manifest?.files["onnx/decoder_model_merged_quantized.onnx"];
      return [
        entry.name,
        entry.directions.map(({ from, to }) => `${from}-${to}`).join(","),
        `~${entry.approxMiB} MiB`,
        entry.default ? "yes" : "",
        pulled ? "yes" : "no",
        entry.licence.replace(/ \(.*\)$/u, ""),
        decoder ? `${decoder.slice(0, 12)}…` : "-",
        qualityOf(entry, sources),
      ];
    }),
  );
  printTable(
    ["NAME", "DIRECTIONS", "SIZE", "DEFAULT", "PULLED", "LICENCE", "SHA-256", "PUBLISHED QUALITY"],
    rows,
  );
  console.log(
    "\nSHA-256: of the pulled decoder, as recorded at pull (`relay models verify <name>` checks every file).",
  );
  sources.forEach((source, i) => console.log(`[${i + 1}] ${source}`));
}

/**
 * The catalogue model of `mt <from>-<to>`: the model serving the direction itself; a direction
 * that goes through English names the two to pull.
 */
function translationModelOf(direction: string | undefined): MtModelEntry {
  const [from, to] = (direction ?? "").split("-");
  if (!from || !to)
    throw new CliError("name a direction: `relay models pull mt de-en` (languages as ISO 639-1 codes)");
  const serving = (a: string, b: string) =>
    MT_CATALOGUE.find((entry) => entry.directions.some((d) => d.from === a && d.to === b));
  const found = serving(from, to);
  if (found) return found;
  const [first, second] = [serving(from, "en"), serving("en", to)];
  if (first && second)
    throw new CliError(
      `no model translates ${from}-${to} itself: it goes through English (\`relay models pull mt ${from}-en\` and \`relay models pull mt en-${to}\`)`,
    );
  throw new CliError(`no translation model serves ${from}-${to} (see \`relay models list\`)`);
}

/**
 * The pull's progress line, drawn like `relay dub`'s: bar, percent, bytes and speed; in logs and pipes
 * one plain line per 10 %.
 */
function downloadProgress(stream: NodeJS.WriteStream): {
  update: (progress: DownloadProgress) => void;
  end: () => void;
} {
  const line = new ProgressLine(stream, { plainStep: 10 });
  const startedAt = performance.now();
  return {
    update({ received, total, resumedFrom }: DownloadProgress) {
      const seconds = Math.max(0.001, (performance.now() - startedAt) / 1000);
      const speed = `${formatMiB((received - resumedFrom) / seconds)}/s`;
      const amount = total ? `${formatMiB(received)} / ${formatMiB(total)}` : formatMiB(received);
      line.update({ percent: total ? (100 * received) / total : undefined, detail: `${amount} ${speed}` });
    },
    end: () => line.end(),
  };
}

const INTERRUPTED = Symbol("interrupted");

/**
 * Runs a download with its progress line; Ctrl-C stops it (the partial file stays for a resume) and
 * gives INTERRUPTED. Failures phrased for the user become the CLI's errors.
 */
async function interruptible<T>(
  baseUrl: string | undefined,
  download: (options: DownloadOptions) => Promise<T>,
): Promise<T | typeof INTERRUPTED> {
  const bar = downloadProgress(process.stderr);
  const controller = new AbortController();
  const onInterrupt = () => controller.abort();
  process.once("SIGINT", onInterrupt);
  try {
    return await download({
      ...(baseUrl ? { baseUrl } : {}),
      signal: controller.signal,
      onProgress: (progress) => bar.update(progress),
    });
  } catch (error) {
    if (controller.signal.aborted) return INTERRUPTED;
    throw error instanceof ModelError ? new CliError(error.message) : error;
  } finally {
    bar.end();
    process.off("SIGINT", onInterrupt);
  }
}

/** `relay models pull <name>` (or `mt <from>-<to>`): download (or resume) a model and check it. */
export async function pullModel(
  name: string,
  dir: string,
  baseUrl: string | undefined,
  direction?: string,
): Promise<number> {
  const translation = name === "mt" ? translationModelOf(direction) : findMtModel(name);
  if (translation) return pullTranslation(translation, dir, baseUrl);
  const neural = findSherpaModel(name);
  if (neural) return pullNeural(neural, dir, baseUrl);
  const tone = findToneColorModel(name);
  if (tone) return pullIntoDirectory(tone, tone.repo, dir, toneColorPullSteps(tone, dir), baseUrl);
  const entry = entryOrFail(name);
  const existing = await fileSize(modelPath(entry, dir));
  if (existing !== undefined) {
    const check = await verifyModel(entry, dir);
    if (check.ok) {
      console.log(`${entry.name} is already pulled: ${check.path} (${check.message})`);
      return 0;
    }
    process.stderr.write(
      `${entry.name}: the file there fails verification (${check.message}); pulling again\n`,
    );
  }
  const kept = await fileSize(partialPath(entry, dir));
  process.stderr.write(
    kept
      ? `resuming ${entry.file} from ${formatMiB(kept)}\n`
      : `downloading ${entry.file} (${formatPublishedSize(entry) ?? "size not published"}) into ${dir}\n`,
  );
  const result = await interruptible(baseUrl, (options) => downloadModel(entry, dir, options));
  if (result === INTERRUPTED) {
    process.stderr.write(`relay: interrupted; kept ${partialPath(entry, dir)}: pull again to resume\n`);
    return 130;
  }
  const check = result.checksumVerified ? "SHA-1 ok" : `no published checksum; SHA-1 ${result.sha1}`;
  console.log(`pulled ${entry.name}: ${result.path} (${formatMiB(result.bytes)}, ${check})`);
  return 0;
}

/**
 * A model pulled whole into a directory of its own (sherpa-onnx, translation, tone colour): nothing to do when
 * it is there and verifies, otherwise downloaded (or resumed) with its progress; `detail` and
 * `after` say what the pull checked and recorded.
 */
async function pullIntoDirectory<R extends { dir: string; bytes: number; resumedFrom: number }>(
  entry: { name: string; approxMiB: number },
  what: string,
  dir: string,
  steps: {
    verified: () => Promise<boolean>;
    pull: (options: DownloadOptions) => Promise<R>;
    detail: (result: R) => string;
    after: (result: R) => string;
  },
  baseUrl: string | undefined,
): Promise<number> {
  if (await steps.verified()) {
    console.log(`${entry.name} is already pulled`);
    return 0;
  }
  process.stderr.write(`downloading ${what} (about ${entry.approxMiB} MiB) into ${dir}\n`);
  const result = await interruptible(baseUrl, steps.pull);
  if (result === INTERRUPTED) {
    process.stderr.write("relay: interrupted; pull again to resume\n");
    return 130;
  }
  const resumed = result.resumedFrom > 0 ? `, resumed from ${formatMiB(result.resumedFrom)}` : "";
  console.log(
    `pulled ${entry.name}: ${result.dir} (${formatMiB(result.bytes)}${resumed}; ${steps.detail(result)})`,
  );
  console.log(steps.after(result));
  return 0;
}

/** A sherpa-onnx model: download (or resume), unpack, check, record checksums. */
function pullNeural(entry: SherpaModelEntry, dir: string, baseUrl: string | undefined): Promise<number> {
  return pullIntoDirectory(
    entry,
    entry.file,
    dir,
    {
      verified: async () => isPulled(entry, dir) && (await verifySherpaModel(entry, dir)).ok,
      pull: (options) => pullSherpaModel(entry, dir, options),
      detail: (result) => `no published checksum, SHA-256 ${result.archiveSha256} recorded`,
      after: (result) =>
        result.licence
          ? `licence, as its model card states it: ${result.licence}`
          : "its archive states no licence: check the voice's source before offering it",
    },
    baseUrl,
  );
}

/** A translation model: download (or resume) every file, check, move into place. */
function pullTranslation(entry: MtModelEntry, dir: string, baseUrl: string | undefined): Promise<number> {
  return pullIntoDirectory(
    entry,
    entry.repo,
    dir,
    {
      verified: async () => isMtPulled(entry, dir) && (await verifyMtModel(entry, dir)).ok,
      pull: (options) => pullMtModel(entry, dir, options),
      detail: (result) =>
        `${result.checked} of ${result.files} files checked against the SHA-256 Hugging Face states`,
      after: () => `licence: ${entry.licence}`,
    },
    baseUrl,
  );
}

interface Verification {
  readonly name: string;
  readonly verify: () => Promise<{ ok: boolean; message: string }>;
}

/** Each entry's verification, in the models directory. */
function verifications<E extends { name: string }>(
  entries: readonly E[],
  verify: (entry: E, dir: string) => Promise<{ ok: boolean; message: string }>,
  dir: string,
): Verification[] {
  return entries.map((entry) => ({ name: entry.name, verify: () => verify(entry, dir) }));
}

/** `relay models verify [name]`: one model, or every pulled catalogue model in the directory. */
export async function verifyModels(name: string | undefined, dir: string): Promise<number> {
  const all: Verification[] = [];
  if (name) {
    const [neural, translation, tone] = [
      sherpaModels(dir).find((entry) => entry.name === name),
      findMtModel(name),
      findToneColorModel(name),
    ];
    if (neural) all.push(...verifications([neural], verifySherpaModel, dir));
    if (translation) all.push(...verifications([translation], verifyMtModel, dir));
    if (tone) all.push(...verifications([tone], verifyToneColorModel, dir));
    if (all.length === 0) all.push(...verifications([entryOrFail(name)], verifyModel, dir));
  } else {
    for (const entry of CATALOGUE)
      if ((await fileSize(modelPath(entry, dir))) !== undefined)
        all.push(...verifications([entry], verifyModel, dir));
    all.push(
      ...verifications(
        sherpaModels(dir).filter((entry) => isPulled(entry, dir)),
        verifySherpaModel,
        dir,
      ),
      ...verifications(
        MT_CATALOGUE.filter((entry) => isMtPulled(entry, dir)),
        verifyMtModel,
        dir,
      ),
      ...verifications(
        TONE_COLOR_CATALOGUE.filter((entry) => isToneColorPulled(entry, dir)),
        verifyToneColorModel,
        dir,
      ),
    );
    if (all.length === 0) {
      console.log(`no models pulled in ${dir} (see \`relay models list\`)`);
      return 0;
    }
  }
  let failed = 0;
  const width = Math.max(...all.map((entry) => entry.name.length));
  for (const entry of all) {
    const result = await entry.verify();
    if (!result.ok) failed++;
    console.log(`${entry.name.padEnd(width)}  ${result.ok ? "" : "FAILED: "}${result.message}`);
  }
  if (failed > 0) {
    throw new CliError(
      all.length === 1
        ? `${all[0]!.name} failed verification`
        : `${failed} of ${all.length} models failed verification`,
    );
  }
  return 0;
}
