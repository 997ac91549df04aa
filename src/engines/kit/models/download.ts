import { createHash, type Hash } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdir, open, rename, rm, stat } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { plainText } from "./model-dir.js";
import { expectedSize, formatMiB, freeSpaceProblem, transferLimit, type PublishedSize } from "./sizes.js";

export { formatMiB, outsidePublishedSize } from "./sizes.js";

/**
 * Fetching catalogue models into the models directory, checking them, and finding them again.
 *
 * A download streams into `<file>.partial` and is renamed to `<file>` only once complete and (when
 * upstream publishes one) its SHA-1 matches, so `<file>` is never a truncated or wrong model. An
 * interrupted transfer leaves the `.partial` behind and the next attempt resumes it with a Range request.
 *
 * What a host sends is not trusted to be what it says (a mirror set by RELAY_MODELS_BASE_URL may be
 * hostile): each transfer stops, and its `.partial` is deleted, once it passes the file's size as
 * published (exact, or rounded or approximate plus a margin: `transferLimit`); the disk must have
 * room for the rest of it before it starts; and the transfer ends (its `.partial` kept, within that
 * bound, for a resume) at an overall deadline or when it stays below a minimum rate.
 */

/** What a download needs to know of a model: a catalogue entry, whisper's or sherpa-onnx's. */
export interface DownloadTarget extends PublishedSize {
  readonly name: string;
  /** The file's name on disk (in the models directory). */
  readonly file: string;
  /** Official download location. */
  readonly url: string;
  /** SHA-1 of the file as published upstream (lower-case hex). */
  readonly sha1?: string;
  /** SHA-256 the file must have (lower-case hex), when the source states one. */
  readonly sha256?: string;
}

/** A failure phrased for the user (the CLI prints the message as is). */
export class ModelError extends Error {
  override readonly name: string = "ModelError";
}

/** The source sent something other than the file (too much, a wrong checksum): nothing of it was kept. */
export class RefusedDownload extends ModelError {
  override readonly name = "RefusedDownload";
}

/** The service's default data directory, as src/config.ts computes it (`<project>/data`). */
const DEFAULT_DATA_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../..", "data");

/** `MODELS_DIR`, else `<DATA_DIR>/models` (DATA_DIR defaulting like the service's). */
export function modelsDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.MODELS_DIR) return path.resolve(env.MODELS_DIR);
  return path.resolve(env.DATA_DIR || DEFAULT_DATA_DIR, "models");
}

export function modelPath(entry: DownloadTarget, dir: string): string {
  return path.join(dir, entry.file);
}

export function partialPath(entry: DownloadTarget, dir: string): string {
  return `${modelPath(entry, dir)}.partial`;
}

/** The entry's official URL, or the same file name under `baseUrl` (a mirror, or a test server). */
export function modelUrl(entry: DownloadTarget, baseUrl?: string): string {
  if (!baseUrl) return entry.url;
  return `${baseUrl.replace(/\/+$/u, "")}/${entry.file}`;
}

export interface DownloadProgress {
  /** Bytes of the file so far, a resumed prefix included. */
  readonly received: number;
  /** Size of the whole file, when the server says. */
  readonly total: number | undefined;
  /** Bytes kept from an earlier attempt (0 when downloading from the start). */
  readonly resumedFrom: number;
}

export interface DownloadOptions {
  readonly onProgress?: (progress: DownloadProgress) => void;
  readonly fetchImpl?: typeof fetch;
  /** Replaces the official location (catalogue.ts OFFICIAL_BASE_URL): the file is fetched from `<baseUrl>/<file>`. */
  readonly baseUrl?: string;
  /** No response within this long and the host counts as unreachable (default 30 s). */
  readonly connectTimeoutMs?: number;
  /** No data for this long and the transfer counts as interrupted (default 60 s). */
  readonly idleTimeoutMs?: number;
  /** The whole download, connecting included, must end within this long (default 4 h). */
  readonly deadlineMs?: number;
  /** Slower than this over a whole `rateWindowMs` and the transfer counts as interrupted (default 32 KiB/s). */
  readonly minBytesPerSecond?: number;
  /** The window the minimum rate is measured over (default 60 s). */
  readonly rateWindowMs?: number;
  /** Bytes the pull needs on the same disk besides the file (an archive's unpacked tree), checked with it. */
  readonly extraSpace?: number;
  readonly signal?: AbortSignal;
}

export interface DownloadResult {
  readonly path: string;
  readonly bytes: number;
  /** SHA-1 of the file (lower-case hex). */
  readonly sha1: string;
  /** SHA-256 of the file (lower-case hex). */
  readonly sha256: string;
  /** False when upstream publishes no checksum for this model (nothing to compare with). */
  readonly checksumVerified: boolean;
  /** Bytes reused from an earlier interrupted attempt. */
  readonly resumedFrom: number;
}

