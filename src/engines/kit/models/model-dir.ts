/**
 * A pulled model's directory as the service trusts it: the record `pull` leaves there (read and
 * written without following links), and the checks made before anything in it is loaded. A model
 * archive comes from a mirror or a release nobody signs, and a models directory may be shared:
 * nothing is read through a link that leads out of the models directory, and what is loaded must
 * be what `pull` recorded (its size, at least: hashing every file at each start would cost seconds).
 */
import {
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  openSync,
  readdirSync,
  readFileSync,
  realpathSync,
} from "node:fs";
import { rename, writeFile } from "node:fs/promises";
import path from "node:path";
import { z } from "zod";

/** The record's file name in a model's directory. */
export const MANIFEST = ".relay-model.json";

/**
 * The record every pull (and import) leaves in a model's directory, whatever the family: the files
 * as written, checked at every load and by `relay models check`. Each source extends it with where
 * the files came from (a Hugging Face repository: kit/models/hugging-face.ts; an archive:
 * sherpa-onnx/models.ts).
 */
export const modelRecord = z.object({
  name: z.string(),
  /** SHA-256 of each file, as pulled. */
  files: z.record(z.string(), z.string()),
  /** Size of each file, as pulled (checked at every load). */
  sizes: z.record(z.string(), z.number()).optional(),
  /** What the model's source or card states of its licence, when it does. */
  licence: z.string().optional(),
});

/** What every record holds besides its own fields: the size of each file loaded, by path in the directory. */
const recordedSizes = z.object({ sizes: z.record(z.string(), z.number().int().nonnegative()) });

/** Text from a model's files made safe to print: no control characters (terminal escapes), bounded. */
export function plainText(text: string, max = 200): string {
  return text
    .replace(/\p{Cc}|\p{Cf}/gu, " ")
    .replace(/\s+/gu, " ")
    .trim()
    .slice(0, max);
}

/** Something under `tree` (resolved) that leads out of `root` or is not a file or directory, if any. */
function treeProblem(tree: string, root: string): string | undefined {
  for (const entry of readdirSync(tree, { withFileTypes: true, recursive: true })) {
    const file = path.join(entry.parentPath, entry.name);
    // Names come from the archive: printed plain.
    const shown = plainText(path.relative(tree, file));
    if (entry.isSymbolicLink()) {
      let real: string;
      try {
        real = realpathSync(file);
      } catch {
        return `${shown} is a broken link`;
      }
      if (!inside(root, real)) return `${shown} is a link leading out of the models directory`;
    } else if (!entry.isFile() && !entry.isDirectory()) {
      return `${shown} is neither a regular file nor a directory`;
    }
  }
  return undefined;
}

/** Whether `file` (resolved) lies inside `dir` (resolved). */
function inside(dir: string, file: string): boolean {
  const relative = path.relative(dir, file);
  return relative === "" || (!relative.startsWith("..") && !path.isAbsolute(relative));
}

/**
 * The record in `dir` as `schema` reads it, if it is there, whole, and a regular file (never read
 * through a link).
 */
export function readRecord<T>(dir: string, schema: z.ZodType<T>): T | undefined {
  let fd: number;
  try {
    fd = openSync(path.join(dir, MANIFEST), constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch {
    return undefined;
  }
  try {
    if (!fstatSync(fd).isFile()) return undefined;
    return schema.parse(JSON.parse(readFileSync(fd, "utf8")));
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
}

/**
 * Writes the record into `dir`, a real directory: through a new file renamed into place, so a link
 * planted where the record goes is replaced, not written through.
 */
export async function writeRecord(dir: string, record: unknown): Promise<void> {
  if (!lstatSync(dir).isDirectory()) throw new Error(`${dir} is not a directory`);
  const temporary = path.join(dir, `${MANIFEST}.${process.pid}.tmp`);
  await writeFile(temporary, `${JSON.stringify(record, null, 2)}\n`, { flag: "wx" });
  await rename(temporary, path.join(dir, MANIFEST));
}

/**
 * What keeps the model in `dir` from being loaded, if anything: the directory, or a path that must
 * be loaded from it (`paths`, inside `dir`; a directory among them with everything beneath it), is
 * a link leading out of `modelsDir` or is neither a regular file nor a directory; or a file's size
 * differs from what `pull` recorded.
 */
export function loadProblem(dir: string, modelsDir: string, paths: readonly string[]): string | undefined {
  let root: string;
  try {
    root = realpathSync(modelsDir);
  } catch {
    return `the models directory ${modelsDir} cannot be read`;
  }
  const name = path.basename(dir);
  for (const file of [dir, ...paths]) {
    const shown = path.relative(modelsDir, file) || name;
    let real: string;
    try {
      real = realpathSync(file);
    } catch {
      return `${shown} is missing`;
    }
    if (!inside(root, real)) return `${shown} is a link leading out of the models directory (pull it again)`;
    const stats = lstatSync(real);
    if (!stats.isFile() && !stats.isDirectory()) return `${shown} is neither a regular file nor a directory`;
    if (stats.isDirectory() && file !== dir) {
      const beneath = treeProblem(real, root);
      if (beneath) return `${shown}/${beneath} (pull it again)`;
    }
  }
  // Older records have no sizes: only `verify`'s checksums then.
  const sizes = readRecord(dir, z.looseObject(recordedSizes.shape))?.sizes ?? {};
  for (const [relative, size] of Object.entries(sizes)) {
    const actual = lstatSync(path.join(dir, relative), { throwIfNoEntry: false });
    if (actual?.size !== size) {
      return `${name}/${relative} is ${actual ? `${actual.size} bytes` : "missing"}, not the ${size} bytes pulled (run \`relay models verify\`)`;
    }
  }
  return undefined;
}
