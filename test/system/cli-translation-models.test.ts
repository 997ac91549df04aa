/**
 * `relay models pull|verify|list` for translation models and the tone colour model (both pulled as
 * kit/models/hugging-face.ts pulls), run as a child process against a local
 * stand-in of Hugging Face's file serving, holding stand-in models (test/support/stand-in-models/).
 * The stand-in answers as the Hub does: `/<repo>/resolve/main/<path>` serves a small (git) file
 * directly with its git blob SHA-1 as ETag, and redirects an LFS file (the .onnx) to its storage
 * (`/cdn/<sha256>`) stating its SHA-256 and size in `X-Linked-Etag` / `X-Linked-Size`; the storage
 * honours Range requests. Nothing here uses the network.
 */
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findMtModel, type MtModelEntry } from "../../src/engines/transformers-js/catalogue.js";
import { findToneColorModel } from "../../src/engines/openvoice/catalogue.js";
import { pullToneColorModel, verifyToneColorModel } from "../../src/engines/openvoice/pull.js";
import { installStandInTranslation } from "../support/stand-in-models/install.js";
import { writeToneColorStandIn } from "../support/stand-in-models/tone-color.js";
import { freePort } from "../support/ports.js";
import { runScript, type Run } from "../support/run-script.js";

const DE_EN = findMtModel("opus-mt-de-en")!;
const EN_DE = findMtModel("opus-mt-en-de")!;
const FR_EN = findMtModel("opus-mt-fr-en")!;
const TONE = findToneColorModel("tone-color")!;
const TONE_FILES = [TONE.files.config, TONE.files.extractor, TONE.files.converter];
const DECODER = "onnx/decoder_model_merged_quantized.onnx";
const REPO_COMMIT = "0123456789abcdef0123456789abcdef01234567";

interface HubFile {
  readonly body: Buffer;
  /** Stored with git LFS (as the Hub stores .onnx files): served through a redirect to `/cdn/<sha256>`. */
  readonly lfs: boolean;
  readonly sha256: string;
  /** The git blob SHA-1, the Hub's ETag of a file kept in git. */
  readonly gitSha1: string;
}

let server: Server;
let serverUrl: string;
/** Nothing listens there: the machine is as good as offline. */
let closedPort: number;
let tmp: string;
/** `<repo>/<path>` → the file. */
const files = new Map<string, HubFile>();
/** sha256 → the LFS file's bytes. */
const storage = new Map<string, Buffer>();
/** `<repo>/<path>` of LFS files whose stated SHA-256 is wrong. */
const wrongStatement = new Set<string>();
/** SHA-256s of stored files whose next GET is cut after about half of the bytes. */
const cutNextGet = new Set<string>();
/** The storage GETs seen: `<sha256> <Range or "-">`. */
let storageRequests: string[] = [];

const sha256Of = (bytes: Buffer): string => createHash("sha256").update(bytes).digest("hex");

async function serveStandIn(entry: MtModelEntry): Promise<void> {
  const dir = installStandInTranslation(await mkdtemp(path.join(tmp, "source-")), entry.name);
  await serveFiles(entry.repo, dir, entry.files);
}

/** Serves `files` of `dir` as the Hub serves `repo`'s (.onnx files through LFS). */
async function serveFiles(repo: string, dir: string, names: readonly string[]): Promise<void> {
  for (const file of names) {
    const body = await readFile(path.join(dir, file));
    const sha256 = sha256Of(body);
    const gitSha1 = createHash("sha1")
      .update(Buffer.concat([Buffer.from(`blob ${body.length}\0`), body]))
      .digest("hex");
    const lfs = file.endsWith(".onnx");
    files.set(`${repo}/${file}`, { body, lfs, sha256, gitSha1 });
    if (lfs) storage.set(sha256, body);
  }
}

/** The bytes, honouring `Range: bytes=N-` (206, or 416 past the end), as the Hub and its CDN do. */
function sendBytes(request: IncomingMessage, response: ServerResponse, body: Buffer, etag: string): void {
  const headers = { "accept-ranges": "bytes", "content-type": "application/octet-stream", etag };
  const range = /^bytes=(\d+)-$/u.exec(request.headers.range ?? "");
  const start = Number(range?.[1] ?? 0);
  if (range && start >= body.length) {
    response.writeHead(416, { ...headers, "content-range": `bytes */${body.length}` }).end();
    return;
  }
  const part = body.subarray(start);
  response.writeHead(range ? 206 : 200, {
    ...headers,
    "content-length": part.length,
    ...(range ? { "content-range": `bytes ${start}-${body.length - 1}/${body.length}` } : {}),
  });
  response.end(request.method === "HEAD" ? undefined : part);
}

