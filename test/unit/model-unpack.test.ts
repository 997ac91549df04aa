import { execFileSync, spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import {
  chmod,
  chown,
  link,
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rm,
  stat,
  symlink,
  writeFile,
} from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { checkTree, unpackTarBz2, UnsafeArchiveError } from "../../src/engines/kit/models/unpack.js";
import { findOnPath } from "../../src/os/programs.js";
import { PROJECT_ROOT } from "../support/run-script.js";

/**
 * src/engines/kit/models/unpack.ts against archives built here, byte by byte (a tar writer of a few lines, so a
 * hostile archive can hold exactly what an attacker would put in it), compressed by python3's bz2.
 * Every refusal also checks that nothing was written outside the target directory (a sentinel
 * directory beside it, and the target of each escape attempt) and that the target is left empty.
 * A setuid/setgid bit is not refused: the file unpacks without it (as with the sticky bit).
 */

interface TarEntry {
  readonly name: string;
  /** The typeflag: "0" file (default), "5" directory, "2" symlink, "1" hard link, "3", "4", "6", "L", "x"… */
  readonly type?: string;
  readonly mode?: number;
  readonly data?: Buffer | string;
  readonly linkname?: string;
  readonly uid?: number;
  /** A size to declare other than the data's. */
  readonly size?: number;
}

function octal(header: Buffer, value: number, offset: number, length: number): void {
  header.write(`${value.toString(8).padStart(length - 1, "0")}\0`, offset, length, "latin1");
}

/** A ustar header block (name ≤ 100 bytes, else a GNU long name or pax record before it). */
function header(entry: TarEntry, size: number): Buffer {
  const block = Buffer.alloc(512);
  block.write(entry.name.slice(0, 100), 0, 100, "utf8");
  octal(block, entry.mode ?? (entry.type === "5" ? 0o755 : 0o644), 100, 8);
  octal(block, entry.uid ?? 1000, 108, 8);
  octal(block, entry.uid ?? 1000, 116, 8);
  octal(block, size, 124, 12);
  octal(block, 1_700_000_000, 136, 12);
  block.write(entry.type ?? "0", 156, 1, "latin1");
  if (entry.linkname) block.write(entry.linkname, 157, 100, "utf8");
  block.write("ustar\0", 257, 6, "latin1");
  block.write("00", 263, 2, "latin1");
  block.write("someone", 265, 32, "latin1");
  block.write("users", 297, 32, "latin1");
  if (entry.type === "3" || entry.type === "4") {
    octal(block, 1, 329, 8);
    octal(block, 3, 337, 8);
  }
  block.fill(" ", 148, 156);
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(`${sum.toString(8).padStart(6, "0")}\0 `, 148, 8, "latin1");
  return block;
}

function tar(entries: readonly TarEntry[]): Buffer {
  const blocks: Buffer[] = [];
  for (const entry of entries) {
    const data = Buffer.from(entry.data ?? "");
    blocks.push(
      header(entry, entry.size ?? data.length),
      data,
      Buffer.alloc((512 - (data.length % 512)) % 512),
    );
  }
  blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}

/** A GNU long-name record: the next entry's path is `name`. */
function gnuLongName(name: string): TarEntry {
  return { name: "././@LongLink", type: "L", data: `${name}\0` };
}

/** A pax extended header for the next entry. */
function pax(records: Record<string, string>): TarEntry {
  let data = "";
  for (const [key, value] of Object.entries(records)) {
    const body = ` ${key}=${value}\n`;
    let length = body.length;
    while (`${length}${body}`.length !== length) length = `${length}${body}`.length;
    data += `${length}${body}`;
  }
  return { name: "PaxHeader/entry", type: "x", data };
}

function bzip2(data: Buffer): Buffer {
  return execFileSync(
    "python3",
    ["-c", "import bz2, sys; sys.stdout.buffer.write(bz2.compress(sys.stdin.buffer.read(), 9))"],
    { input: data, maxBuffer: 256 * 1024 * 1024 },
  );
}

let tmp: string;
let outside: string;
let archives = 0;

async function archiveOf(data: Buffer): Promise<string> {
  const file = path.join(tmp, "archives", `archive-${++archives}.tar.bz2`);
  await writeFile(file, data);
  return file;
}

/** A fresh empty target directory, alone in a directory of its own. */
async function freshTarget(): Promise<string> {
  const into = path.join(await mkdtemp(path.join(tmp, "case-")), "into");
  await mkdir(into);
  return into;
}

/** A directory with no program in it, for PATH. */
async function emptyBin(): Promise<string> {
  const bin = path.join(tmp, "bin-empty");
  await mkdir(bin, { recursive: true });
  return bin;
}

const SENTINEL = "untouched\n";

async function expectNothingOutside(into: string): Promise<void> {
  expect(await readdir(into)).toEqual([]);
  expect(await readdir(path.dirname(into))).toEqual(["into"]);
  expect(await readdir(outside)).toEqual(["sentinel"]);
  expect(await readFile(path.join(outside, "sentinel"), "utf8")).toBe(SENTINEL);
  expect((await lstat(path.join(outside, "sentinel"))).nlink).toBe(1);
}

/** Unpacks `entries` and expects an UnsafeArchiveError matching `message`, and nothing written. */
async function expectRefused(
  entries: readonly TarEntry[],
  message: RegExp,
  options: { maxBytes?: number; maxEntries?: number } = {},
): Promise<void> {
  const into = await freshTarget();
  const archive = await archiveOf(bzip2(tar(entries)));
  const error: unknown = await unpackTarBz2(archive, into, options).then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(UnsafeArchiveError);
  expect((error as Error).message).toMatch(message);
  expect((error as Error).message).toContain(path.basename(archive));
  await expectNothingOutside(into);
}

beforeAll(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), "relay-unpack-"));
  await mkdir(path.join(tmp, "archives"));
  outside = path.join(tmp, "outside");
  await mkdir(outside);
});

