/**
 * Pulling and verifying sherpa-onnx models. The download itself is download.ts's (resumable, into
 * `<file>.partial`); an archive is then unpacked beside the final directory and renamed into place,
 * so `<models>/<dir>` is never half-unpacked. A manifest in the directory records the archive's
 * SHA-256 and each loaded file's, and `verify` checks the files against it and against the metadata
 * sherpa-onnx needs (a file without it would end the process that loads it).
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rename, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { z } from "zod";
import {
  checkKokoroVoices,
  checkModelFile,
  ModelFileError,
  type ModelFileKind,
} from "../engines/sherpa-onnx/model-check.js";
import {
  checkPulledFiles,
  downloadModel,
  fileDigest,
  formatMiB,
  ModelError,
  type DownloadOptions,
} from "./download.js";
import type { SherpaModelEntry } from "./sherpa-catalogue.js";
import { isPulled, requiredFiles, sherpaModelDir } from "./sherpa-models.js";

const execFileAsync = promisify(execFile);

const MANIFEST = ".relay-model.json";

const manifestSchema = z.object({
  name: z.string(),
  url: z.string(),
  archiveSha256: z.string(),
  files: z.record(z.string(), z.string()),
  /** What the model's own card says of its licence, when it says (the catalogue cannot: it varies per voice). */
  licence: z.string().optional(),
});

/** Where a model archive states its licence: the model card first, then a README. */
const CARDS = ["MODEL_CARD", "MODEL_CARD.md", "README.md"];

/** The licence line of the model's card ("License: CC BY 4.0" → "CC BY 4.0"), if it has one. */
async function statedLicence(dir: string): Promise<string | undefined> {
  for (const card of CARDS) {
    const text = await readFile(path.join(dir, card), "utf8").catch(() => undefined);
    const line = text && /^\W*licen[cs]e\W*[:=]\s*(.+?)\s*$/imu.exec(text);
    if (line) return line[1]!.slice(0, 120);
  }
  return undefined;
}

/** The record `pull` leaves in a model's directory, if it is there and whole. */
export async function readManifest(dir: string): Promise<z.infer<typeof manifestSchema> | undefined> {
  return readFile(path.join(dir, MANIFEST), "utf8")
    .then((text) => manifestSchema.parse(JSON.parse(text)))
    .catch(() => undefined);
}

/** The ONNX files of an entry and what sherpa-onnx requires of each (model-check.ts). */
function checkedModels(entry: SherpaModelEntry, modelsDir: string): { file: string; kind: ModelFileKind }[] {
  const file = (name: string) => path.join(sherpaModelDir(entry, modelsDir), name);
  switch (entry.kind) {
    case "tts":
      return [{ file: file(entry.tts.model), kind: entry.tts.kind }];
    case "streaming-asr":
      return [
        { file: file(entry.asr.encoder), kind: "zipformer2-encoder" },
        { file: file(entry.asr.decoder), kind: "transducer-decoder" },
      ];
    case "punctuation":
      return [{ file: file(entry.punctuation.model), kind: "punctuation" }];
    case "speaker":
      return [{ file: file(entry.speaker.model), kind: "speaker-embedding" }];
  }
}

export interface SherpaPullResult {
  readonly dir: string;
  /** The licence the model's card states, if it states one. */
  readonly licence: string | undefined;
  readonly bytes: number;
  readonly archiveSha256: string;
  readonly resumedFrom: number;
}

/** Downloads (or resumes) `entry`, unpacks it, checks it and records its checksums. */
export async function pullSherpaModel(
  entry: SherpaModelEntry,
  modelsDir: string,
  options: DownloadOptions = {},
): Promise<SherpaPullResult> {
  const archive = entry.file.endsWith(".tar.bz2");
  const target = sherpaModelDir(entry, modelsDir);
  // A single model file downloads straight into its directory; an archive next to it.
  const downloadDir = archive ? modelsDir : target;
  const result = await downloadModel(entry, downloadDir, options);
  if (archive) {
    const staging = await mkdtemp(path.join(modelsDir, `.unpack-${entry.dir}-`));
    try {
      await execFileAsync("tar", ["-xjf", result.path, "-C", staging], { maxBuffer: 1024 * 1024 });
      await rm(target, { recursive: true, force: true });
      await rename(path.join(staging, entry.dir), target);
    } catch (error) {
      throw new ModelError(
        `${entry.file} did not unpack into ${entry.dir}/ (${(error as Error).message.split("\n")[0]}); ` +
          "the archive was deleted: pull again",
      );
    } finally {
      await rm(staging, { recursive: true, force: true });
      await rm(result.path, { force: true });
    }
  }
  const problem = await problemWith(entry, modelsDir);
  if (problem) {
    await rm(target, { recursive: true, force: true });
    throw new ModelError(`${entry.name}: ${problem}; the download was deleted (${entry.url})`);
  }
  const files: Record<string, string> = {};
  for (const file of requiredFiles(entry, modelsDir))
    files[path.relative(target, file)] = await fileDigest(file, "sha256");
  const licence = await statedLicence(target);
  const manifest = {
    name: entry.name,
    url: entry.url,
    archiveSha256: result.sha256,
    files,
    ...(licence ? { licence } : {}),
  };
  await mkdir(target, { recursive: true });
  await writeFile(path.join(target, MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`);
  return {
    dir: target,
    licence,
    bytes: result.bytes,
    archiveSha256: result.sha256,
    resumedFrom: result.resumedFrom,
  };
}

/** What keeps the pulled files from loading, if anything (missing files, missing metadata). */
async function problemWith(entry: SherpaModelEntry, modelsDir: string): Promise<string | undefined> {
  const missing = requiredFiles(entry, modelsDir).filter((file) => !existsSync(file));
  if (missing.length > 0) return `missing ${missing.map((file) => path.basename(file)).join(", ")}`;
  for (const { file, kind } of checkedModels(entry, modelsDir)) {
    try {
      const metadata = await checkModelFile(file, kind);
      if (entry.kind === "tts" && entry.tts.kind === "kokoro")
        await checkKokoroVoices(path.join(sherpaModelDir(entry, modelsDir), entry.tts.voices), metadata);
    } catch (error) {
      if (error instanceof ModelFileError) return error.message;
      throw error;
    }
  }
  return undefined;
}

export interface SherpaVerifyResult {
  readonly ok: boolean;
  readonly message: string;
}

/** Checks a pulled model's files against its manifest and what sherpa-onnx requires of them. */
export async function verifySherpaModel(
  entry: SherpaModelEntry,
  modelsDir: string,
): Promise<SherpaVerifyResult> {
  const dir = sherpaModelDir(entry, modelsDir);
  const manifest = await readManifest(dir);
  const recorded = await checkPulledFiles(entry.name, dir, isPulled(entry, modelsDir), manifest?.files);
  if (!recorded.ok) return recorded;
  const problem = await problemWith(entry, modelsDir);
  if (problem) return { ok: false, message: problem };
  return {
    ok: true,
    message: `ok (${formatMiB(recorded.bytes)}, files match the SHA-256 recorded at pull; archive SHA-256 ${manifest!.archiveSha256}; no published checksum)`,
  };
}