function hub(request: IncomingMessage, response: ServerResponse): void {
  const url = new URL(request.url ?? "/", serverUrl);
  const stored = /^\/cdn\/([0-9a-f]{64})$/u.exec(url.pathname);
  if (stored) {
    const sha256 = stored[1]!;
    const body = storage.get(sha256);
    if (!body) {
      response.writeHead(404).end();
      return;
    }
    if (request.method === "GET") storageRequests.push(`${sha256} ${request.headers.range ?? "-"}`);
    if (request.method === "GET" && cutNextGet.delete(sha256)) {
      // The connection drops mid-transfer: half the bytes arrive, then the socket closes (after a
      // pause, so the client has read them: a stream that errors drops the chunks it still queues).
      response.writeHead(200, { "content-length": body.length, etag: `"${sha256}"` });
      response.write(body.subarray(0, Math.floor(body.length / 2)), () =>
        setTimeout(() => response.destroy(), 250),
      );
      return;
    }
    sendBytes(request, response, body, `"${sha256}"`);
    return;
  }
  const resolve = /^\/(.+)\/resolve\/main\/(.+)$/u.exec(url.pathname);
  const key = resolve ? `${resolve[1]}/${decodeURIComponent(resolve[2]!)}` : "";
  const file = files.get(key);
  if (!file) {
    response
      .writeHead(404, { "x-error-code": "EntryNotFound", "x-error-message": "Entry not found" })
      .end(request.method === "HEAD" ? undefined : "Entry not found");
    return;
  }
  if (!file.lfs) {
    response.setHeader("x-repo-commit", REPO_COMMIT);
    sendBytes(request, response, file.body, `"${file.gitSha1}"`);
    return;
  }
  // An LFS file: a redirect to its storage, stating its SHA-256 and size.
  const stated = wrongStatement.has(key) ? sha256Of(Buffer.from("another file")) : file.sha256;
  const location = `${serverUrl}/cdn/${file.sha256}`;
  response.writeHead(302, {
    location,
    "x-linked-etag": `"${stated}"`,
    "x-linked-size": file.body.length,
    etag: `"${stated}"`,
    "x-repo-commit": REPO_COMMIT,
  });
  response.end(request.method === "HEAD" ? undefined : `Found. Redirecting to ${location}`);
}

beforeAll(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), "relay-cli-translation-"));
  server = createServer(hub);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  serverUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  for (const entry of [DE_EN, EN_DE, FR_EN]) await serveStandIn(entry);
  const tone = await writeToneColorStandIn(await mkdtemp(path.join(tmp, "source-")));
  await serveFiles(TONE.repo, tone.dir, TONE_FILES);
  closedPort = await freePort();
});
afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

const relay = (args: string[], dir: string): Promise<Run> =>
  runScript("src/cli/main.ts", ["models", ...args, "--dir", dir], { RELAY_MODELS_BASE_URL: serverUrl });
/** The `relay:`-prefixed lines are the CLI's error messages (other stderr lines are progress). */
const errorLines = (result: Run): string =>
  result.stderr
    .split("\n")
    .filter((line) => line.startsWith("relay:"))
    .join("\n");

async function freshDir(name: string): Promise<string> {
  const dir = path.join(tmp, name);
  await mkdir(dir, { recursive: true });
  return dir;
}

/** Every file under `dir`, relative to it. */
async function allFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((e) => e.isFile()).map((e) => path.relative(dir, path.join(e.parentPath, e.name)));
}

