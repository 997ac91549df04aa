import { mkdir, mkdtemp, rm } from "node:fs/promises";
import path from "node:path";
import { ObjectNotFoundError, ObjectTooLargeError, type ObjectStore } from "../../storage/types.js";
import { MediaToolError, UnsupportedFormatError } from "../media/errors.js";
import { ACCEPTED_DEMUXERS, probe, runFfprobe } from "../media/ffmpeg.js";
import { withGuardedMirror } from "../media/source.js";

/** What ffprobe may read of a URL source at creation: enough for the headers of any container. */
export const URL_PROBE_MAX_BYTES = 16 * 1024 * 1024;

/**
 * The duration of an uploaded source, read when its job is created so that its price is known
 * before anything runs. The embedded store's object is probed where it lies (`filePath`); an S3
 * object is copied to a temporary folder under `tempDir` first.
 * Undefined when the object cannot be read as media (never uploaded, too large, not media): the
 * job is then created as usual and its worker fails it with the spec's code.
 */
export async function uploadDurationSec(
  store: ObjectStore,
  objectKey: string,
  options: { readonly maxBytes: number; readonly tempDir: string },
): Promise<number | undefined> {
  let copyDir: string | undefined;
  try {
    let file: string;
    if (store.filePath) {
      file = store.filePath(objectKey);
    } else {
      await mkdir(options.tempDir, { recursive: true });
      copyDir = await mkdtemp(path.join(options.tempDir, "probe-"));
      file = path.join(copyDir, "source");
      await store.getToFile(objectKey, file, options.maxBytes);
    }
    return (await probe(file)).durationSec;
  } catch (error) {
    if (
      error instanceof ObjectNotFoundError ||
      error instanceof ObjectTooLargeError ||
      error instanceof UnsupportedFormatError ||
      (error as { code?: unknown }).code === "ENOENT"
    ) {
      return undefined;
    }
    throw error;
  } finally {
    if (copyDir) await rm(copyDir, { recursive: true, force: true });
  }
}

/**
 * The duration of a public URL source, read when its job is created: ffprobe reads the container's
 * headers over HTTP range requests from a loopback mirror that fetches through the guarded client
 * (`withGuardedMirror`: ffprobe never connects anywhere else), at most `URL_PROBE_MAX_BYTES` and
 * `timeoutMs` in all. Only plain media demuxers are allowed, so no playlist can name further URLs.
 * Undefined when it cannot be learned in time (refused address, HTTP error, not media, the moov
 * atom at the end of a large file on a server without ranges, a slow server, …).
 */
export async function urlDurationSec(
  url: string,
  options: { readonly allowPrivate: boolean; readonly timeoutMs: number },
): Promise<number | undefined> {
  const signal = AbortSignal.timeout(options.timeoutMs);
  try {
    return await withGuardedMirror(
      url,
      {
        maxBytes: URL_PROBE_MAX_BYTES,
        allowPrivate: options.allowPrivate,
        timeoutMs: options.timeoutMs,
        signal,
      },
      async (localUrl) => {
        const { stdout } = await runFfprobe(
          [
            "-v",
            "error",
            "-protocol_whitelist",
            "http,tcp",
            "-format_whitelist",
            [...ACCEPTED_DEMUXERS].join(","),
            "-print_format",
            "json",
            "-show_entries",
            "format=duration",
            localUrl,
          ],
          { timeoutMs: options.timeoutMs, signal },
        );
        const parsed = JSON.parse(stdout.toString("utf8")) as { format?: { duration?: string } };
        const durationSec = Number(parsed.format?.duration);
        return Number.isFinite(durationSec) && durationSec > 0 ? durationSec : undefined;
      },
    );
  } catch (error) {
    if (error instanceof MediaToolError || error instanceof SyntaxError || signal.aborted) return undefined;
    throw error;
  }
}
