import { createHash, randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, stat, truncate, writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createNetServer } from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  CATALOGUE,
  findModel,
  OFFICIAL_BASE_URL,
  type ModelEntry,
} from "../../src/engines/whisper-cpp/catalogue.js";
import {
  downloadModel,
  modelsDir,
  ModelError,
  modelUrl,
  type DownloadProgress,
  type DownloadTarget,
} from "../../src/engines/kit/models/download.js";
import { transferLimit } from "../../src/engines/kit/models/sizes.js";
import { resolveModel, verifyModel } from "../../src/engines/whisper-cpp/models.js";
import { freePort } from "../support/ports.js";

/** downloadModel against a local HTTP server serving a random fixture "model". */

const SIZE = 1024 * 1024 + 12_345;
const FIXTURE = randomBytes(SIZE);
const FIXTURE_SHA1 = createHash("sha1").update(FIXTURE).digest("hex");
const FIXTURE_SHA256 = createHash("sha256").update(FIXTURE).digest("hex");

const entry: ModelEntry = {
  name: "fixture",
  file: "ggml-fixture.bin",
  url: "https://example.invalid/ggml-fixture.bin",
  bytes: SIZE,
  sha1: FIXTURE_SHA1,
  languages: "multilingual",
  description: "test fixture",
};

/** How the server answers the next requests. */
type Mode =
  | { kind: "normal" }
  | { kind: "ignore-range" }
  /** Sends `bytes` of the body (Content-Length announcing all of it), then destroys the socket. */
  | { kind: "cut"; bytes: number }
  /** Sends `bytes` of the body, then nothing. */
  | { kind: "stall"; bytes: number }
  /** Accepts the request and never answers. */
  | { kind: "silent" }
  | { kind: "status"; status: number }
  /**
   * Streams random bytes until the client goes, or `upTo` bytes (a hostile mirror's endless body),
   * with a Content-Length when `contentLength` is given.
   */
  | { kind: "endless"; upTo: number; contentLength?: number }
  /** Sends a byte every 5 ms, for ever: too slow, never idle. */
  | { kind: "dribble" };

let server: Server;
let baseUrl: string;
let mode: Mode = { kind: "normal" };
let body: Buffer = FIXTURE;
let requests: { url: string; range: string | undefined }[] = [];
/** Bytes the last endless answer sent before the client went (or it reached its end). */
let endlessSent = 0;
let tmp: string;
let dir: string;

function serve(request: IncomingMessage, response: ServerResponse): void {
  requests.push({ url: request.url ?? "", range: request.headers.range });
  if (request.url !== `/${entry.file}`) {
    response.writeHead(404).end("not found");
    return;
  }
  if (mode.kind === "silent") return;
  if (mode.kind === "status") {
    response.writeHead(mode.status).end();
    return;
  }
  if (mode.kind === "endless") {
    const { upTo, contentLength } = mode;
    response.writeHead(200, contentLength === undefined ? {} : { "content-length": contentLength });
    endlessSent = 0;
    const chunk = randomBytes(64 * 1024);
    const pump = (): void => {
      while (!response.destroyed && endlessSent < upTo) {
        endlessSent += chunk.length;
        if (!response.write(chunk)) return void response.once("drain", pump);
      }
      if (!response.destroyed) response.end();
    };
    pump();
    return;
  }
  if (mode.kind === "dribble") {
    response.writeHead(200);
    const timer = setInterval(() => response.write("x"), 5);
    response.once("close", () => clearInterval(timer));
    return;
  }
  const range = /^bytes=(\d+)-$/u.exec(request.headers.range ?? "");
  if (range && mode.kind !== "ignore-range") {
    const start = Number(range[1]);
    if (start >= body.length) {
      response.writeHead(416, { "content-range": `bytes */${body.length}` }).end();
      return;
    }
    response.writeHead(206, {
      "content-length": body.length - start,
      "content-range": `bytes ${start}-${body.length - 1}/${body.length}`,
    });
    response.end(body.subarray(start));
    return;
  }
  response.writeHead(200, { "content-length": body.length, "content-type": "application/octet-stream" });
  if (mode.kind === "cut" || mode.kind === "stall") {
    const { bytes } = mode;
    const cut = mode.kind === "cut";
    // Destroyed once the first part has been flushed, so the client really received it.
    response.write(body.subarray(0, bytes), () => {
      if (cut) setTimeout(() => response.socket?.destroy(), 50);
    });
    return;
  }
  response.end(body);
}

