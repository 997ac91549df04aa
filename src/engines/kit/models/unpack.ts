/**
 * Unpacking model archives (`.tar.bz2`) in this process, for sherpa-pull.ts, and checking unpacked
 * trees before they are moved into place or loaded.
 *
 * Why every entry is checked here rather than handed to `tar -xjf`: the archive is attacker-controlled
 * in principle. Models can be pulled from a mirror, and upstream publishes no checksums for these
 * archives, so nothing vouches for their bytes before they are unpacked; `tar` would follow and create
 * symlinks and hard links, make devices and FIFOs, keep setuid bits and (as root) owners, and it needs
 * an external `bzip2` besides. Here bzip2 is decoded in JavaScript (unbzip2-stream's decoder, driven
 * block by block below so that output is only produced as fast as it is consumed) and the tar stream
 * is parsed by node-tar's `Parser` in strict mode (a bad header checksum or a truncated archive is an
 * error), but only parsed: which entries are written, where, how large and with what mode is decided
 * below. Only regular files and directories are ever created, each new (O_EXCL, O_NOFOLLOW), under a
 * fresh empty directory; files get 0o644 (0o755 when the archive gave any execute bit), directories
 * 0o755, never an owner, setuid, setgid or sticky bit from the archive. The archive is streamed: about
 * 3 MB of compressed input and one bzip2 block's output (≤ 46.6 MB) are held in memory at a time.
 *
 * Speed: the JavaScript decoder manages about 3 MB/s on model weights (a 300 MB archive takes about
 * 100 s), native `bzip2` about three times that. Where a `bzip2` program is on PATH it decompresses
 * (`bzip2 -dc`, its output read as it comes, the program ended once a bound is passed); the tar
 * stream it produces goes through exactly the same checks, so safety does not depend on which
 * decoded it. Without one (slim images), the JavaScript decoder does.
 */
import { constants, type Stats } from "node:fs";
import { chmod, lstat, mkdir, open, readdir, rm } from "node:fs/promises";
import path from "node:path";
import { Parser, type ReadEntry } from "tar";
import { CorruptBzip2, decompressed } from "./bzip2.js";

/** The archive (or an unpacked tree) holds something this module will not write or load. */
export class UnsafeArchiveError extends Error {
  override readonly name = "UnsafeArchiveError";
}

export interface UnpackOptions {
  /** Total size of the regular files, in bytes (default 4 GiB). */
  readonly maxBytes?: number;
  /** Entries in the archive, and files and directories created (default 10,000). */
  readonly maxEntries?: number;
  readonly signal?: AbortSignal;
}

export interface UnpackResult {
  /** Regular files written. */
  readonly files: number;
  /** Their total size. */
  readonly bytes: number;
}

const DEFAULT_MAX_ENTRIES = 10_000;
const DEFAULT_MAX_BYTES = 4 * 1024 ** 3;
/**
 * Tar data beyond the files' own bytes that an archive may decompress to: headers, padding and pax
 * or GNU long-name records, allowed generously per entry, plus the end-of-archive record. Bounds the
 * work a stream of metadata-only records (which write nothing) can cause.
 */
const TAR_OVERHEAD_PER_ENTRY = 16 * 1024;
const TAR_OVERHEAD = 1024 * 1024;
/**
 * Data after the end-of-archive record that is still decoded, so that every bzip2 block's checksum
 * and the program's exit status are checked (stopping at the record would let a damaged last block
 * pass: `bzip2` hands a block's output on before it checks the block). tar pads to its record size,
 * 10 KiB by default; 16 MiB is far beyond any blocking factor in use and keeps a crafted tail cheap.
 */
const TAR_TRAILER = 16 * 1024 * 1024;

const FILE_TYPES = new Set(["File", "OldFile", "ContiguousFile"]);
const REFUSED_TYPES: Record<string, string> = {
  SymbolicLink: "a symbolic link",
  Link: "a hard link",
  CharacterDevice: "a character device",
  BlockDevice: "a block device",
  FIFO: "a FIFO",
  GNUDumpDir: "a GNU dump directory",
};

/**
 * An entry's name as printed in messages: quoted, escaped (JSON leaves C1 controls such as U+009B,
 * a terminal's CSI, and format characters as they are: escaped too), and cut when very long.
 */