describe("relay models pull, verify and list: translation models from Hugging Face", () => {
  it("pulls a direction's model, checks the LFS files against the stated SHA-256, verifies and lists it; verify finds a file changed since", async () => {
    const dir = await freshDir("models-ok");
    const pulled = await relay(["pull", "mt", "de-en"], dir);
    expect(pulled.code, pulled.stderr).toBe(0);
    expect(pulled.stdout).toMatch(
      /pulled opus-mt-de-en: .*mt\/opus-mt-de-en \(.* MiB; 2 of 6 files checked against the SHA-256 Hugging Face states\)/,
    );
    const target = path.join(dir, "mt", DE_EN.name);
    for (const file of DE_EN.files)
      expect(await readFile(path.join(target, file))).toEqual(files.get(`${DE_EN.repo}/${file}`)!.body);
    expect(existsSync(path.join(dir, "mt", `.pull-${DE_EN.name}`))).toBe(false);

    const verified = await relay(["verify", DE_EN.name], dir);
    expect(verified.code, verified.stderr).toBe(0);
    expect(verified.stdout).toMatch(
      /opus-mt-de-en\s+ok \(.* MiB; 6 files match the SHA-256 recorded at pull, 2 of them stated by Hugging Face\)/,
    );

    const listed = await relay(["list"], dir);
    expect(listed.code, listed.stderr).toBe(0);
    const decoderSha = files.get(`${DE_EN.repo}/${DECODER}`)!.sha256;
    expect(listed.stdout).toMatch(
      new RegExp(
        `opus-mt-de-en\\s+de-en\\s+~101 MiB\\s+yes\\s+yes\\s+Apache-2.0\\s+${decoderSha.slice(0, 12)}…`,
      ),
    );
    expect(listed.stdout).toMatch(/opus-mt-en-de\s+en-de\s+~110 MiB\s+yes\s+no\s/);

    const pivot = await relay(["pull", "mt", "de-ja"], dir);
    expect(pivot.code).toBe(1);
    expect(errorLines(pivot)).toMatch(/de-ja .*goes through English/);
    expect(errorLines(pivot)).toContain("relay models pull mt de-en");
    expect(errorLines(pivot)).toContain("relay models pull mt en-ja");

    // A file changed by hand after the pull fails verification.
    await writeFile(path.join(target, "tokenizer_config.json"), "{}\n");
    const tampered = await relay(["verify"], dir);
    expect(tampered.code).toBe(1);
    expect(tampered.stdout).toMatch(
      /opus-mt-de-en\s+FAILED: checksum mismatch: tokenizer_config\.json has changed since it was pulled/,
    );
    expect(errorLines(tampered)).toContain("opus-mt-de-en failed verification");
  });

  it("refuses a file whose SHA-256 is not the one Hugging Face states, and keeps nothing of it", async () => {
    const dir = await freshDir("models-mismatch");
    wrongStatement.add(`${EN_DE.repo}/${DECODER}`);
    try {
      const result = await relay(["pull", "mt", "en-de"], dir);
      expect(result.code).toBe(1);
      expect(errorLines(result)).toMatch(
        /checksum mismatch for decoder_model_merged_quantized\.onnx: expected SHA-256 [0-9a-f]{64}, got [0-9a-f]{64}; the download was deleted/,
      );
    } finally {
      wrongStatement.clear();
    }
    expect(existsSync(path.join(dir, "mt", EN_DE.name))).toBe(false);
    const left = await allFiles(dir);
    expect(left.filter((file) => file.includes("decoder_model_merged_quantized"))).toEqual([]);
  });

  it("resumes an interrupted download with a Range request", async () => {
    const dir = await freshDir("models-resume");
    const decoder = files.get(`${FR_EN.repo}/${DECODER}`)!;
    cutNextGet.add(decoder.sha256);
    storageRequests = [];
    const first = await relay(["pull", "mt", "fr-en"], dir);
    expect(first.code).toBe(1);
    expect(errorLines(first)).toMatch(
      /download of decoder_model_merged_quantized\.onnx interrupted at .*run the same pull again to resume/,
    );
    expect(existsSync(path.join(dir, "mt", FR_EN.name))).toBe(false);

    const second = await relay(["pull", "mt", "fr-en"], dir);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toMatch(/pulled opus-mt-fr-en: .*resumed from .*; 2 of 6 files checked/);
    const decoderRequests = storageRequests.filter((request) => request.startsWith(decoder.sha256));
    expect(decoderRequests).toHaveLength(2);
    const resumedAt = Number(/ bytes=(\d+)-$/u.exec(decoderRequests[1]!)?.[1]);
    expect(resumedAt).toBeGreaterThan(0);
    expect(resumedAt).toBeLessThan(decoder.body.length);
    expect(sha256Of(await readFile(path.join(dir, "mt", FR_EN.name, DECODER)))).toBe(decoder.sha256);
  });

  it("offline, names the files and where to copy them; copied there by hand, the same pull finishes", async () => {
    const dir = await freshDir("models-by-hand");
    const offline = (args: string[]) =>
      runScript("src/cli/main.ts", ["models", ...args, "--dir", dir], {
        RELAY_MODELS_BASE_URL: `http://127.0.0.1:${closedPort}`,
      });
    const refused = await offline(["pull", "mt", "de-en"]);
    expect(refused.code).toBe(1);
    const staging = path.join(dir, "mt", `.pull-${DE_EN.name}`);
    expect(errorLines(refused)).toContain(
      `To install opus-mt-de-en by hand, download ${DE_EN.files.join(", ")} from ` +
        `http://127.0.0.1:${closedPort}/${DE_EN.repo}/resolve/main/ on a connected machine, copy them into ${staging}/`,
    );
    for (const file of DE_EN.files) {
      await mkdir(path.dirname(path.join(staging, file)), { recursive: true });
      await writeFile(path.join(staging, file), files.get(`${DE_EN.repo}/${file}`)!.body);
    }
    const finished = await offline(["pull", "mt", "de-en"]);
    expect(finished.code, finished.stderr).toBe(0);
    expect(finished.stdout).toMatch(/pulled opus-mt-de-en: .*0 of 6 files checked against the SHA-256/);
    const verified = await offline(["verify", DE_EN.name]);
    expect(verified.code, verified.stderr).toBe(0);
    expect(verified.stdout).toMatch(
      /opus-mt-de-en\s+ok .*6 files match the SHA-256 recorded at pull, 0 of them/,
    );
  });
});