beforeAll(async () => {
  server = createServer(serve);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  tmp = await mkdtemp(path.join(os.tmpdir(), "relay-models-"));
});
afterAll(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  if (tmp) await rm(tmp, { recursive: true, force: true });
});
let testIndex = 0;
beforeEach(async () => {
  mode = { kind: "normal" };
  body = FIXTURE;
  requests = [];
  dir = path.join(tmp, `models-${++testIndex}`);
});
afterEach(() => server.closeAllConnections());

const finalPath = () => path.join(dir, entry.file);
const partialPath = () => `${finalPath()}.partial`;

async function expectComplete(): Promise<void> {
  expect((await readFile(finalPath())).equals(FIXTURE)).toBe(true);
  expect(existsSync(partialPath())).toBe(false);
  expect((await verifyModel(entry, dir)).status).toBe("ok");
}

describe("downloadModel", () => {
  it("downloads the whole file, checks its SHA-1 and reports progress", async () => {
    const progress: DownloadProgress[] = [];
    const result = await downloadModel(entry, dir, { baseUrl, onProgress: (p) => progress.push(p) });
    expect(result).toEqual({
      path: finalPath(),
      bytes: SIZE,
      sha1: FIXTURE_SHA1,
      sha256: FIXTURE_SHA256,
      checksumVerified: true,
      resumedFrom: 0,
    });
    expect(requests).toEqual([{ url: `/${entry.file}`, range: undefined }]);
    expect(progress.at(-1)).toEqual({ received: SIZE, total: SIZE, resumedFrom: 0 });
    expect(progress.every((p, i) => i === 0 || p.received >= progress[i - 1]!.received)).toBe(true);
    await expectComplete();
  });

  it("resumes a .partial file with a Range request", async () => {
    const kept = 300_001;
    await mkdir(dir, { recursive: true });
    await writeFile(partialPath(), FIXTURE.subarray(0, kept));
    const progress: DownloadProgress[] = [];
    const result = await downloadModel(entry, dir, { baseUrl, onProgress: (p) => progress.push(p) });
    expect(requests).toEqual([{ url: `/${entry.file}`, range: `bytes=${kept}-` }]);
    expect(result.resumedFrom).toBe(kept);
    expect(result.sha1).toBe(FIXTURE_SHA1);
    // The kept prefix is hashed too: both checksums are the whole file's.
    expect(result.sha256).toBe(FIXTURE_SHA256);
    expect(progress[0]).toEqual({ received: kept, total: SIZE, resumedFrom: kept });
    await expectComplete();
  });

  it("starts over when the server ignores the range and sends the whole file (200)", async () => {
    mode = { kind: "ignore-range" };
    await mkdir(dir, { recursive: true });
    // Wrong bytes in the partial: they must not end up in the result.
    await writeFile(partialPath(), randomBytes(50_000));
    const result = await downloadModel(entry, dir, { baseUrl });
    expect(requests).toEqual([{ url: `/${entry.file}`, range: "bytes=50000-" }]);
    expect(result.resumedFrom).toBe(0);
    await expectComplete();
  });

  it("finishes a .partial that already holds the whole file (416 to the range request)", async () => {
    await mkdir(dir, { recursive: true });
    await writeFile(partialPath(), FIXTURE);
    const result = await downloadModel(entry, dir, { baseUrl });
    expect(requests.map((r) => r.range)).toEqual([`bytes=${SIZE}-`]);
    expect(result.resumedFrom).toBe(SIZE);
    await expectComplete();
  });

  it("restarts when a .partial is longer than the file: at once when its size is published, else after a 416", async () => {
    await mkdir(dir, { recursive: true });
    await writeFile(partialPath(), Buffer.concat([FIXTURE, Buffer.from("junk")]));
    await downloadModel(entry, dir, { baseUrl });
    expect(requests.map((r) => r.range)).toEqual([undefined]);
    await expectComplete();

    const unpublished: ModelEntry = { ...entry, sha1: undefined, bytes: undefined };
    await rm(finalPath());
    await writeFile(partialPath(), Buffer.concat([FIXTURE, Buffer.from("junk")]));
    requests = [];
    await downloadModel(unpublished, dir, { baseUrl });
    expect(requests.map((r) => r.range)).toEqual([`bytes=${SIZE + 4}-`, undefined]);
    await expectComplete();
  });

  it("deletes a download whose checksum does not match and names both checksums", async () => {
    body = Buffer.from(FIXTURE);
    body[1000] = body[1000]! ^ 0xff;
    const actual = createHash("sha1").update(body).digest("hex");
    const error = await downloadModel(entry, dir, { baseUrl }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelError);
    expect((error as Error).message).toMatch(
      new RegExp(
        `^checksum mismatch for ggml-fixture\\.bin: expected SHA-1 ${FIXTURE_SHA1}, got ${actual}`,
        "u",
      ),
    );
    expect(existsSync(finalPath())).toBe(false);
    expect(existsSync(partialPath())).toBe(false);
  });

  it("keeps the .partial of an interrupted transfer and completes it on the next call", async () => {
    mode = { kind: "cut", bytes: 400_000 };
    const error = await downloadModel(entry, dir, { baseUrl }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelError);
    expect((error as Error).message).toMatch(
      /^download of ggml-fixture\.bin interrupted at .* MiB of 1\.0 MiB: .+; kept .*ggml-fixture\.bin\.partial: run the same pull again to resume$/u,
    );
    expect(existsSync(finalPath())).toBe(false);
    const kept = (await stat(partialPath())).size;
    expect(kept).toBeGreaterThan(0);
    expect(kept).toBeLessThanOrEqual(400_000);

    mode = { kind: "normal" };
    requests = [];
    const result = await downloadModel(entry, dir, { baseUrl });
    expect(requests.map((r) => r.range)).toEqual([`bytes=${kept}-`]);
    expect(result.resumedFrom).toBe(kept);
    await expectComplete();
  });

  it("gives up on a stalled transfer after the idle timeout, keeping the .partial", async () => {
    mode = { kind: "stall", bytes: 100_000 };
    const started = Date.now();
    const error = await downloadModel(entry, dir, { baseUrl, idleTimeoutMs: 300 }).catch((e: unknown) => e);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect((error as Error).message).toMatch(/interrupted at .*: no data for 0\.3 s; kept /u);
    expect((await stat(partialPath())).size).toBe(100_000);
  });

  it("reports an unreachable host (connection refused) with where to put the file by hand", async () => {
    const port = await freePort();
    const started = Date.now();
    const error = await downloadModel(entry, dir, { baseUrl: `http://127.0.0.1:${port}` }).catch(
      (e: unknown) => e,
    );
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(error).toBeInstanceOf(ModelError);
    const message = (error as Error).message;
    expect(message).toMatch(
      new RegExp(`^cannot reach 127\\.0\\.0\\.1:${port}: connection refused \\(ECONNREFUSED\\)`, "u"),
    );
    expect(message).toContain(`download ${entry.url} on a connected machine and copy it to ${finalPath()}`);
    expect(message).toContain("relay models verify fixture");
    expect(existsSync(partialPath())).toBe(false);
  });

  it("reports a host name that does not resolve (offline or not) as unreachable", async () => {
    const error = await downloadModel(entry, dir, {
      baseUrl: "http://relay-models-test.invalid",
      connectTimeoutMs: 5_000,
    }).catch((e: unknown) => e);
    expect((error as Error).message).toMatch(
      /^cannot reach relay-models-test\.invalid: (DNS lookup failed \((ENOTFOUND|EAI_AGAIN)\)|no response within 5 s)\. Is this machine offline\? To install fixture by hand, /u,
    );
  });

  it("reports a server that never answers as unreachable after the connect timeout", async () => {
    mode = { kind: "silent" };
    const error = await downloadModel(entry, dir, { baseUrl, connectTimeoutMs: 300 }).catch(
      (e: unknown) => e,
    );
    expect((error as Error).message).toMatch(/^cannot reach 127\.0\.0\.1:\d+: no response within 0\.3 s\./u);
  });

  it("reports an HTTP error with its status and URL", async () => {
    mode = { kind: "status", status: 503 };
    const error = await downloadModel(entry, dir, { baseUrl }).catch((e: unknown) => e);
    expect((error as Error).message).toBe(
      `download of ggml-fixture.bin failed: HTTP 503 Service Unavailable from ${baseUrl}/ggml-fixture.bin`,
    );
  });

  it("stops when the signal is aborted", async () => {
    mode = { kind: "stall", bytes: 100_000 };
    const controller = new AbortController();
    const download = downloadModel(entry, dir, {
      baseUrl,
      signal: controller.signal,
      onProgress: (p) => {
        if (p.received >= 100_000) controller.abort();
      },
    });
    await expect(download).rejects.toThrow(/interrupted at .*: cancelled; kept /u);
    expect((await stat(partialPath())).size).toBe(100_000);
  });

  it("accepts a download without a published checksum, saying so", async () => {
    const unpublished: ModelEntry = { ...entry, sha1: undefined, bytes: undefined };
    const result = await downloadModel(unpublished, dir, { baseUrl });
    expect(result.checksumVerified).toBe(false);
    expect(result.sha1).toBe(FIXTURE_SHA1);
    const check = await verifyModel(unpublished, dir);
    expect(check).toMatchObject({ status: "no-checksum", ok: true });
    expect(check.message).toMatch(/^no published checksum \(1\.0 MiB, SHA-1 [0-9a-f]{40}\)$/u);
  });

  it("uses a fetch implementation it is given", async () => {
    const seen: string[] = [];
    const fetchImpl: typeof fetch = (input, init) => {
      seen.push(String(input));
      return fetch(input, init);
    };
    await downloadModel(entry, dir, { baseUrl: `${baseUrl}/`, fetchImpl });
    expect(seen).toEqual([`${baseUrl}/ggml-fixture.bin`]);
    await expectComplete();
  });
});

