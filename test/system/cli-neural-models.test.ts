/**
 * `relay models pull|verify|list` for sherpa-onnx voices, run as the built CLI with no `bzip2` or
 * `tar` on PATH, against a local stand-in of GitHub's release downloads serving archives laid out as
 * upstream's (test/support/upstream-archives.ts: `vits-piper-<voice>/…` in a `.tar.bz2`, stand-in
 * models inside). Then archives an attacker (a mirror, a tampered release) could serve: links out of
 * the models directory, a hard link, `..` and absolute paths, a device, setuid bits, a licence line
 * with terminal escapes; each is refused with a message and leaves nothing behind, in the models
 * directory or outside it (a sentinel file outside, which the links and paths aim at, must stay as
 * it was). Last, the service's own check at load: a pulled voice whose model was since replaced by
 * a link out of the models directory, or truncated, is left out with a reason, and the other serves.
 * Nothing here uses the network.
 */
import {
  copyFile,
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rm,
  symlink,
  truncate,
  writeFile,
} from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import onnxProto from "onnx-proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { defaultVoice } from "../../src/voices/library.js";
import { MANIFEST } from "../../src/engines/kit/models/model-dir.js";
import { findSherpaModelOf } from "../../src/engines/sherpa-onnx/catalogue.js";
import { injectApp } from "../support/app.js";
import { buildVitsStandIn } from "../support/stand-in-models/vits.js";
import { runScript, type Run } from "../support/run-script.js";
import {
  buildUpstreamArchive,
  nodeOnlyBin,
  startReleaseServer,
  whichOn,
  type ReleaseServer,
  type UpstreamArchiveOptions,
} from "../support/upstream-archives.js";

const ENGLISH = findSherpaModelOf("tts", "piper-en_US-libritts_r-medium")!;
const SPANISH = findSherpaModelOf("tts", "piper-es_ES-sharvard-medium")!;
/** The control characters in `text` but newlines (none may come from an archive into the output). */
const controls = (text: string): string[] =>
  [...text.replaceAll("\n", "").matchAll(/\p{Cc}/gu)].map((m) => m[0]);

let tmp: string;
let work: string;
let outside: string;
let sentinel: string;
let nodeOnlyPath: string;
let server: ReleaseServer;
let cases = 0;
/** The archives as upstream's, by URL: what the server serves again after a test served another. */
const upstream = new Map<string, Buffer>();
const restore = (url: string) => server.set({ url, body: upstream.get(url)! });