beforeEach(async () => {
  await writeFile(path.join(outside, "sentinel"), SENTINEL);
});

afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

const sha256 = (data: Buffer) => createHash("sha256").update(data).digest("hex");

describe("unpackTarBz2", () => {
  it("unpacks files and directories, normalising modes and owners", async () => {
    const big = randomBytes(1_500_000);
    const longName = `model/${"very-long-directory-name/".repeat(6)}tokens.txt`;
    expect(longName.length).toBeGreaterThan(100);
    const paxName = `model/${"pax-directory/".repeat(9)}lexicon.txt`;
    const into = await freshTarget();
    const archive = await archiveOf(
      bzip2(
        tar([
          { name: "./", type: "5" },
          { name: "model/", type: "5", mode: 0o700 },
          { name: "model/model.onnx", data: big, mode: 0o600, uid: 12345 },
          { name: "model/espeak-ng-data/lang/gmw/en", data: "name English\n", mode: 0o666 },
          { name: "model/espeak-ng-data/", type: "5", mode: 0o3777 },
          { name: "model/run.sh", data: "#!/bin/sh\n", mode: 0o4755 },
          { name: "model/setgid.txt", data: "g", mode: 0o2644 },
          { name: "model/exec-by-others", data: "x", mode: 0o601 },
          { name: "model/empty.txt" },
          gnuLongName(longName),
          { name: longName.slice(0, 100), data: "long\n" },
          pax({ path: paxName, uid: "0", uname: "root", gid: "0" }),
          { name: "model/placeholder", data: "pax\n" },
        ]),
      ),
    );
    const result = await unpackTarBz2(archive, into);
    expect(result).toEqual({ files: 8, bytes: big.length + 13 + 10 + 1 + 1 + 0 + 5 + 4 });
    const file = (name: string) => path.join(into, name);
    expect(sha256(await readFile(file("model/model.onnx")))).toBe(sha256(big));
    expect(await readFile(file("model/espeak-ng-data/lang/gmw/en"), "utf8")).toBe("name English\n");
    expect(await readFile(file(longName), "utf8")).toBe("long\n");
    expect(await readFile(file(paxName), "utf8")).toBe("pax\n");
    expect(existsSync(file("model/placeholder"))).toBe(false);
    const modes: Record<string, number> = {
      model: 0o755,
      "model/espeak-ng-data": 0o755,
      "model/espeak-ng-data/lang/gmw": 0o755,
      "model/model.onnx": 0o644,
      "model/espeak-ng-data/lang/gmw/en": 0o644,
      "model/run.sh": 0o755,
      "model/setgid.txt": 0o644,
      "model/exec-by-others": 0o755,
      "model/empty.txt": 0o644,
    };
    for (const [name, mode] of Object.entries(modes)) {
      const stats = await stat(file(name));
      expect({ name, mode: stats.mode & 0o7777 }).toEqual({ name, mode });
      expect(stats.uid).toBe(process.getuid!());
    }
    await checkTree(into);
  });

  it("ignores what follows the end-of-archive record (tar's zero padding), up to 16 MiB of it", async () => {
    const into = await freshTarget();
    const data = Buffer.concat([tar([{ name: "a.txt", data: "a" }]), Buffer.alloc(8 * 1024 * 1024)]);
    expect(await unpackTarBz2(await archiveOf(bzip2(data)), into)).toEqual({ files: 1, bytes: 1 });
    // Decoded to the end (every block's checksum is checked), so the tail is bounded.
    const long = Buffer.concat([tar([{ name: "a.txt", data: "a" }]), Buffer.alloc(17 * 1024 * 1024)]);
    const refused = await freshTarget();
    await expect(unpackTarBz2(await archiveOf(bzip2(long)), refused)).rejects.toThrow(
      /holds more than 16777216 bytes after the end of its tar archive; the archive was not unpacked$/u,
    );
    await expectNothingOutside(refused);
  });

  describe("refuses a bzip2 checksum that fails after the tar data is complete, whichever decodes", () => {
    /** The stored CRC of a stream's first block (bytes 10–13: after "BZh9" and the block magic), broken. */
    const badFirstCrc = (stream: Buffer): Buffer => {
      const broken = Buffer.from(stream);
      broken[10] = broken[10]! ^ 0xff;
      return broken;
    };
    const files = tar([{ name: "model/a.bin", data: randomBytes(50_000) }]);
    const archives: [string, () => Buffer][] = [
      // The block holding the end-of-archive record, with GNU tar's padding after it: bzip2 hands
      // the block's output on before it checks the block.
      [
        "in the block holding the end of the archive",
        () => badFirstCrc(bzip2(Buffer.concat([files, Buffer.alloc(65_536)]))),
      ],
      // A second stream (as pbzip2 writes them) holding only padding.
      [
        "in a stream after the end of the archive",
        () => Buffer.concat([bzip2(files), badFirstCrc(bzip2(Buffer.alloc(65_536)))]),
      ],
    ];
    const decoders: [string, boolean][] = [
      ["by the bzip2 program", true],
      ["in JavaScript", false],
    ];
    for (const [where, build] of archives) {
      for (const [decoder, program] of decoders) {
        it.skipIf(program && !findOnPath("bzip2"))(`${where}, decoded ${decoder}`, async () => {
          const archive = await archiveOf(build());
          const into = await freshTarget();
          const searchPath = process.env.PATH;
          // unpack.ts looks for bzip2 on PATH at each unpacking: without it, the JavaScript decoder runs.
          if (!program) process.env.PATH = await emptyBin();
          try {
            await expect(unpackTarBz2(archive, into)).rejects.toThrow(
              /is not a valid bzip2 archive \(.+\)$/u,
            );
          } finally {
            process.env.PATH = searchPath;
          }
          await expectNothingOutside(into);
        });
      }
    }
  });

  it("reads concatenated bzip2 streams (as pbzip2 and lbzip2 write them)", async () => {
    const data = tar([
      { name: "model/a.bin", data: randomBytes(300_000) },
      { name: "model/b.txt", data: "b" },
    ]);
    const into = await freshTarget();
    const archive = await archiveOf(
      Buffer.concat([bzip2(data.subarray(0, 123_457)), bzip2(data.subarray(123_457))]),
    );
    expect(await unpackTarBz2(archive, into)).toEqual({ files: 2, bytes: 300_001 });
  });

  it("decodes no further than it unpacks: a bzip2 bomb of 100 × 45 MB blocks stops at the first", async () => {
    // Each stream is 45 MB of "x" in one block of ~50 bytes; the tar stream breaks after the first
    // file. Decoding everything first (as unbzip2-stream's own stream does) would take minutes and GBs.
    const block = bzip2(Buffer.alloc(45_000_000, "x"));
    const first = bzip2(tar([{ name: "a.bin", data: Buffer.alloc(1024 * 1024, "x") }]).subarray(0, -1024));
    const into = await freshTarget();
    const archive = await archiveOf(Buffer.concat([first, ...Array.from({ length: 100 }, () => block)]));
    const started = Date.now();
    await expect(unpackTarBz2(archive, into)).rejects.toThrow(/is not a valid tar archive/u);
    expect(Date.now() - started).toBeLessThan(15_000);
    await expectNothingOutside(into);
  });

  describe("refuses, writing nothing", () => {
    it("a symlink .relay-model.json -> /etc/passwd", () =>
      expectRefused(
        [{ name: ".relay-model.json", type: "2", linkname: "/etc/passwd" }],
        /entry "\.relay-model\.json" is a symbolic link \(to "\/etc\/passwd"\)/u,
      ));

    it("a symlink written through by the next entry", () =>
      expectRefused(
        [
          { name: "model/", type: "5" },
          { name: "model/.relay-model.json", type: "2", linkname: path.join(outside, "sentinel") },
          { name: "model/.relay-model.json", data: "overwritten" },
        ],
        /"model\/\.relay-model\.json" is a symbolic link/u,
      ));

    it("a symlink espeak-ng-data -> / with a file beneath it", () =>
      expectRefused(
        [
          { name: "model/espeak-ng-data", type: "2", linkname: "/" },
          { name: `model/espeak-ng-data${outside}/pwned`, data: "pwned" },
        ],
        /"model\/espeak-ng-data" is a symbolic link \(to "\/"\)/u,
      ));

    it("the top directory itself a symlink", () =>
      expectRefused(
        [
          { name: "vits-model", type: "2", linkname: outside },
          { name: "vits-model/model.onnx", data: "pwned" },
        ],
        /"vits-model" is a symbolic link/u,
      ));

    it("a hard link", () =>
      expectRefused(
        [
          { name: "model.onnx", data: "weights" },
          { name: "sentinel-link", type: "1", linkname: path.join(outside, "sentinel") },
        ],
        /"sentinel-link" is a hard link/u,
      ));

    it("a character device", () =>
      expectRefused([{ name: "null", type: "3", mode: 0o666 }], /"null" is a character device/u));

    it("a block device", () => expectRefused([{ name: "sda", type: "4" }], /"sda" is a block device/u));

    it("a FIFO", () => expectRefused([{ name: "pipe", type: "6" }], /"pipe" is a FIFO/u));

    it("a FIFO whose name holds terminal escapes, named with every control character escaped", async () => {
      // JSON escapes ESC and BEL but leaves the C1 CSI (U+009B) and format characters as they are.
      const name = "p\u001b]0;x\u0007\u009b2J\u200e";
      await expectRefused([{ name, type: "6" }], /"p\\u001b\]0;x\\u0007\\u009b2J\\u200e" is a FIFO/u);
      const error = await unpackTarBz2(
        await archiveOf(bzip2(tar([{ name, type: "6" }]))),
        await freshTarget(),
      ).catch((caught: unknown) => caught as Error);
      expect([...(error as Error).message].filter((char) => /[\p{Cc}\p{Cf}]/u.test(char))).toEqual([]);
    });

    it("an unsupported type (GNU sparse file)", () =>
      expectRefused([{ name: "sparse", type: "S", data: "x" }], /"sparse" has an unsupported type/u));

    it("a pax record over node-tar's 1 MiB (which it would skip)", () =>
      expectRefused(
        [pax({ comment: "x".repeat(1_100_000) }), { name: "innocent.txt", data: "x" }],
        /"PaxHeader\/entry" is a ExtendedHeader record over 1048576 bytes/u,
      ));

    it("../escape", () =>
      expectRefused([{ name: "../escape", data: "pwned" }], /"\.\.\/escape" has a '\.\.' component/u));

    it("a '..' hidden in the middle of a path", () =>
      expectRefused(
        [{ name: "model/../../outside/pwned", data: "pwned" }],
        /"model\/\.\.\/\.\.\/outside\/pwned" has a '\.\.' component/u,
      ));

    it("an absolute path", async () => {
      const absolute = path.join(os.tmpdir(), `relay-unpack-absolute-${process.pid}-${Date.now()}`);
      await expectRefused([{ name: absolute, data: "pwned" }], /has an absolute path/u);
      await expectRefused([{ name: path.join(outside, "x"), data: "pwned" }], /has an absolute path/u);
      expect(existsSync(absolute)).toBe(false);
    });

    it("a GNU long name with '..'", () =>
      expectRefused(
        [
          gnuLongName(`${"a/".repeat(60)}${"../".repeat(62)}outside/pwned`),
          { name: "innocent", data: "pwned" },
        ],
        /"(a\/){60}(\.\.\/){1,}.*has a '\.\.' component/u,
      ));

    it("a pax path with '..' behind an innocent name", () =>
      expectRefused(
        [pax({ path: "../pax-escape" }), { name: "innocent.txt", data: "pwned" }],
        /"\.\.\/pax-escape" has a '\.\.' component/u,
      ));

    it("a pax path that is absolute", () =>
      expectRefused(
        [pax({ path: path.join(outside, "pax-absolute") }), { name: "innocent.txt", data: "pwned" }],
        /has an absolute path/u,
      ));

    it("a file replacing a directory", () =>
      expectRefused(
        [
          { name: "model/", type: "5" },
          { name: "model", data: "file" },
        ],
        /"model" is a file where the archive already made a directory/u,
      ));

    it("a directory replacing a file", () =>
      expectRefused(
        [
          { name: "model", data: "file" },
          { name: "model/", type: "5" },
        ],
        /"model\/" needs "model" to be a directory/u,
      ));

    it("a file beneath a file", () =>
      expectRefused(
        [
          { name: "model", data: "file" },
          { name: "model/x", data: "x" },
        ],
        /"model\/x" needs "model" to be a directory/u,
      ));

    it("the same file twice", () =>
      expectRefused(
        [
          { name: "model.onnx", data: "one" },
          { name: "./model.onnx", data: "two" },
        ],
        /"\.\/model\.onnx" appears twice/u,
      ));

    it("too many entries", () =>
      expectRefused(
        Array.from({ length: 6 }, (_, i) => ({ name: `f${i}`, data: "x" })),
        /has more than 5 entries \(at "f5"\)/u,
        { maxEntries: 5 },
      ));

    it("too many directories made by one deep path", () =>
      expectRefused(
        [{ name: `${"d/".repeat(10)}f`, data: "x" }],
        /creates more than 5 files and directories/u,
        {
          maxEntries: 5,
        },
      ));

    it("too many bytes", () =>
      expectRefused(
        [
          { name: "a", data: Buffer.alloc(600) },
          { name: "b", data: Buffer.alloc(600) },
        ],
        /unpacks to more than 1000 bytes \(at "b", 600 bytes\)/u,
        { maxBytes: 1000 },
      ));

    it("a declared size beyond the bound, before reading it", () =>
      expectRefused(
        [pax({ size: String(64 * 1024 ** 3) }), { name: "huge", data: "x" }],
        /more than 1000 bytes/u,
        {
          maxBytes: 1000,
        },
      ));

    it("tar data far beyond the bound (metadata that writes nothing)", () =>
      expectRefused(
        Array.from({ length: 400 }, () => pax({ comment: "x".repeat(60_000) })),
        /decompresses to more than \d+ bytes of tar data/u,
        { maxBytes: 1000, maxEntries: 1 },
      ));
  });

  it("rejects a damaged or truncated bzip2 stream, a non-bzip2 file and a bad tar checksum", async () => {
    const good = bzip2(tar([{ name: "a.txt", data: randomBytes(100_000) }]));
    const damaged = Buffer.from(good);
    damaged[Math.floor(damaged.length / 2)]! ^= 0xff;
    const badChecksum = tar([{ name: "a.txt", data: "a" }]);
    badChecksum[0] = "b".charCodeAt(0);
    const cases: [Buffer, RegExp][] = [
      // Native bzip2 hands on a block's output before its checksum fails: the tar parse may fail first.
      [damaged, /is not a valid (bzip2|tar) archive/u],
      [good.subarray(0, good.length - 1000), /is not a valid bzip2 archive/u],
      [tar([{ name: "a.txt", data: "a" }]), /is not a valid bzip2 archive/u],
      [bzip2(badChecksum), /is not a valid tar archive/u],
      [bzip2(Buffer.alloc(0)), /is empty/u],
    ];
    for (const [data, message] of cases) {
      const into = await freshTarget();
      await expect(unpackTarBz2(await archiveOf(data), into)).rejects.toThrow(message);
      await expectNothingOutside(into);
    }
  });

  it("needs an existing empty directory, and stops when aborted", async () => {
    const archive = await archiveOf(bzip2(tar([{ name: "a.txt", data: "a" }])));
    const into = await freshTarget();
    await writeFile(path.join(into, "already"), "");
    await expect(unpackTarBz2(archive, into)).rejects.toThrow(/is not empty/u);
    await expect(unpackTarBz2(archive, path.join(tmp, "missing"))).rejects.toThrow(/ENOENT/u);
    const link = path.join(tmp, "link-to-outside");
    await symlink(outside, link);
    await expect(unpackTarBz2(archive, link)).rejects.toThrow(/is not a directory/u);
    const fresh = await freshTarget();
    await expect(unpackTarBz2(archive, fresh, { signal: AbortSignal.abort() })).rejects.toThrow(/abort/iu);
    await expectNothingOutside(fresh);
  });

  it("needs no bzip2 program: unpacks with nothing but node on PATH", async () => {
    const bin = path.join(tmp, "bin-node-only");
    await mkdir(bin);
    await symlink(process.execPath, path.join(bin, "node"));
    const into = await freshTarget();
    const archive = await archiveOf(bzip2(tar([{ name: "model/tokens.txt", data: "a 1\n" }])));
    const script = path.join(tmp, "unpack-child.mts");
    await writeFile(
      script,
      [
        `import { spawnSync } from "node:child_process";`,
        `import { unpackTarBz2 } from ${JSON.stringify(pathToFileURL(path.join(PROJECT_ROOT, "src/engines/kit/models/unpack.ts")).href)};`,
        `const bzip2 = spawnSync("bzip2", ["--help"]).error?.code ?? "found";`,
        `const tar = spawnSync("tar", ["--help"]).error?.code ?? "found";`,
        `const result = await unpackTarBz2(process.argv[2], process.argv[3]);`,
        `console.log(JSON.stringify({ bzip2, tar, result }));`,
      ].join("\n"),
    );
    const run = await new Promise<{ code: number | null; stdout: string; stderr: string }>(
      (resolve, reject) => {
        const child = spawn(process.execPath, ["--import", "tsx", script, archive, into], {
          cwd: PROJECT_ROOT,
          env: { PATH: bin, HOME: tmp, TMPDIR: os.tmpdir() },
          stdio: ["ignore", "pipe", "pipe"],
        });
        let stdout = "";
        let stderr = "";
        child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
        child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
        child.on("error", reject);
        child.on("close", (code) => resolve({ code, stdout, stderr }));
      },
    );
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual({
      bzip2: "ENOENT",
      tar: "ENOENT",
      result: { files: 1, bytes: 4 },
    });
    expect(await readFile(path.join(into, "model/tokens.txt"), "utf8")).toBe("a 1\n");
  });
});