describe("relay models pull, verify and list: the tone colour model from Hugging Face", () => {
  const CONVERTER = TONE.files.converter;

  it("pulls tone-color, checks its ONNX files against the stated SHA-256, verifies and lists it", async () => {
    const dir = await freshDir("tone-ok");
    const pulled = await relay(["pull", "tone-color"], dir);
    expect(pulled.code, pulled.stderr).toBe(0);
    expect(pulled.stdout).toMatch(
      /pulled tone-color: .*tone-color\/tone-color \(.* MiB; 2 of 3 files checked against the SHA-256 Hugging Face states\)/,
    );
    expect(pulled.stdout).toContain(`licence: ${TONE.licence}`);
    const target = path.join(dir, "tone-color", TONE.name);
    for (const file of TONE_FILES)
      expect(await readFile(path.join(target, file))).toEqual(files.get(`${TONE.repo}/${file}`)!.body);
    expect(existsSync(path.join(dir, "tone-color", `.pull-${TONE.name}`))).toBe(false);
    const record = JSON.parse(await readFile(path.join(target, ".relay-model.json"), "utf8")) as {
      sizes: Record<string, number>;
      checkedAgainstSource: string[];
    };
    expect(record.sizes[CONVERTER]).toBe(files.get(`${TONE.repo}/${CONVERTER}`)!.body.length);
    expect(record.checkedAgainstSource.sort()).toEqual([TONE.files.converter, TONE.files.extractor].sort());

    const verified = await relay(["verify", TONE.name], dir);
    expect(verified.code, verified.stderr).toBe(0);
    expect(verified.stdout).toMatch(
      /tone-color\s+ok \(.* MiB; 3 files match the SHA-256 recorded at pull, 2 of them stated by Hugging Face\)/,
    );

    const listed = await relay(["list"], dir);
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toContain("Tone colour (voice_type=clone;");
    expect(listed.stdout).toMatch(/tone-color\s+~125 MiB\s+yes\s+yes\s+MIT \(OpenVoice V2, MyShell\.ai\)/);
  });

  it("refuses a converter whose SHA-256 is not the one Hugging Face states, and keeps nothing of it", async () => {
    const dir = await freshDir("tone-mismatch");
    wrongStatement.add(`${TONE.repo}/${CONVERTER}`);
    try {
      const result = await relay(["pull", "tone-color"], dir);
      expect(result.code).toBe(1);
      expect(errorLines(result)).toMatch(
        /checksum mismatch for tone_clone_model\.onnx: expected SHA-256 [0-9a-f]{64}, got [0-9a-f]{64}; the download was deleted/,
      );
    } finally {
      wrongStatement.clear();
    }
    expect(existsSync(path.join(dir, "tone-color", TONE.name))).toBe(false);
    expect((await allFiles(dir)).filter((file) => file.includes("tone_clone_model"))).toEqual([]);
  });

  it("offline, names the files and where to copy them; copied there by hand, the same pull finishes (in process)", async () => {
    const dir = await freshDir("tone-by-hand");
    const offline = { baseUrl: `http://127.0.0.1:${closedPort}` };
    const staging = path.join(dir, "tone-color", `.pull-${TONE.name}`);
    await expect(pullToneColorModel(TONE, dir, offline)).rejects.toThrow(
      `To install tone-color by hand, download ${TONE_FILES.join(", ")} from ` +
        `http://127.0.0.1:${closedPort}/${TONE.repo}/resolve/main/ on a connected machine, copy them into ${staging}/`,
    );
    await mkdir(staging, { recursive: true });
    for (const file of TONE_FILES)
      await writeFile(path.join(staging, file), files.get(`${TONE.repo}/${file}`)!.body);
    const finished = await pullToneColorModel(TONE, dir, offline);
    expect(finished).toMatchObject({ dir: path.join(dir, "tone-color", TONE.name), checked: 0, files: 3 });
    expect(await verifyToneColorModel(TONE, dir)).toMatchObject({ ok: true });
  });
});