describe("downloadModel from a hostile mirror: bounded while streaming, in time, and on disk", () => {
  const MiB = 1024 * 1024;
  const expectNothingLeft = () => {
    expect(existsSync(finalPath())).toBe(false);
    expect(existsSync(partialPath())).toBe(false);
  };
  const failure = (promise: Promise<unknown>) =>
    promise.then(
      () => new Error("no error"),
      (e: unknown) => e,
    );

  it("stops at the published size while the body streams (a HEAD said 500 bytes, the body goes on)", async () => {
    mode = { kind: "endless", upTo: 64 * MiB };
    const stated: ModelEntry = { ...entry, bytes: 500, sha1: undefined };
    const error = await failure(downloadModel(stated, dir, { baseUrl }));
    expect(error).toBeInstanceOf(ModelError);
    expect((error as Error).message).toBe(
      `download of ggml-fixture.bin refused: ${new URL(baseUrl).host} sent more than the 500 bytes allowed ` +
        `(its published size); the download was deleted (${baseUrl}/ggml-fixture.bin)`,
    );
    expectNothingLeft();
    // The client went at once: the server got no further than its socket buffers let it.
    expect(endlessSent).toBeLessThan(16 * MiB);
  });

  it("refuses a Content-Length over the bound before writing a byte", async () => {
    mode = { kind: "endless", upTo: 64 * MiB, contentLength: 400 * MiB };
    const stated: ModelEntry = { ...entry, bytes: 500, sha1: undefined };
    const error = await failure(downloadModel(stated, dir, { baseUrl }));
    expect((error as Error).message).toMatch(
      /^download of ggml-fixture\.bin refused: 127\.0\.0\.1:\d+ states 419430400 bytes, more than the 500 bytes allowed \(its published size\); the download was deleted/u,
    );
    expectNothingLeft();
  });

  it("allows an approximate size half again plus 8 MiB, and deletes a .partial already past that", async () => {
    const about: DownloadTarget = { name: "archive", file: entry.file, url: entry.url, approxMiB: 1 };
    const limit = Math.ceil(1.5 * MiB + 8 * MiB);
    // An earlier pull's .partial, grown far past the model (sparse: no disk taken).
    await mkdir(dir, { recursive: true });
    await writeFile(partialPath(), "");
    await truncate(partialPath(), 400 * MiB);
    mode = { kind: "endless", upTo: 64 * MiB };
    const error = await failure(downloadModel(about, dir, { baseUrl }));
    expect((error as Error).message).toContain(
      `sent more than the ${limit} bytes allowed (about 1 MiB, plus 50 % and 8 MiB); the download was deleted`,
    );
    // Started over (no Range for the 400 MiB), and nothing kept.
    expect(requests.map((r) => r.range)).toEqual([undefined]);
    expectNothingLeft();
    // What is within the bound downloads.
    mode = { kind: "normal" };
    expect((await downloadModel(about, dir, { baseUrl })).bytes).toBe(SIZE);
  });

  it("bounds a file nothing states the size of (2 GiB) and a rounded size (5 % or 2 MiB)", () => {
    const bare: DownloadTarget = { name: "bare", file: "f", url: "https://example.invalid/f" };
    expect(transferLimit(bare).bytes).toBe(2 * 1024 * MiB);
    expect(transferLimit({ ...bare, sizeMiB: 142 }).bytes).toBe(Math.floor(142 * MiB * 1.05));
    expect(transferLimit({ ...bare, sizeMiB: 10 }).bytes).toBe(12 * MiB);
    expect(transferLimit({ ...bare, bytes: 10, maxBytes: 5 })).toEqual({
      bytes: 5,
      why: "what is left of the model's size",
    });
  });

  it("ends a pull at its overall deadline, keeping what came for a resume", async () => {
    mode = { kind: "stall", bytes: 100_000 };
    const error = await failure(downloadModel(entry, dir, { baseUrl, deadlineMs: 300 }));
    expect((error as Error).message).toMatch(
      /^download of ggml-fixture\.bin interrupted at 0\.1 MiB of 1\.0 MiB: not done within 0\.3 s; kept .*\.partial: run the same pull again to resume$/u,
    );
    expect((await stat(partialPath())).size).toBe(100_000);
  });

  it("ends a transfer that stays under the minimum rate, though bytes keep coming", async () => {
    mode = { kind: "dribble" };
    const error = await failure(
      downloadModel({ ...entry, sha1: undefined, bytes: undefined }, dir, {
        baseUrl,
        minBytesPerSecond: 1024 * 1024,
        rateWindowMs: 200,
      }),
    );
    expect((error as Error).message).toMatch(
      /^download of ggml-fixture\.bin interrupted at .* MiB: slower than 1024 KiB\/s for 0\.2 s; kept /u,
    );
  });

  it("checks free disk space for the file (and what the pull adds to it) before the transfer", async () => {
    const huge: ModelEntry = { ...entry, bytes: 2 ** 50, sha1: undefined };
    const error = await failure(downloadModel(huge, dir, { baseUrl }));
    expect((error as Error).message).toMatch(
      new RegExp(
        `^not enough disk space for ggml-fixture\\.bin: it needs 1073741824\\.0 MiB in ${dir.replaceAll(/[.\\/]/gu, "\\$&")}, [\\d.]+ MiB are free$`,
        "u",
      ),
    );
    expectNothingLeft();
    const unpacked = await failure(downloadModel(entry, dir, { baseUrl, extraSpace: 2 ** 50 }));
    expect((unpacked as Error).message).toMatch(
      /^not enough disk space for ggml-fixture\.bin: it needs 1073741825\.0 MiB/u,
    );
    expectNothingLeft();
  });

  it("quotes a mirror's reason phrase as plain text", async () => {
    // Node's own server refuses to write control characters in a status line; fetch reads them.
    const raw = createNetServer((socket) =>
      socket.once("data", () =>
        socket.end(
          Buffer.concat([
            Buffer.from("HTTP/1.1 502 Bad\u001b]0;pwned\u0007 Gateway"),
            Buffer.from([0x9b]),
            Buffer.from("2J\r\ncontent-length: 0\r\n\r\n"),
          ]),
        ),
      ),
    );
    await new Promise<void>((resolve) => raw.listen(0, "127.0.0.1", resolve));
    const rawUrl = `http://127.0.0.1:${(raw.address() as { port: number }).port}`;
    try {
      const error = await failure(downloadModel(entry, dir, { baseUrl: rawUrl }));
      expect((error as Error).message).toBe(
        `download of ggml-fixture.bin failed: HTTP 502 Bad ]0;pwned Gateway\ufffd2J from ${rawUrl}/ggml-fixture.bin`,
      );
    } finally {
      raw.close();
    }
  });
});

