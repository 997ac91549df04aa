import { mkdir, mkdtemp, rm } from "node:fs/promises";
import path from "node:path";
import { isLocalObjectStore } from "../storage/local.js";
import { ObjectNotFoundError, ObjectTooLargeError, type ObjectStore } from "../storage/types.js";
import { UnsupportedFormatError } from "./errors.js";
import { probe } from "./ffmpeg.js";

/**
 * The duration of an uploaded source, read when its job is created so that its price is known
 * before anything runs. The embedded store's object is probed where it lies (objects are plain
 * files at `<dir>/<key>`); an S3 object is copied to a temporary folder under `tempDir` first.
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
    if (isLocalObjectStore(store)) {
      file = path.join(store.dir, objectKey);
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