function quoted(name: string): string {
  // Each UTF-16 unit, as JSON writes what it escapes (a format character may be astral).
  const escape = (char: string): string => {
    let units = "";
    for (let at = 0; at < char.length; at++)
      units += `\\u${char.charCodeAt(at).toString(16).padStart(4, "0")}`;
    return units;
  };
  const text = JSON.stringify(name).replace(/[\p{Cc}\p{Cf}]/gu, escape);
  return text.length > 200 ? `${text.slice(0, 200)}…"` : text;
}

/**
 * Unpacks `archive` (tar compressed with bzip2) into `into`, which must be an existing, empty, real
 * directory. Refuses (UnsafeArchiveError, naming the entry) anything but regular files and
 * directories, absolute paths, `..` components, a file where a directory is (or the reverse, or a file
 * twice), and archives beyond `maxEntries` or `maxBytes`; other errors mean the archive is damaged or
 * not a tar.bz2. On any failure `into` is left empty.
 */
export async function unpackTarBz2(
  archive: string,
  into: string,
  options: UnpackOptions = {},
): Promise<UnpackResult> {
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
  const maxEntries = options.maxEntries ?? DEFAULT_MAX_ENTRIES;
  if (
    !(Number.isSafeInteger(maxBytes) && maxBytes >= 0) ||
    !(Number.isSafeInteger(maxEntries) && maxEntries >= 1)
  )
    throw new RangeError("maxBytes and maxEntries must be non-negative integers (maxEntries at least 1)");
  options.signal?.throwIfAborted();
  const root = path.resolve(into);
  const stats = await lstat(root);
  if (!stats.isDirectory()) throw new Error(`${into} is not a directory (unpacking needs a fresh empty one)`);
  if ((await readdir(root)).length > 0)
    throw new Error(`${into} is not empty (unpacking needs a fresh empty directory)`);
  try {
    return await new Unpacker(archive, root, maxBytes, maxEntries, options.signal).run();
  } catch (error) {
    // Everything under `into` is ours (it was empty): leave nothing half-unpacked.
    for (const name of await readdir(root).catch(() => []))
      await rm(path.join(root, name), { recursive: true, force: true });
    throw error;
  }
}

class Unpacker {
  /** What this unpacking created, by relative path ("a/b"). */
  private readonly created = new Map<string, "file" | "dir">();
  private entries = 0;
  private files = 0;
  private bytes = 0;
  private failure: { error: unknown } | undefined;
  /** Wakes the pump when it waits for the parser and something failed. */
  private wake: (() => void) | undefined;
  /** The entry being written, to end it when unpacking fails. */
  private current: ReadEntry | undefined;
  private readonly label: string;

  constructor(
    private readonly archive: string,
    private readonly root: string,
    private readonly maxBytes: number,
    private readonly maxEntries: number,
    private readonly signal: AbortSignal | undefined,
  ) {
    this.label = path.basename(archive);
  }

  private fail(error: unknown): void {
    this.failure ??= { error };
    this.current?.destroy();
    this.wake?.();
  }

  private refuse(entry: string, why: string): never {
    throw new UnsafeArchiveError(
      `${this.label}: entry ${quoted(entry)} ${why}; the archive was not unpacked`,
    );
  }