describe("checkTree", () => {
  async function tree(): Promise<string> {
    const root = await freshTarget();
    await mkdir(path.join(root, "model/espeak-ng-data"), { recursive: true });
    await writeFile(path.join(root, "model/model.onnx"), "weights");
    await writeFile(path.join(root, "model/espeak-ng-data/phontab"), "phonemes");
    return root;
  }

  it("accepts regular files and directories of this user", async () => {
    await checkTree(await tree());
  });

  it("refuses a symlink, anywhere or as the root", async () => {
    const root = await tree();
    await symlink("/etc/passwd", path.join(root, "model/.relay-model.json"));
    await expect(checkTree(root)).rejects.toThrow(UnsafeArchiveError);
    await expect(checkTree(root)).rejects.toThrow(/\.relay-model\.json is a symbolic link/u);
    const link = path.join(tmp, "tree-link");
    await symlink(await tree(), link);
    await expect(checkTree(link)).rejects.toThrow(/tree-link is a symbolic link/u);
  });

  it("refuses a setuid or setgid file", async () => {
    const root = await tree();
    await chmod(path.join(root, "model/model.onnx"), 0o4755);
    await expect(checkTree(root)).rejects.toThrow(/model\.onnx has a setuid bit \(mode 4755\)/u);
    await chmod(path.join(root, "model/model.onnx"), 0o2644);
    await expect(checkTree(root)).rejects.toThrow(/model\.onnx has a setgid bit/u);
  });

  it("refuses a hard-linked file", async () => {
    const root = await tree();
    await link(path.join(root, "model/model.onnx"), path.join(root, "model/copy.onnx"));
    await expect(checkTree(root)).rejects.toThrow(/has 2 hard links/u);
  });

  it("refuses a FIFO", async () => {
    const root = await tree();
    execFileSync("mkfifo", [path.join(root, "model/pipe")]);
    await expect(checkTree(root)).rejects.toThrow(/pipe is a FIFO/u);
  });

  it.runIf(process.getuid?.() === 0)("refuses, as root, a file another user owns", async () => {
    const root = await tree();
    await chown(path.join(root, "model/espeak-ng-data/phontab"), 12345, 12345);
    await expect(checkTree(root)).rejects.toThrow(
      /phontab is owned by uid 12345, not by this process's uid 0/u,
    );
  });
});
