/**
 * Pulling and verifying sherpa-onnx models. The download itself is download.ts's (resumable, into
 * `<file>.partial`); an archive is then unpacked in JavaScript (unpack.ts: regular files and
 * directories only, nothing outside the staging directory, no owners or setuid bits kept, and no
 * `bzip2` program needed) beside the final directory, its tree checked, and renamed into place, so
 * `<models>/<dir>` is never half-unpacked. What upstream leaves out is made from what it ships (the
 * zipformer's `bpe.vocab` from its `bpe.model`), in the staging directory too, so a pull that fails
 * or dies there leaves no model directory behind (and the next pull clears what such a pull left in
 * staging). A manifest in the directory records the archive's
 * SHA-256 and each loaded file's SHA-256 and size, and `verify` checks the files against it and
 * against the metadata sherpa-onnx needs (a file without it would end the process that loads it).
 */
import { existsSync } from "node:fs";
import { lstat, mkdir, mkdtemp, readdir, readFile, rename, rm, stat } from "node:fs/promises";
import path from "node:path";
import { z } from "zod";
import { checkKokoroVoices, checkModelFile, ModelFileError, type ModelFileKind } from "./model-check.js";
import {
  checkPulledFiles,
  downloadModel,
  fileDigest,
  formatMiB,
  ModelError,
  type DownloadOptions,
} from "../kit/models/download.js";
import { writeBpeVocab } from "./bpe-vocab.js";
import { plainText, readRecord, writeRecord } from "../kit/models/model-dir.js";
import type { SherpaModelEntry } from "./catalogue.js";
import { archiveRecord, isPulled, loadProblemOf, requiredFiles, sherpaModelDir } from "./models.js";
import { checkTree, unpackTarBz2, UnsafeArchiveError } from "../kit/models/unpack.js";

/**
 * Room an archive's unpacked tree needs beside it, per byte of its approximate size: bzip2 saves
 * little on model weights (the zipformer's archive, about 300 MiB, unpacks to about 323 MiB).
 */
const UNPACKED_PER_ARCHIVE_BYTE = 1.25;
const MiB = 1024 * 1024;
/** A check of the files quotes them (ONNX metadata): plain, and long enough to say what is wrong. */
const PROBLEM_CHARS = 400;

/** Where a model archive states its licence: the model card first, then a README. */
const CARDS = ["MODEL_CARD", "MODEL_CARD.md", "README.md"];

/**
 * The licence line of the model's card ("License: CC BY 4.0" → "CC BY 4.0"), if it has one, as
 * plain text (a card is the archive's: it may hold terminal escapes). Cards are regular files of
 * the checked tree, never links.
 */
export async function statedLicence(dir: string): Promise<string | undefined> {
  for (const card of CARDS) {
    const file = path.join(dir, card);
    if (!(await lstat(file).catch(() => undefined))?.isFile()) continue;
    const text = await readFile(file, "utf8").catch(() => undefined);
    const line = text && /^\W*licen[cs]e\W*[:=]\s*(.+?)\s*$/imu.exec(text);
    if (line) return plainText(line[1]!, 120);
  }
  return undefined;
}

