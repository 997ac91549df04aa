import { randomUUID } from "node:crypto";
import { createWriteStream } from "node:fs";
import { rm } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import type { Readable } from "node:stream";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { ObjectTooLargeError } from "./types.js";

/** Largest object either store accepts (presigned uploads are capped at this). */
export const MAX_OBJECT_BYTES = 500 * 1024 * 1024;

/** Longest presigned URL lifetime; S3 refuses SigV4 presigns past 7 days, so both stores share it. */
export const MAX_PRESIGN_SECONDS = 7 * 24 * 3600;

const MAX_KEY_LENGTH = 512;
const KEY_PATTERN = /^[A-Za-z0-9._/-]+$/u;

export class InvalidObjectKeyError extends Error {
  constructor(
    readonly key: string,
    reason: string,
  ) {
    super(`invalid object key ${JSON.stringify(key)}: ${reason}`);
  }
}

/** The client went away (or the source failed) before the whole body arrived. */
export class IncompleteTransferError extends Error {
  constructor() {
    super("the transfer ended before the whole body arrived");
  }
}

/**
 * Why a key is unusable, or undefined when it is fine. Keys are "/"-separated relative paths of
 * [A-Za-z0-9._-] segments; a segment may not start with "." (which also rules out "." and "..") so
 * keys can never escape the store's directory nor collide with its dot-named temp and metadata files.
 */
export function objectKeyProblem(key: string): string | undefined {
  if (key.length === 0) return "it is empty";
  if (key.length > MAX_KEY_LENGTH) return `it is longer than ${MAX_KEY_LENGTH} characters`;
  if (!KEY_PATTERN.test(key)) return "only A-Z, a-z, 0-9, '.', '_', '-' and '/' are allowed";
  if (key.startsWith("/")) return "it must be relative (no leading '/')";
  for (const segment of key.split("/")) {
    if (segment.length === 0) return "it has an empty path segment";
    if (segment.startsWith(".")) return "a path segment starts with '.'";
  }
  return undefined;
}

export function assertValidObjectKey(key: string): void {
  const problem = objectKeyProblem(key);
  if (problem !== undefined) throw new InvalidObjectKeyError(key, problem);
}

/** Media type with optional parameters; no control characters (it ends up in headers and signatures). */
const CONTENT_TYPE_PATTERN = /^[A-Za-z0-9!#$&^_.+-]+\/[A-Za-z0-9!#$&^_.+-]+(\s*;\s*[\x20-\x7e]*)?$/u;

// eslint-disable-next-line no-control-regex -- exactly what it is for
const CONTROL_CHARACTER = /[\x00-\x1f\x7f]/u;

export function assertPresignOptions(options: {
  contentType?: string;
  maxBytes?: number;
  expiresInSec: number;
  downloadName?: string;
}): void {
  const { contentType, maxBytes, expiresInSec, downloadName } = options;
  if (!Number.isInteger(expiresInSec) || expiresInSec < 1 || expiresInSec > MAX_PRESIGN_SECONDS) {
    throw new RangeError(`expiresInSec must be an integer from 1 to ${MAX_PRESIGN_SECONDS}`);
  }
  if (contentType !== undefined && (contentType.length > 200 || !CONTENT_TYPE_PATTERN.test(contentType))) {
    throw new RangeError(`invalid content type ${JSON.stringify(contentType)}`);
  }
  if (
    maxBytes !== undefined &&
    (!Number.isSafeInteger(maxBytes) || maxBytes < 0 || maxBytes > MAX_OBJECT_BYTES)
  ) {
    throw new RangeError(`maxBytes must be an integer from 0 to ${MAX_OBJECT_BYTES}`);
  }
  if (
    downloadName !== undefined &&
    (downloadName.length === 0 || downloadName.length > 255 || CONTROL_CHARACTER.test(downloadName))
  ) {
    throw new RangeError("downloadName must be 1-255 characters without control characters");
  }
}

/** A fresh dot-named sibling of `path` (same directory, so a rename onto `path` is atomic). */
export function tempPathFor(path: string): string {
  return join(dirname(path), `.${basename(path)}.${randomUUID()}.tmp`);
}

/**
 * Streams `source` into a new file at `tmpPath`, failing with ObjectTooLargeError as soon as more
 * than `maxBytes` arrived and with IncompleteTransferError when the source closes before its end.
 * On failure the file is removed and `source` is unpiped and paused but NOT destroyed: the caller
 * decides between aborting it (a download) and draining it so the client can read a 413 (an upload).
 */
export async function streamToNewFile(source: Readable, tmpPath: string, maxBytes: number): Promise<number> {
  // A source that already ended or died would never emit the events awaited below.
  if (source.readableEnded || source.destroyed) throw new IncompleteTransferError();
  let bytes = 0;
  let ended = false;
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      bytes += chunk.length;
      if (bytes > maxBytes) callback(new ObjectTooLargeError(maxBytes));
      else callback(null, chunk);
    },
  });
  const onEnd = () => {
    ended = true;
  };
  const onError = (error: Error) => counter.destroy(error);
  const onClose = () => {
    if (!ended) counter.destroy(new IncompleteTransferError());
  };
  source.once("end", onEnd);
  source.on("error", onError);
  source.once("close", onClose);
  // flush: fsync before close, so a crash right after the caller's rename cannot leave a truncated object.
  const out = createWriteStream(tmpPath, { flags: "wx", mode: 0o600, flush: true });
  const written = pipeline(counter, out);
  source.pipe(counter);
  try {
    await written;
    return bytes;
  } catch (error) {
    source.unpipe(counter);
    if (!source.destroyed) source.pause();
    await rm(tmpPath, { force: true });
    throw error;
  } finally {
    source.off("end", onEnd);
    source.off("error", onError);
    source.off("close", onClose);
  }
}

/** Value for `Content-Disposition: attachment` with an ASCII fallback and the exact UTF-8 name (RFC 6266). */
export function attachmentDisposition(name: string): string {
  const fallback = name.replace(/[^\x20-\x7e]|["\\%]/gu, "_");
  const encoded = encodeURIComponent(name).replace(
    /['()*]/gu,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
  return `attachment; filename="${fallback}"; filename*=UTF-8''${encoded}`;
}
