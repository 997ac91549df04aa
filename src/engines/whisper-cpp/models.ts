import { existsSync, statSync } from "node:fs";
import { stat } from "node:fs/promises";
import path from "node:path";
import {
  fileDigest,
  formatMiB,
  ModelError,
  modelPath,
  outsidePublishedSize,
  partialPath,
  sizeOf,
} from "../kit/models/download.js";
import { findModel, formatPublishedSize, type ModelEntry } from "./catalogue.js";

/** whisper.cpp's model files as pulled: checked against what upstream publishes, and found again by name. */

export type VerifyStatus = "ok" | "no-checksum" | "missing" | "size-mismatch" | "checksum-mismatch";

export interface VerifyResult {
  readonly entry: ModelEntry;
  readonly path: string;
  readonly status: VerifyStatus;
  /** True for "ok" and "no-checksum" (nothing wrong found). */
  readonly ok: boolean;
  readonly bytes?: number;
  /** SHA-1 of the file, when it was read. */
  readonly sha1?: string;
  /** One line for the user. */
  readonly message: string;
}

/** Checks size and SHA-1 of `<dir>/<file>` against what upstream publishes. */
export async function verifyModel(entry: ModelEntry, dir: string): Promise<VerifyResult> {
  const file = modelPath(entry, dir);
  const base = { entry, path: file };
  const info = await stat(file).catch(() => undefined);
  if (!info?.isFile()) {
    const partialBytes = await sizeOf(partialPath(entry, dir));
    const resume =
      partialBytes !== undefined
        ? ` (an interrupted download of ${formatMiB(partialBytes)} is waiting: run \`relay models pull ${entry.name}\` to resume)`
        : ` (run \`relay models pull ${entry.name}\`)`;
    return { ...base, status: "missing", ok: false, message: `not pulled: no ${file}${resume}` };
  }
  const bytes = info.size;
  if (entry.bytes !== undefined && bytes !== entry.bytes) {
    const message = `size mismatch: ${file} is ${bytes} bytes, expected ${entry.bytes}`;
    return { ...base, status: "size-mismatch", ok: false, bytes, message };
  }
  if (outsidePublishedSize(entry, bytes)) {
    const message =
      `size mismatch: ${file} is ${formatMiB(bytes)}, upstream states ${formatPublishedSize(entry)} ` +
      `(truncated or another file; run \`relay models pull ${entry.name}\` to replace it)`;
    return { ...base, status: "size-mismatch", ok: false, bytes, message };
  }
  const sha1 = await fileDigest(file, "sha1");
  if (entry.sha1 === undefined) {
    const message = `no published checksum (${formatMiB(bytes)}, SHA-1 ${sha1})`;
    return { ...base, status: "no-checksum", ok: true, bytes, sha1, message };
  }
  if (sha1 !== entry.sha1.toLowerCase()) {
    const message =
      `checksum mismatch: expected SHA-1 ${entry.sha1}, got ${sha1} ` +
      `(run \`relay models pull ${entry.name}\` to replace it)`;
    return { ...base, status: "checksum-mismatch", ok: false, bytes, sha1, message };
  }
  return { ...base, status: "ok", ok: true, bytes, sha1, message: `ok (${formatMiB(bytes)}, SHA-1 ${sha1})` };
}

/**
 * The model file to load: a catalogue name → its file in `dir` (which must have been pulled), anything
 * else → a path to an existing file (relative to the working directory, or a bare file name in `dir`).
 */
export function resolveModel(nameOrPath: string, dir: string): string {
  const entry = findModel(nameOrPath);
  if (entry) {
    const file = modelPath(entry, dir);
    if (!existsSync(file)) {
      throw new ModelError(
        `model "${entry.name}" is not pulled (no ${file}): run \`relay models pull ${entry.name}\``,
      );
    }
    return file;
  }
  const candidates = [path.resolve(nameOrPath)];
  if (!nameOrPath.includes("/") && !nameOrPath.includes(path.sep))
    candidates.push(path.join(dir, nameOrPath));
  const found = candidates.find((file) => statSync(file, { throwIfNoEntry: false })?.isFile());
  if (found) return found;
  throw new ModelError(
    `unknown model "${nameOrPath}": not a catalogue name (see \`relay models list\`) nor an existing file`,
  );
}