export const DEFAULT_CONNECT_TIMEOUT_MS = 30_000;
const DEFAULT_IDLE_TIMEOUT_MS = 60_000;
/**
 * A download that takes longer than this is better resumed later: the largest catalogue model
 * (whisper large-v3-turbo, 1.5 GiB) needs 110 KiB/s to finish in time. A host dribbling bytes just
 * fast enough for the idle and rate checks cannot hold a pull (and its disk) for longer.
 */
export const DEFAULT_DEADLINE_MS = 4 * 60 * 60_000;
/**
 * Below this, over a whole window, a transfer counts as stalled: 32 KiB/s is a poor mobile link, and
 * a host sending a byte now and then (which the idle timeout alone would allow) is stopped within
 * one window.
 */
const DEFAULT_MIN_BYTES_PER_SECOND = 32 * 1024;
const DEFAULT_RATE_WINDOW_MS = 60_000;

/** What went wrong on the network, from fetch's error (undici hides the cause one level down). */
function networkReason(error: unknown): string {
  let cause: unknown = (error as { cause?: unknown } | undefined)?.cause ?? error;
  // Connecting to several addresses at once ends in an AggregateError of the individual failures.
  if (cause instanceof AggregateError && cause.errors.length > 0) cause = cause.errors[0];
  const { code, message } = (cause ?? {}) as { code?: unknown; message?: unknown };
  const reasons: Record<string, string> = {
    ENOTFOUND: "DNS lookup failed",
    EAI_AGAIN: "DNS lookup failed",
    ECONNREFUSED: "connection refused",
    ECONNRESET: "connection reset",
    ETIMEDOUT: "connection timed out",
    UND_ERR_CONNECT_TIMEOUT: "connection timed out",
    ENETUNREACH: "network unreachable",
    EHOSTUNREACH: "host unreachable",
    UND_ERR_SOCKET: "the connection was closed",
  };
  // The client's own words, but they may quote what the host sent (a header's value): plain text.
  if (typeof code === "string")
    return plainText(`${reasons[code] ?? String(message ?? "network error")} (${code})`);
  const outer = error instanceof Error ? error.message : String(error);
  return plainText(typeof message === "string" && message !== outer ? `${outer}: ${message}` : outer);
}

function byHand(entry: DownloadTarget, dir: string): string {
  return (
    `To install ${entry.name} by hand, download ${entry.url} on a connected machine and copy it to ` +
    `${modelPath(entry, dir)}, then run \`relay models verify ${entry.name}\``
  );
}

/** A Content-Range header: start and total of a 206, or the total alone of a 416. */
function parseContentRange(header: string | null): { start?: number; total?: number } {
  const match = /^bytes\s+(?:(\d+)-\d+|\*)\/(\d+|\*)$/iu.exec(header?.trim() ?? "");
  if (!match) return {};
  return {
    ...(match[1] !== undefined ? { start: Number(match[1]) } : {}),
    ...(match[2] !== "*" ? { total: Number(match[2]) } : {}),
  };
}

export async function sizeOf(file: string): Promise<number | undefined> {
  return (await stat(file).catch(() => undefined))?.size;
}

/** Feeds the first `bytes` bytes of `file` into `hash` (the kept prefix of a resumed download). */
async function hashPrefix(hashes: readonly Hash[], file: string, bytes: number): Promise<void> {
  if (bytes === 0) return;
  for await (const chunk of createReadStream(file, { end: bytes - 1 }))
    for (const hash of hashes) hash.update(chunk as Buffer);
}