describe("verifyModel", () => {
  it("tells missing, wrong-size, wrong-checksum and good files apart", async () => {
    await mkdir(dir, { recursive: true });
    expect(await verifyModel(entry, dir)).toMatchObject({ status: "missing", ok: false });
    await writeFile(partialPath(), FIXTURE.subarray(0, 10));
    expect((await verifyModel(entry, dir)).message).toMatch(/an interrupted download .* is waiting/u);

    await writeFile(finalPath(), FIXTURE.subarray(0, SIZE - 1));
    expect(await verifyModel(entry, dir)).toMatchObject({ status: "size-mismatch", ok: false });

    const corrupt = Buffer.from(FIXTURE);
    corrupt[0] = corrupt[0]! ^ 1;
    await writeFile(finalPath(), corrupt);
    const bad = await verifyModel(entry, dir);
    expect(bad).toMatchObject({ status: "checksum-mismatch", ok: false });
    expect(bad.message).toContain(`expected SHA-1 ${FIXTURE_SHA1}, got ${bad.sha1}`);

    await writeFile(finalPath(), FIXTURE);
    expect(await verifyModel(entry, dir)).toMatchObject({ status: "ok", ok: true, sha1: FIXTURE_SHA1 });
  });

  it("checks a catalogue model's size against upstream's rounded size before hashing", async () => {
    const tiny = findModel("tiny")!;
    await mkdir(dir, { recursive: true });
    await writeFile(path.join(dir, tiny.file), FIXTURE);
    const result = await verifyModel(tiny, dir);
    expect(result).toMatchObject({ status: "size-mismatch", ok: false });
    expect(result.message).toMatch(/is 1\.0 MiB, upstream states 75 MiB/u);
    expect(result.sha1).toBeUndefined();
  });
});