  async run(): Promise<UnpackResult> {
    const parser = new Parser({ strict: true });
    let sawEnd = false;
    let queue = Promise.resolve();
    parser.on("entry", (entry: ReadEntry) => {
      queue = queue.then(async () => {
        if (this.failure) return void entry.resume();
        try {
          this.current = entry;
          await this.place(entry);
        } catch (error) {
          this.fail(error);
          entry.resume();
        } finally {
          this.current = undefined;
        }
      });
    });
    // Unknown or vendor types (sparse files, volume headers…) and pax records over node-tar's 1 MiB.
    parser.on("ignoredEntry", (entry: ReadEntry) => {
      const why = entry.meta
        ? `is a ${entry.type} record over ${parser.maxMetaEntrySize} bytes`
        : `has an unsupported type (${entry.type})`;
      this.fail(
        new UnsafeArchiveError(
          `${this.label}: entry ${quoted(entry.path)} ${why}; the archive was not unpacked`,
        ),
      );
    });
    parser.on("error", (error: Error) =>
      this.fail(new Error(`${this.label} is not a valid tar archive (${error.message})`)),
    );
    parser.on("eof", () => (sawEnd = true));

    const maxTarBytes = this.maxBytes + this.maxEntries * TAR_OVERHEAD_PER_ENTRY + TAR_OVERHEAD;
    let tarBytes = 0;
    let trailer = 0;
    try {
      try {
        for await (const chunk of decompressed(this.archive, this.signal)) {
          this.signal?.throwIfAborted();
          // Past the end-of-archive record: decoded to the end (checksums), never parsed.
          if (sawEnd) {
            trailer += chunk.length;
            if (trailer > TAR_TRAILER)
              throw new UnsafeArchiveError(
                `${this.label} holds more than ${TAR_TRAILER} bytes after the end of its tar archive; the archive was not unpacked`,
              );
            continue;
          }
          if (tarBytes === 0 && isCompressed(chunk))
            throw new Error(`${this.label} holds compressed data inside its bzip2, not a tar archive`);
          tarBytes += chunk.length;
          if (tarBytes > maxTarBytes)
            throw new UnsafeArchiveError(
              `${this.label} decompresses to more than ${maxTarBytes} bytes of tar data; the archive was not unpacked`,
            );
          if (!parser.write(chunk)) await this.drained(parser);
          if (this.failure) throw this.failure.error;
        }
      } catch (error) {
        if (this.failure) throw this.failure.error;
        if (error instanceof CorruptBzip2)
          throw new Error(`${this.label} is not a valid bzip2 archive (${error.message})`, {
            cause: error,
          });
        throw error;
      }
      if (tarBytes === 0) throw new Error(`${this.label} is empty`);
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        parser.once("end", resolve);
        if (this.failure) resolve();
        else parser.end();
      });
      await queue;
      this.signal?.throwIfAborted();
      if (this.failure) throw this.failure.error;
      return { files: this.files, bytes: this.bytes };
    } catch (error) {
      this.fail(error);
      await queue;
      throw error;
    }
  }

  /** Until the parser takes more data, or unpacking failed. */
  private async drained(parser: Parser): Promise<void> {
    if (this.failure) return;
    let resolve: () => void = () => undefined;
    const drained = new Promise<void>((done) => (resolve = done));
    this.wake = resolve;
    parser.once("drain", resolve);
    try {
      await drained;
    } finally {
      parser.off("drain", resolve);
      this.wake = undefined;
    }
  }

  private async place(entry: ReadEntry): Promise<void> {
    this.signal?.throwIfAborted();
    if (++this.entries > this.maxEntries)
      throw new UnsafeArchiveError(
        `${this.label} has more than ${this.maxEntries} entries (at ${quoted(entry.path)}); the archive was not unpacked`,
      );
    const refused = REFUSED_TYPES[entry.type];
    if (refused) {
      const target = entry.linkpath === undefined ? "" : ` (to ${quoted(entry.linkpath)})`;
      this.refuse(entry.path, `is ${refused}${target}: only regular files and directories are unpacked`);
    }
    const parts = this.components(entry.path);
    if (entry.type === "Directory") {
      if (entry.size > 0) this.refuse(entry.path, "is a directory with data");
      await this.directory(entry.path, parts);
      entry.resume();
    } else if (FILE_TYPES.has(entry.type)) {
      await this.file(entry, parts);
    } else {
      this.refuse(entry.path, `has an unsupported type (${entry.type})`);
    }
  }

  /** The entry's path as components under the root, refusing any way out of it. */
  private components(name: string): string[] {
    if (name.includes("\0")) this.refuse(name, "has a NUL byte in its path");
    if (name.includes("\\")) this.refuse(name, "has a backslash in its path");
    if (name.startsWith("/") || /^[A-Za-z]:/u.test(name)) this.refuse(name, "has an absolute path");
    const parts = name.split("/").filter((part) => part !== "" && part !== ".");
    if (parts.includes("..")) this.refuse(name, "has a '..' component in its path");
    const target = path.resolve(this.root, ...parts);
    if (target !== this.root && !target.startsWith(this.root + path.sep))
      this.refuse(name, "resolves outside the target directory");
    return parts;
  }

  private count(name: string): void {
    if (this.created.size >= this.maxEntries)
      throw new UnsafeArchiveError(
        `${this.label} creates more than ${this.maxEntries} files and directories (at ${quoted(name)}); the archive was not unpacked`,
      );
  }

  /** Creates the directory `parts` and any missing parent, each 0o755. */
  private async directory(name: string, parts: string[]): Promise<void> {
    for (let depth = 1; depth <= parts.length; depth++) {
      const relative = parts.slice(0, depth).join("/");
      const kind = this.created.get(relative);
      if (kind === "dir") continue;
      if (kind === "file")
        this.refuse(name, `needs ${quoted(relative)} to be a directory, but the archive made it a file`);
      this.count(name);
      const dir = path.join(this.root, ...parts.slice(0, depth));
      await mkdir(dir, { mode: 0o755 });
      this.created.set(relative, "dir");
      await chmod(dir, 0o755); // whatever the umask, and no setgid inherited from a parent
    }
  }

  private async file(entry: ReadEntry, parts: string[]): Promise<void> {
    const name = entry.path;
    if (parts.length === 0) this.refuse(name, "is a file in place of the target directory itself");
    await this.directory(name, parts.slice(0, -1));
    const relative = parts.join("/");
    const kind = this.created.get(relative);
    if (kind === "dir") this.refuse(name, "is a file where the archive already made a directory");
    if (kind === "file") this.refuse(name, "appears twice");
    if (this.bytes + entry.size > this.maxBytes)
      throw new UnsafeArchiveError(
        `${this.label} unpacks to more than ${this.maxBytes} bytes (at ${quoted(name)}, ${entry.size} bytes); the archive was not unpacked`,
      );
    this.count(name);
    this.created.set(relative, "file");
    const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
    const handle = await open(path.join(this.root, ...parts), flags, 0o600);
    let written = 0;
    try {
      for await (const chunk of entry as AsyncIterable<Buffer>) {
        if (this.failure) return;
        if (this.bytes + written + chunk.length > this.maxBytes)
          throw new UnsafeArchiveError(
            `${this.label} unpacks to more than ${this.maxBytes} bytes (at ${quoted(name)}); the archive was not unpacked`,
          );
        for (let offset = 0; offset < chunk.length;) {
          const { bytesWritten } = await handle.write(chunk, offset, chunk.length - offset, written);
          offset += bytesWritten;
          written += bytesWritten;
        }
      }
      if (this.failure) return;
      if (written !== entry.size) throw new Error(`${this.label}: entry ${quoted(name)} is truncated`);
      // 0o644, or 0o755 for an executable; never the archive's setuid, setgid or sticky bits.
      await handle.chmod((entry.mode ?? 0) & 0o111 ? 0o755 : 0o644);
    } finally {
      await handle.close();
    }
    this.files++;
    this.bytes += written;
  }
}