beforeAll(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), "relay-cli-neural-"));
  work = path.join(tmp, "work");
  outside = path.join(tmp, "outside");
  sentinel = path.join(outside, "secret");
  await mkdir(work);
  await mkdir(outside);
  await writeFile(sentinel, "nothing from an archive may touch this\n");
  nodeOnlyPath = await nodeOnlyBin(tmp);
  for (const entry of [ENGLISH, SPANISH])
    upstream.set(entry.url, await buildUpstreamArchive(entry.name, work));
  server = await startReleaseServer([...upstream].map(([url, body]) => ({ url, body })));
});
afterAll(async () => {
  await server?.close();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

/**
 * The built CLI, the stand-in release server as the mirror; with only `node` on PATH (so archives
 * are decompressed in JavaScript) unless `searchPath` says otherwise.
 */
const relay = (args: string[], dir: string, searchPath = nodeOnlyPath): Promise<Run> =>
  runScript("src/cli/main.ts", ["models", ...args], {
    PATH: searchPath,
    RELAY_MODELS_BASE_URL: server.url,
    MODELS_DIR: dir,
  });

/**
 * unpack.ts decompresses with the `bzip2` program where PATH has one, in JavaScript where not: the
 * hostile archives go through both (the former only where this machine has a `bzip2`).
 */
/**
 * Every case with no bzip2 program on PATH; with the program, the cases whose entries are refused
 * before, inside and after the inner directory (the tar checks are the same whoever decompresses:
 * these show the program's output reaches them, and is stopped with the archive).
 */
const DECODERS = [
  {
    name: "decompressed in JavaScript (no bzip2 on PATH)",
    path: () => nodeOnlyPath,
    skip: false,
    cases: (_: string) => true,
  },
  {
    name: "decompressed by the bzip2 program",
    path: () => process.env.PATH ?? "",
    skip: whichOn("bzip2", process.env.PATH ?? "") === undefined,
    cases: (name: string) => /manifest.s path|itself a symbolic link|an absolute path/u.test(name),
  },
];

/** The `relay:`-prefixed lines are the CLI's error messages (other stderr lines are progress). */
const errorLines = (result: Run): string =>
  result.stderr
    .split("\n")
    .filter((line) => line.startsWith("relay:"))
    .join("\n");

/** A fresh, empty models directory of its own, directly under the test's temporary directory. */
async function freshModelsDir(): Promise<string> {
  const dir = path.join(tmp, `models-${++cases}`);
  await mkdir(dir);
  return dir;
}

/** Everything under `dir` (not following links): path, type, mode, size, mtime and contents' length. */
async function snapshot(dir: string): Promise<string[]> {
  const lines: string[] = [];
  for (const name of (await readdir(dir, { recursive: true })).sort()) {
    const stats = await lstat(path.join(dir, name));
    lines.push(`${name} ${stats.mode.toString(8)} ${stats.size} ${stats.mtimeMs}`);
  }
  return lines;
}

/** The whole tree under `dir`, as modes by relative path (links never followed). */
async function modesUnder(dir: string): Promise<Map<string, number>> {
  const modes = new Map<string, number>();
  for (const name of await readdir(dir, { recursive: true }))
    modes.set(name, (await lstat(path.join(dir, name))).mode);
  return modes;
}

describe("relay models pull, verify and list: neural voices", () => {
  it("checks that the CLI runs with node alone on PATH", () => {
    expect(whichOn("node", nodeOnlyPath)).toBeDefined();
    expect(whichOn("bzip2", nodeOnlyPath)).toBeUndefined();
    expect(whichOn("tar", nodeOnlyPath)).toBeUndefined();
  });

  it("pulls, unpacks and verifies a voice; resumes an interrupted download; lists it; verify finds a file changed since", async () => {
    const dir = await freshModelsDir();
    // The first attempt's connection drops halfway through the archive.
    server.cutNext(ENGLISH.url);
    const cut = await relay(["pull", ENGLISH.name], dir);
    expect(cut.code).toBe(1);
    expect(errorLines(cut)).toMatch(
      /download of vits-piper-en_US-libritts_r-medium\.tar\.bz2 interrupted at .*run the same pull again to resume/,
    );
    const partial = (await lstat(path.join(dir, `${ENGLISH.file}.partial`))).size;
    expect(partial).toBeGreaterThan(0);
    const waiting = await relay(["list"], dir);
    expect(waiting.stdout).toMatch(
      new RegExp(`${ENGLISH.name}\\s+tts\\s+en\\s+~${ENGLISH.approxMiB} MiB\\s+yes\\s+partial \\(`, "u"),
    );

    const seen = server.requests.length;
    const pulled = await relay(["pull", ENGLISH.name], dir);
    expect(pulled.code, pulled.stderr).toBe(0);
    // Through the mirror path and the release's redirect, then a Range request for the rest.
    expect(server.requests.slice(seen).map((r) => `${r.kind} ${r.status} ${r.range ?? "-"}`)).toEqual([
      `mirror 302 bytes=${partial}-`,
      `release 302 bytes=${partial}-`,
      `asset 206 bytes=${partial}-`,
    ]);
    expect(pulled.stdout).toMatch(
      /pulled piper-en_US-libritts_r-medium: .* resumed from .*SHA-256 [0-9a-f]{64} recorded/,
    );
    expect(pulled.stdout).toContain("licence, as its model card states it: CC BY 4.0");
    expect((await lstat(path.join(dir, ENGLISH.dir, ENGLISH.tts.model))).isFile()).toBe(true);
    expect((await lstat(path.join(dir, ENGLISH.dir, "espeak-ng-data"))).isDirectory()).toBe(true);
    // Only the model's directory is left: no archive, no partial, no staging directory.
    expect(await readdir(dir)).toEqual([ENGLISH.dir]);

    const verified = await relay(["verify", ENGLISH.name], dir);
    expect(verified.code, verified.stderr).toBe(0);
    expect(verified.stdout).toMatch(/piper-en_US-libritts_r-medium\s+ok \(/);
    const listed = await relay(["list"], dir);
    expect(listed.code, listed.stderr).toBe(0);
    // The card's "CC BY 4.0" is part of the catalogue's licence: shown once.
    expect(listed.stdout).toMatch(
      new RegExp(
        `${ENGLISH.name}\\s+tts\\s+en\\s+~${ENGLISH.approxMiB} MiB\\s+yes\\s+yes\\s+unclear\\s+dataset LibriTTS-R, CC BY 4\\.0;`,
        "u",
      ),
    );
    expect(listed.stdout).not.toMatch(/its card:/u);

    // A file changed after the pull fails verification.
    await writeFile(path.join(dir, ENGLISH.dir, ENGLISH.tts.tokens), "_ 0\n");
    const tampered = await relay(["verify", ENGLISH.name], dir);
    expect(tampered.code).toBe(1);
    expect(tampered.stdout).toMatch(/FAILED: checksum mismatch: tokens.txt has changed since it was pulled/);
  });

  it("refuses a voice whose model lacks the metadata sherpa-onnx needs, and keeps nothing of it", async () => {
    const dir = await freshModelsDir();
    const files = { [SPANISH.tts.model]: standInModelWithout("sample_rate") };
    server.set({ url: SPANISH.url, body: await buildUpstreamArchive(SPANISH.name, work, { files }) });
    try {
      const result = await relay(["pull", SPANISH.name], dir);
      expect(result.code).toBe(1);
      expect(errorLines(result)).toMatch(
        /lacks the metadata sherpa-onnx requires of a vits model: sample_rate/,
      );
      expect(await readdir(dir)).toEqual([]);
    } finally {
      restore(SPANISH.url);
    }
  });
});

/** A stand-in of the Spanish voice's model without the metadata `key`. */
function standInModelWithout(key: string): Uint8Array {
  const { onnx } = onnxProto;
  const decoded = onnx.ModelProto.decode(buildVitsStandIn({ voice: "es", language: "Spanish", speakers: 2 }));
  decoded.metadataProps = decoded.metadataProps.filter((entry) => entry.key !== key);
  return onnx.ModelProto.encode(decoded).finish();
}

interface HostileCase {
  readonly name: string;
  readonly options: () => UpstreamArchiveOptions;
  /** What the refusal names (after "refused: "). */
  readonly message: RegExp;
}

const inner = ENGLISH.dir;
const HOSTILE: readonly HostileCase[] = [
  {
    name: "the manifest's path a symbolic link to a file outside",
    options: () => ({ symlinks: { [".relay-model.json"]: sentinel } }),
    message: new RegExp(
      `entry "${inner}/\\.relay-model\\.json" is a symbolic link \\(to ".*/outside/secret"\\)`,
      "u",
    ),
  },
  {
    name: "the model's directory itself a symbolic link to a directory outside (its files after it)",
    options: () => ({ symlinks: { "": outside } }),
    message: new RegExp(`entry "${inner}" is a symbolic link \\(to ".*/outside"\\)`, "u"),
  },
  {
    name: "espeak-ng-data a symbolic link to /, and a file written through it onto the sentinel",
    options: () => ({
      symlinks: { "espeak-ng-data": "/" },
      extraEntries: [{ path: `${inner}/espeak-ng-data${sentinel}`, type: "File", body: "pwned\n" }],
    }),
    message: new RegExp(`entry "${inner}/espeak-ng-data" is a symbolic link \\(to "/"\\)`, "u"),
  },
  {
    name: "a hard link to the sentinel in place of MODEL_CARD, then MODEL_CARD written again",
    options: () => ({
      hardLinks: { MODEL_CARD: sentinel },
      extraEntries: [{ path: `${inner}/MODEL_CARD`, type: "File", body: "pwned\n" }],
    }),
    message: new RegExp(`entry "${inner}/MODEL_CARD" is a hard link \\(to ".*/outside/secret"\\)`, "u"),
  },
  {
    name: "a hard link between two files of the archive",
    options: () => ({ hardLinks: { [`${ENGLISH.tts.model}.json`]: `${inner}/${ENGLISH.tts.tokens}` } }),
    message: new RegExp(`entry "${inner}/en_US-libritts_r-medium\\.onnx\\.json" is a hard link`, "u"),
  },
  {
    name: "an entry with '..' that lands on the sentinel",
    // Staging is <models>/.unpack-…/: two levels up is the test's temporary directory.
    options: () => ({ extraEntries: [{ path: "../../outside/secret", type: "File", body: "pwned\n" }] }),
    message: /entry "\.\.\/\.\.\/outside\/secret" has a '\.\.' component in its path/u,
  },
  {
    name: "an entry with '..' inside the model's directory",
    options: () => ({
      extraEntries: [{ path: `${inner}/../../../outside/secret`, type: "File", body: "pwned\n" }],
    }),
    message: /has a '\.\.' component in its path/u,
  },
  {
    name: "an absolute path onto the sentinel",
    options: () => ({ extraEntries: [{ path: sentinel, type: "File", body: "pwned\n" }] }),
    message: /entry ".*\/outside\/secret" has an absolute path/u,
  },
  {
    name: "a FIFO",
    options: () => ({ extraEntries: [{ path: `${inner}/espeak-ng-data/fifo`, type: "FIFO" }] }),
    message: /is a FIFO/u,
  },
];

/** Each hostile archive, built once for both decoders. */
const hostileArchives = new Map<string, Promise<Buffer>>();
function hostileArchive(hostile: HostileCase): Promise<Buffer> {
  if (!hostileArchives.has(hostile.name))
    hostileArchives.set(hostile.name, buildUpstreamArchive(ENGLISH.name, work, hostile.options()));
  return hostileArchives.get(hostile.name)!;
}

describe.each(DECODERS.map((decoder) => [decoder.name, decoder] as const))(
  "hostile archives %s: refused, nothing kept, nothing written outside the models directory",
  (_name, decoder) => {
    for (const hostile of HOSTILE.filter((hostile) => decoder.cases(hostile.name))) {
      it.skipIf(decoder.skip)(hostile.name, async () => {
        const dir = await freshModelsDir();
        const before = { outside: await snapshot(outside), top: (await readdir(tmp)).sort() };
        const secret = await readFile(sentinel, "utf8");
        server.set({ url: ENGLISH.url, body: await hostileArchive(hostile) });
        try {
          const result = await relay(["pull", ENGLISH.name], dir, decoder.path());
          expect(result.code, result.stdout).toBe(1);
          const error = errorLines(result);
          expect(error).toContain(`relay: ${ENGLISH.file} did not unpack into ${inner}/ (refused: `);
          expect(error).toMatch(hostile.message);
          expect(error).toContain("the archive was deleted: pull again");
          // Nothing of the model in the models directory: no directory, archive, partial or staging.
          expect(await readdir(dir)).toEqual([]);
          // Nothing outside it.
          expect(await readFile(sentinel, "utf8")).toBe(secret);
          expect(await snapshot(outside)).toEqual(before.outside);
          expect((await readdir(tmp)).sort()).toEqual(before.top);
        } finally {
          restore(ENGLISH.url);
        }
      });
    }
  },
);

describe("archive metadata that is not kept or not printed as it is", () => {
  it("setuid, setgid, sticky and world-writable bits are not kept (unpack.ts strips them, it does not refuse): 0644/0755, and the voice pulls and verifies", async () => {
    const dir = await freshModelsDir();
    server.set({
      url: ENGLISH.url,
      body: await buildUpstreamArchive(ENGLISH.name, work, {
        modes: {
          [ENGLISH.tts.tokens]: 0o4755,
          [ENGLISH.tts.model]: 0o6644,
          MODEL_CARD: 0o1666,
          "espeak-ng-data": 0o2777,
          "": 0o3777,
        },
      }),
    });
    try {
      const pulled = await relay(["pull", ENGLISH.name], dir);
      expect(pulled.code, pulled.stderr).toBe(0);
      const model = path.join(dir, ENGLISH.dir);
      expect((await lstat(path.join(model, ENGLISH.tts.tokens))).mode & 0o7777).toBe(0o755);
      expect((await lstat(path.join(model, ENGLISH.tts.model))).mode & 0o7777).toBe(0o644);
      // Sticky and world-writable: neither kept.
      expect((await lstat(path.join(model, "MODEL_CARD"))).mode & 0o7777).toBe(0o644);
      expect((await lstat(path.join(model, "espeak-ng-data"))).mode & 0o7777).toBe(0o755);
      expect((await lstat(model)).mode & 0o7777).toBe(0o755);
      for (const [name, mode] of await modesUnder(model)) expect(mode & 0o7000, name).toBe(0);
      const verified = await relay(["verify", ENGLISH.name], dir);
      expect(verified.code, verified.stderr).toBe(0);
    } finally {
      restore(ENGLISH.url);
    }
  });

  it("a MODEL_CARD licence line with terminal escapes is printed and listed as plain text", async () => {
    const dir = await freshModelsDir();
    const licence = "\u001b]0;pwned\u0007CC BY 4.0\u001b[2J\u009b31m";
    server.set({ url: ENGLISH.url, body: await buildUpstreamArchive(ENGLISH.name, work, { licence }) });
    try {
      const pulled = await relay(["pull", ENGLISH.name], dir);
      expect(pulled.code, pulled.stderr).toBe(0);
      expect(pulled.stdout).toContain("licence, as its model card states it: ]0;pwned CC BY 4.0 [2J 31m");
      expect(controls(pulled.stdout)).toEqual([]);
      expect(controls(pulled.stderr)).toEqual([]);
      const manifest = JSON.parse(await readFile(path.join(dir, ENGLISH.dir, MANIFEST), "utf8")) as {
        licence: string;
      };
      expect(controls(manifest.licence)).toEqual([]);

      const listed = await relay(["list"], dir);
      expect(listed.code, listed.stderr).toBe(0);
      expect(listed.stdout).toContain("(its card: ]0;pwned CC BY 4.0 [2J 31m)");
      expect(controls(listed.stdout)).toEqual([]);
      const verified = await relay(["verify"], dir);
      expect(controls(verified.stdout)).toEqual([]);
    } finally {
      restore(ENGLISH.url);
    }
  });
});

describe("a pulled voice changed since: the service leaves it out with a reason, the other voice serves", () => {
  /** /healthz of the service (in process, its own engines) on `dir`, and a Spanish synthesis through it. */
  async function serviceOn(dir: string) {
    const app = await injectApp({ MODELS_DIR: dir }, { ownEngines: true });
    try {
      const health = (await (await app.inject("/healthz")).json()) as {
        status: string;
        engines: { kind: string; id: string; version?: string }[];
        unavailable_engines: { id: string; reason: string }[];
      };
      const spanish = app.registry.synthesizer("es")!;
      const speech = await spanish.synthesize({
        text: "Hola.",
        language: "es",
        voice: defaultVoice("female"),
      });
      return { health, spanishEngine: spanish.info.id, samples: speech.samples.length };
    } finally {
      await app.close();
    }
  }

  it("an .onnx replaced by a link leading out of the models directory, then truncated", async () => {
    const dir = await freshModelsDir();
    for (const entry of [ENGLISH, SPANISH]) {
      const pulled = await relay(["pull", entry.name], dir);
      expect(pulled.code, pulled.stderr).toBe(0);
    }
    const model = path.join(dir, ENGLISH.dir, ENGLISH.tts.model);
    const original = await readFile(model);
    // The same bytes, outside: the size matches the manifest, only where it lies is wrong.
    const copy = path.join(outside, "elsewhere.onnx");
    await copyFile(model, copy);
    await rm(model);
    await symlink(copy, model);
    try {
      const linked = await serviceOn(dir);
      expect(linked.health.status).toBe("degraded");
      const reason = linked.health.unavailable_engines.find(
        (e) => e.id === `sherpa-onnx-voice ${ENGLISH.name}`,
      )?.reason;
      expect(reason).toBe(
        `${ENGLISH.name} is not loaded: ${ENGLISH.dir}/${ENGLISH.tts.model} is a link leading out of the models directory (pull it again)`,
      );
      expect(reason).not.toContain(tmp);
      const tts = linked.health.engines.find((e) => e.kind === "tts" && e.id === "sherpa-onnx");
      expect(tts?.version).toMatch(new RegExp(`\\+${SPANISH.name}$`, "u"));
      expect(tts?.version).not.toContain(ENGLISH.name);
      expect(linked.spanishEngine).toBe("sherpa-onnx");
      expect(linked.samples).toBeGreaterThan(0);

      // Truncated in place: its size is not the one pulled.
      await rm(model);
      await writeFile(model, original);
      await truncate(model, Math.floor(original.length / 2));
      const truncated = await serviceOn(dir);
      expect(truncated.health.status).toBe("degraded");
      const why = truncated.health.unavailable_engines.find(
        (e) => e.id === `sherpa-onnx-voice ${ENGLISH.name}`,
      )?.reason;
      expect(why).toBe(
        `${ENGLISH.name} is not loaded: ${ENGLISH.dir}/${ENGLISH.tts.model} is ${Math.floor(original.length / 2)} bytes, ` +
          `not the ${original.length} bytes pulled (run \`relay models verify\`)`,
      );
      expect(why).not.toContain(tmp);
      expect(truncated.spanishEngine).toBe("sherpa-onnx");
      expect(truncated.samples).toBeGreaterThan(0);
    } finally {
      await rm(copy, { force: true });
    }
  });
});