describe("catalogue", () => {
  it("has the official whisper.cpp URL and file name for every model", () => {
    for (const model of CATALOGUE) {
      expect(model.file).toBe(`ggml-${model.name}.bin`);
      expect(model.url).toBe(`${OFFICIAL_BASE_URL}/ggml-${model.name}.bin`);
      expect(model.url).toMatch(/^https:\/\/huggingface\.co\/ggerganov\/whisper\.cpp\/resolve\/main\//u);
      expect(model.languages).toBe(model.name.includes(".en") ? "en" : "multilingual");
      if (model.sha1 !== undefined) expect(model.sha1).toMatch(/^[0-9a-f]{40}$/u);
      expect(model.description.length).toBeGreaterThan(0);
      expect(modelUrl(model)).toBe(model.url);
    }
    expect(new Set(CATALOGUE.map((m) => m.name)).size).toBe(CATALOGUE.length);
    const names = CATALOGUE.map((m) => m.name);
    for (const name of ["tiny", "tiny.en", "base", "base.en", "small", "small.en", "large-v3-turbo"])
      expect(names).toContain(name);
    expect(names).toEqual(expect.arrayContaining(["tiny-q5_1", "base.en-q5_1", "large-v3-turbo-q8_0"]));
  });

  it("carries upstream's published SHA-1 (models/README.md) and none where upstream has none", () => {
    expect(findModel("tiny")?.sha1).toBe("bd577a113a864445d4c299885e0cb97d4ba92b5f");
    expect(findModel("large-v3-turbo-q5_0")?.sha1).toBe("e050f7970618a659205450ad97eb95a18d69c9ee");
    expect(findModel("tiny-q5_1")?.sha1).toBeUndefined();
    expect(findModel("large-v3-turbo-q8_0")?.sha1).toBeUndefined();
  });
});

describe("modelsDir and resolveModel", () => {
  it("uses MODELS_DIR, else DATA_DIR/models", () => {
    expect(modelsDir({ MODELS_DIR: "/srv/m" })).toBe("/srv/m");
    expect(modelsDir({ DATA_DIR: "/srv/data", MODELS_DIR: "" })).toBe("/srv/data/models");
    expect(modelsDir({})).toMatch(/[/\\]data[/\\]models$/u);
  });

  it("maps a pulled catalogue name to its file, and explains how to pull one that is not", async () => {
    await mkdir(dir, { recursive: true });
    expect(() => resolveModel("base.en", dir)).toThrow(
      `model "base.en" is not pulled (no ${path.join(dir, "ggml-base.en.bin")}): run \`relay models pull base.en\``,
    );
    await writeFile(path.join(dir, "ggml-base.en.bin"), "x");
    expect(resolveModel("base.en", dir)).toBe(path.join(dir, "ggml-base.en.bin"));
  });

  it("accepts an explicit file path, or a bare file name in the models directory", async () => {
    await mkdir(dir, { recursive: true });
    const custom = path.join(dir, "ggml-medium.bin");
    await writeFile(custom, "x");
    expect(resolveModel(custom, tmp)).toBe(custom);
    expect(resolveModel("ggml-medium.bin", dir)).toBe(custom);
    expect(() => resolveModel("medium", dir)).toThrow(/unknown model "medium": not a catalogue name/u);
    expect(() => resolveModel(path.join(dir, "nope.bin"), dir)).toThrow(ModelError);
  });
});