/** Gzip or zstd magic, which node-tar's parser would otherwise quietly decompress. */
function isCompressed(chunk: Buffer): boolean {
  return (
    (chunk[0] === 0x1f && chunk[1] === 0x8b) ||
    (chunk[0] === 0x28 && chunk[1] === 0xb5 && chunk[2] === 0x2f && chunk[3] === 0xfd)
  );
}

const S_ISUID = 0o4000;
const S_ISGID = 0o2000;

function kindOf(stats: Stats): string {
  if (stats.isSymbolicLink()) return "a symbolic link";
  if (stats.isCharacterDevice()) return "a character device";
  if (stats.isBlockDevice()) return "a block device";
  if (stats.isFIFO()) return "a FIFO";
  if (stats.isSocket()) return "a socket";
  return "neither a regular file nor a directory";
}

/**
 * Walks `root` without following links and throws UnsafeArchiveError at the first thing that is not
 * a regular file or directory, has a setuid or setgid bit, is owned by another user than this
 * process's (so, as root, by anyone but root), or is a regular file with other hard links. For an
 * unpacked tree before it is moved into place, and for a model directory before it is loaded.
 */
export async function checkTree(root: string): Promise<void> {
  const uid = process.getuid?.();
  const check = (file: string, stats: Stats): void => {
    if (!stats.isFile() && !stats.isDirectory())
      throw new UnsafeArchiveError(
        `${file} is ${kindOf(stats)}: only regular files and directories are allowed`,
      );
    if (stats.mode & (S_ISUID | S_ISGID))
      throw new UnsafeArchiveError(
        `${file} has a set${stats.mode & S_ISUID ? "uid" : "gid"} bit (mode ${(stats.mode & 0o7777).toString(8)})`,
      );
    if (uid !== undefined && stats.uid !== uid)
      throw new UnsafeArchiveError(`${file} is owned by uid ${stats.uid}, not by this process's uid ${uid}`);
    if (stats.isFile() && stats.nlink > 1)
      throw new UnsafeArchiveError(`${file} has ${stats.nlink} hard links (only one is allowed)`);
  };
  check(root, await lstat(root));
  const pending = [root];
  for (let dir = pending.pop(); dir !== undefined; dir = pending.pop()) {
    for (const name of await readdir(dir)) {
      const file = path.join(dir, name);
      const stats = await lstat(file);
      check(file, stats);
      if (stats.isDirectory()) pending.push(file);
    }
  }
}