/** The file's digest (lower-case hex): SHA-1 as whisper.cpp publishes them, SHA-256 for what relay records. */
export async function fileDigest(file: string, algorithm: "sha1" | "sha256"): Promise<string> {
  const hash = createHash(algorithm);
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

/**
 * Checks a pulled model (`name`, in `dir`) against the SHA-256 of its files recorded when it was
 * pulled (`files`: path in `dir` → digest; undefined when no record is there): their total size, or
 * why the model fails (not pulled, no record, a file changed or gone).
 */
export async function checkPulledFiles(
  name: string,
  dir: string,
  pulled: boolean,
  files: Readonly<Record<string, string>> | undefined,
): Promise<{ readonly ok: true; readonly bytes: number } | { readonly ok: false; readonly message: string }> {
  if (!pulled) return { ok: false, message: `not pulled (run \`relay models pull ${name}\`)` };
  if (!files) {
    return {
      ok: false,
      message: `no checksum record in ${dir} (run \`relay models pull ${name}\` to replace it)`,
    };
  }
  let bytes = 0;
  for (const [relative, expected] of Object.entries(files)) {
    const file = path.join(dir, relative);
    bytes += (await stat(file).catch(() => undefined))?.size ?? 0;
    if ((await fileDigest(file, "sha256").catch(() => "missing")) !== expected) {
      return {
        ok: false,
        message: `checksum mismatch: ${relative} has changed since it was pulled (run \`relay models pull ${name}\`)`,
      };
    }
  }
  return { ok: true, bytes };
}

/**
 * Downloads `entry` into `dir` (created if needed) and returns once `<dir>/<file>` is complete and
 * checked. Throws a {@link ModelError}; an interrupted transfer keeps `<file>.partial` for the next call.
 */
export async function downloadModel(
  entry: DownloadTarget,
  dir: string,
  options: DownloadOptions = {},
): Promise<DownloadResult> {
  const fetchImpl = options.fetchImpl ?? fetch;
  const url = modelUrl(entry, options.baseUrl);
  const host = new URL(url).host;
  const final = modelPath(entry, dir);
  const partial = partialPath(entry, dir);
  const limit = transferLimit(entry);
  const cancelled = () => new ModelError(`download of ${entry.file} cancelled`);
  const refused = async (said: string): Promise<never> => {
    await rm(partial, { force: true });
    throw new RefusedDownload(
      `download of ${entry.file} refused: ${host} ${said} the ${limit.bytes} bytes allowed (${limit.why}); ` +
        `the download was deleted (${url})`,
    );
  };
  await mkdir(dir, { recursive: true });
  // A .partial past the bound is no prefix of the file: start over rather than grow it.
  if (((await sizeOf(partial)) ?? 0) > limit.bytes) await rm(partial, { force: true });

  // One controller for the whole download: the deadline, the timeouts and a cancellation end it.
  const controller = new AbortController();
  let stopped: "connect" | "idle" | "slow" | "deadline" | undefined;
  const stop = (why: typeof stopped) => {
    stopped ??= why;
    controller.abort();
  };
  const onCancel = () => controller.abort(options.signal?.reason);
  options.signal?.addEventListener("abort", onCancel, { once: true });
  const deadlineMs = options.deadlineMs ?? DEFAULT_DEADLINE_MS;
  const idleTimeoutMs = options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
  const minRate = options.minBytesPerSecond ?? DEFAULT_MIN_BYTES_PER_SECOND;
  const rateWindowMs = options.rateWindowMs ?? DEFAULT_RATE_WINDOW_MS;
  const deadline = setTimeout(() => stop("deadline"), deadlineMs);
  let timer: NodeJS.Timeout | undefined;
  let rate: NodeJS.Timeout | undefined;
  const stoppedBecause = (error: unknown): string =>
    options.signal?.aborted
      ? "cancelled"
      : stopped === "deadline"
        ? `not done within ${deadlineMs / 1000} s`
        : stopped === "idle"
          ? `no data for ${idleTimeoutMs / 1000} s`
          : stopped === "slow"
            ? `slower than ${minRate / 1024} KiB/s for ${rateWindowMs / 1000} s`
            : networkReason(error);
  try {
    // At most two requests: a 206 for the wrong range or a 416 for a bad partial restarts from zero once.
    for (let attempt = 0; ; attempt++) {
      const kept = attempt === 0 ? ((await sizeOf(partial)) ?? 0) : 0;
      if (attempt > 0) await rm(partial, { force: true });
      const connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
      timer = setTimeout(() => stop("connect"), connectTimeoutMs);
      if (options.signal?.aborted) throw cancelled();
      let response: Response;
      try {
        response = await fetchImpl(url, {
          headers: { "accept-encoding": "identity", ...(kept > 0 ? { range: `bytes=${kept}-` } : {}) },
          signal: controller.signal,
        });
      } catch (error) {
        if (options.signal?.aborted) throw cancelled();
        const reason =
          stopped === "connect" ? `no response within ${connectTimeoutMs / 1000} s` : stoppedBecause(error);
        throw new ModelError(
          `cannot reach ${host}: ${reason}. Is this machine offline? ${byHand(entry, dir)}`,
        );
      }
      clearTimeout(timer);

      let offset = 0;
      let total: number | undefined;
      const length = Number(response.headers.get("content-length") ?? NaN);
      if (response.status === 206 && kept > 0) {
        const range = parseContentRange(response.headers.get("content-range"));
        if (range.start !== kept) {
          await response.body?.cancel();
          if (attempt > 0) throw new ModelError(`${host} answered the range request with the wrong range`);
          continue;
        }
        offset = kept;
        total = range.total ?? (Number.isFinite(length) ? kept + length : undefined);
      } else if (response.status === 416 && kept > 0) {
        // Nothing after byte `kept`: the partial may be the whole file, renamed-to-be.
        await response.body?.cancel();
        const { total: size } = parseContentRange(response.headers.get("content-range"));
        if (size !== kept) continue;
        offset = kept;
        total = kept;
      } else if (response.ok) {
        // A 200 to a range request: the server sends the whole file; start over.
        total = Number.isFinite(length) ? length : undefined;
      } else {
        await response.body?.cancel().catch(() => undefined);
        const hint = response.status === 404 ? " (no such file there)" : "";
        throw new ModelError(
          `download of ${entry.file} failed: HTTP ${response.status} ${plainText(response.statusText)}${hint} from ${url}`,
        );
      }
      // What the host says it will send is checked before a byte of it is written.
      if (total !== undefined && total > limit.bytes) {
        await response.body?.cancel().catch(() => undefined);
        await refused(`states ${total} bytes, more than`);
      }
      const needed =
        Math.max(0, Math.max(total ?? 0, expectedSize(entry) ?? 0) - offset) + (options.extraSpace ?? 0);
      const noRoom = await freeSpaceProblem(dir, needed, entry.file);
      if (noRoom) {
        await response.body?.cancel().catch(() => undefined);
        throw new ModelError(noRoom);
      }

      const hash = createHash("sha1");
      const hash256 = createHash("sha256");
      await hashPrefix([hash, hash256], partial, offset);
      let received = offset;
      let tooMuch = false;
      options.onProgress?.({ received, total, resumedFrom: offset });
      const armIdle = () => {
        clearTimeout(timer);
        timer = setTimeout(() => stop("idle"), idleTimeoutMs);
      };
      const file = await open(partial, offset > 0 ? "a" : "w");
      try {
        if (response.status !== 416 && response.body) {
          armIdle();
          let windowStart = received;
          rate = setInterval(() => {
            if (received - windowStart < (minRate * rateWindowMs) / 1000) stop("slow");
            windowStart = received;
          }, rateWindowMs);
          for await (const chunk of response.body) {
            armIdle();
            // Stopped while streaming, not after the transfer: nothing past the bound is written.
            if (received + chunk.length > limit.bytes) {
              tooMuch = true;
              break;
            }
            await file.write(chunk);
            hash.update(chunk);
            hash256.update(chunk);
            received += chunk.length;
            options.onProgress?.({ received, total, resumedFrom: offset });
          }
          clearTimeout(timer);
          clearInterval(rate);
        }
        await file.datasync();
      } catch (error) {
        throw new ModelError(
          `download of ${entry.file} interrupted at ${formatMiB(received)}` +
            `${total ? ` of ${formatMiB(total)}` : ""}: ${stoppedBecause(error)}; ` +
            `kept ${partial}: run the same pull again to resume`,
        );
      } finally {
        await file.close();
      }
      if (tooMuch) await refused("sent more than");

      if (total !== undefined && received !== total) {
        throw new ModelError(
          `download of ${entry.file} ended early at ${received} of ${total} bytes; ` +
            `kept ${partial}: run the same pull again to resume`,
        );
      }
      const sha1 = hash.digest("hex");
      const sha256 = hash256.digest("hex");
      const problem = mismatch(entry, received, sha1, sha256);
      if (problem) {
        await rm(partial, { force: true });
        throw new RefusedDownload(`${problem}; the download was deleted (${url})`);
      }
      await rename(partial, final);
      return {
        path: final,
        bytes: received,
        sha1,
        sha256,
        checksumVerified: entry.sha1 !== undefined || entry.sha256 !== undefined,
        resumedFrom: offset,
      };
    }
  } finally {
    clearTimeout(deadline);
    clearTimeout(timer);
    clearInterval(rate);
    options.signal?.removeEventListener("abort", onCancel);
  }
}

/** Why a complete file of `bytes` bytes with these digests is not `entry`, if it is not. */
function mismatch(entry: DownloadTarget, bytes: number, sha1: string, sha256: string): string | undefined {
  if (entry.bytes !== undefined && bytes !== entry.bytes) {
    return `size mismatch for ${entry.file}: expected ${entry.bytes} bytes, got ${bytes}`;
  }
  if (entry.sha1 !== undefined && sha1 !== entry.sha1.toLowerCase()) {
    return `checksum mismatch for ${entry.file}: expected SHA-1 ${entry.sha1}, got ${sha1}`;
  }
  if (entry.sha256 !== undefined && sha256 !== entry.sha256.toLowerCase()) {
    return `checksum mismatch for ${entry.file}: expected SHA-256 ${entry.sha256}, got ${sha256}`;
  }
  return undefined;
}