/** The record `pull` leaves in a model's directory, if it is there, whole, and not a link. */
export function readManifest(dir: string): z.infer<typeof archiveRecord> | undefined {
  return readRecord(dir, archiveRecord);
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
  await mkdir(modelsDir, { recursive: true });
  const stagingPrefix = `.unpack-${entry.dir}-`;
  // What an earlier pull of this model left when it died while unpacking (ended, out of memory).
  for (const name of await readdir(modelsDir))
    if (name.startsWith(stagingPrefix))
      await rm(path.join(modelsDir, name), { recursive: true, force: true });
  // Whatever is where the model goes and is not a real directory (a planted link) is replaced.
  const existing = await lstat(target).catch(() => undefined);
  if (existing && !existing.isDirectory()) await rm(target, { force: true });
  // A single model file downloads straight into its directory; an archive next to it, with room
  // for its unpacked tree checked before the transfer.
  const downloadDir = archive ? modelsDir : target;
  const extraSpace = archive ? Math.ceil(entry.approxMiB * MiB * UNPACKED_PER_ARCHIVE_BYTE) : 0;
  const result = await downloadModel(entry, downloadDir, { ...options, extraSpace });
  if (archive) {
    const staging = await mkdtemp(path.join(modelsDir, stagingPrefix));
    try {
      const unpacked = await unpack(entry, result.path, staging);
      await completeLayout(entry, unpacked);
      await rm(target, { recursive: true, force: true });
      await rename(unpacked, target);
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
  const sizes: Record<string, number> = {};
  for (const file of requiredFiles(entry, modelsDir)) {
    files[path.relative(target, file)] = await fileDigest(file, "sha256");
    sizes[path.relative(target, file)] = (await stat(file)).size;
  }
  const licence = await statedLicence(target);
  const manifest = {
    name: entry.name,
    url: entry.url,
    archiveSha256: result.sha256,
    files,
    sizes,
    ...(licence ? { licence } : {}),
  };
  await writeRecord(target, manifest);
  return {
    dir: target,
    licence,
    bytes: result.bytes,
    archiveSha256: result.sha256,
    resumedFrom: result.resumedFrom,
  };
}

/** Unpacks `archive` into `staging` and checks the tree: the model's directory in it. */
async function unpack(entry: SherpaModelEntry, archive: string, staging: string): Promise<string> {
  try {
    await unpackTarBz2(archive, staging);
    const unpacked = path.join(staging, entry.dir);
    if (!(await lstat(unpacked).catch(() => undefined))?.isDirectory())
      throw new Error(`the archive has no directory ${entry.dir}/`);
    await checkTree(unpacked);
    return unpacked;
  } catch (error) {
    const unsafe = error instanceof UnsafeArchiveError ? "refused: " : "";
    throw new ModelError(
      `${entry.file} did not unpack into ${entry.dir}/ (${unsafe}${plainText((error as Error).message)}); ` +
        "the archive was deleted: pull again",
    );
  }
}

/**
 * Makes what upstream leaves out of the unpacked model `dir`: the zipformer ships bpe.model only, and
 * its hotwords need bpe.vocab (k2-fsa's hotwords docs). The streaming models are all archives.
 */
async function completeLayout(entry: SherpaModelEntry, dir: string): Promise<void> {
  if (entry.kind !== "streaming-asr") return;
  const vocab = path.join(dir, entry.asr.bpeVocab);
  const model = path.join(dir, entry.asr.bpeModel);
  if (existsSync(vocab) || !existsSync(model)) return;
  try {
    await writeBpeVocab(model, vocab);
  } catch (error) {
    // What was wrong with the file, without the staging path writeBpeVocab names it by.
    const reason =
      (error as Error).cause instanceof Error ? (error as { cause: Error }).cause : (error as Error);
    throw new ModelError(
      `${entry.name}: ${entry.asr.bpeModel}: ${plainText(reason.message)}; the download was deleted`,
    );
  }
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
      if (error instanceof ModelFileError) return plainText(error.message, PROBLEM_CHARS);
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
  const manifest = readManifest(dir);
  const recorded = await checkPulledFiles(entry.name, dir, isPulled(entry, modelsDir), manifest?.files);
  if (!recorded.ok) return recorded;
  // What the service checks before it loads the model (links out of MODELS_DIR, sizes).
  const loading = loadProblemOf(entry, modelsDir);
  if (loading) return { ok: false, message: `${loading} (run \`relay models pull ${entry.name}\`)` };
  const problem = await problemWith(entry, modelsDir);
  if (problem) return { ok: false, message: problem };
  return {
    ok: true,
    message: `ok (${formatMiB(recorded.bytes)}, files match the SHA-256 recorded at pull; archive SHA-256 ${manifest!.archiveSha256}; no published checksum)`,
  };
}
