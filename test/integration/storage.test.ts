import { randomBytes } from "node:crypto";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { createServer, request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import Fastify, { type FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { registerErrorHandling } from "../../src/api/errors.js";
import {
  InvalidObjectKeyError,
  ObjectNotFoundError,
  ObjectTooLargeError,
  createLocalObjectStore,
  createObjectStore,
  createS3ObjectStore,
  localStorageRoutes,
  type LocalObjectStore,
  type ObjectStore,
} from "../../src/storage/index.js";
import { freePort } from "../support/ports.js";
import { S3_CREDENTIALS, startS3 } from "../support/s3.js";

const MB = 1024 * 1024;

interface RawResponse {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
}

/**
 * A request over node:http, so tests control the exact path, framing (Content-Length or chunked)
 * and pacing; write errors after the response arrived (the server hung up on a refused body) are
 * expected and ignored.
 */
function rawRequest(
  url: string,
  options: {
    method: string;
    headers?: Record<string, string | number>;
    body?: Buffer | undefined;
    chunkBytes?: number;
    /** Sent verbatim instead of the URL's (WHATWG URL parsing would resolve "..").  */
    rawPath?: string;
  },
): Promise<RawResponse> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    let responded = false;
    const req = httpRequest(
      {
        host: target.hostname,
        port: target.port,
        method: options.method,
        path: options.rawPath ?? `${target.pathname}${target.search}`,
        headers: options.headers,
      },
      (res) => {
        responded = true;
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
        );
        res.on("error", reject);
      },
    );
    req.on("error", (error) => {
      if (!responded) reject(error);
    });
    void (async () => {
      const body = options.body ?? Buffer.alloc(0);
      const step = options.chunkBytes ?? 64 * 1024;
      for (let offset = 0; offset < body.length && !req.destroyed; offset += step) {
        if (!req.write(body.subarray(offset, offset + step))) {
          await new Promise<void>((done) => {
            const settle = () => {
              req.off("drain", settle);
              req.off("close", settle);
              done();
            };
            req.once("drain", settle);
            req.once("close", settle);
          });
        }
      }
      if (!req.destroyed) req.end();
    })();
  });
}

function json(response: RawResponse): unknown {
  return JSON.parse(response.body.toString("utf8"));
}

async function filesUnder(dir: string): Promise<string[]> {
  return (await readdir(dir, { recursive: true })).map(String);
}

async function tempFilesUnder(dir: string): Promise<string[]> {
  return (await filesUnder(dir)).filter((name) => name.endsWith(".tmp") || name.includes(".tmp."));
}

async function waitFor(condition: () => Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error("timed out waiting for a condition");
    await sleep(20);
  }
}

describe("local object store over HTTP", () => {
  let dir: string;
  let work: string;
  let app: FastifyInstance;
  let baseUrl: string;
  let store: LocalObjectStore;
  let clock = Date.now();

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "relay-storage-"));
    work = await mkdtemp(join(tmpdir(), "relay-storage-work-"));
    // The URL base must be known before listening, hence a port picked up front.
    const port = await freePort();
    baseUrl = `http://127.0.0.1:${port}`;
    store = createLocalObjectStore({
      dir,
      publicBaseUrl: baseUrl,
      secret: "test-secret-0123456789",
      now: () => clock,
    });
    // Same shape as the service: global 1 MiB body limit, JSON parsing, error bodies.
    app = Fastify({ logger: false, bodyLimit: 1 << 20, forceCloseConnections: true });
    registerErrorHandling(app);
    app.post("/echo", async (request) => ({ echoed: request.body }));
    await app.register(localStorageRoutes, { store });
    await app.listen({ port, host: "127.0.0.1" });
  });

  afterAll(async () => {
    await app.close();
    await store.close();
    await rm(dir, { recursive: true, force: true });
    await rm(work, { recursive: true, force: true });
  });

  const upload = (key: string, maxBytes: number, contentType = "audio/wav", expiresInSec = 600) =>
    store.presignUpload(key, { contentType, maxBytes, expiresInSec });

  it("round-trips a presigned PUT and GET byte-exactly, with HEAD and a download name", async () => {
    const data = randomBytes(3 * MB + 123);
    const put = await upload("uploads/round-trip", 10 * MB);
    expect(put.url.startsWith(`${baseUrl}/storage/uploads/round-trip?`)).toBe(true);
    expect(put.headers).toEqual({ "Content-Type": "audio/wav" });
    const putResponse = await fetch(put.url, { method: "PUT", headers: put.headers, body: data });
    expect(putResponse.status).toBe(200);
    expect(await putResponse.json()).toEqual({ key: "uploads/round-trip", bytes: data.length });
    expect(await store.exists("uploads/round-trip")).toBe(true);

    const get = await store.presignDownload("uploads/round-trip", { expiresInSec: 60 });
    const getResponse = await fetch(get.url);
    expect(getResponse.status).toBe(200);
    expect(getResponse.headers.get("content-type")).toBe("audio/wav");
    expect(getResponse.headers.get("content-length")).toBe(String(data.length));
    expect(getResponse.headers.get("content-disposition")).toBeNull();
    expect(getResponse.headers.get("x-content-type-options")).toBe("nosniff");
    expect(Buffer.from(await getResponse.arrayBuffer()).equals(data)).toBe(true);

    const head = await fetch(get.url, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(head.headers.get("content-length")).toBe(String(data.length));
    expect((await head.arrayBuffer()).byteLength).toBe(0);

    const named = await store.presignDownload("uploads/round-trip", {
      expiresInSec: 60,
      downloadName: "dub é.wav",
    });
    const namedResponse = await fetch(named.url);
    expect(namedResponse.headers.get("content-disposition")).toBe(
      `attachment; filename="dub _.wav"; filename*=UTF-8''dub%20%C3%A9.wav`,
    );
    expect(Buffer.from(await namedResponse.arrayBuffer()).equals(data)).toBe(true);
    expect(await tempFilesUnder(dir)).toEqual([]);
  });

  it("stores any content type raw (JSON is not parsed) while the app's own JSON parsing and limit still apply", async () => {
    const notJson = Buffer.from('{"unterminated": ');
    const put = await upload("uploads/raw.json", MB, "application/json");
    const response = await fetch(put.url, { method: "PUT", headers: put.headers, body: notJson });
    expect(response.status).toBe(200);
    const get = await fetch((await store.presignDownload("uploads/raw.json", { expiresInSec: 60 })).url);
    expect(get.headers.get("content-type")).toBe("application/json");
    expect(Buffer.from(await get.arrayBuffer()).equals(notJson)).toBe(true);

    const echo = await fetch(`${baseUrl}/echo`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ a: 1 }),
    });
    expect(await echo.json()).toEqual({ echoed: { a: 1 } });
    const tooBig = await fetch(`${baseUrl}/echo`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ a: "x".repeat(2 * MB) }),
    });
    expect(tooBig.status).toBe(413);
  });

  it("accepts an empty object", async () => {
    const put = await upload("uploads/empty", MB);
    const response = await rawRequest(put.url, {
      method: "PUT",
      headers: { ...put.headers, "content-length": 0 },
    });
    expect(response.status).toBe(200);
    const get = await fetch((await store.presignDownload("uploads/empty", { expiresInSec: 60 })).url);
    expect(get.status).toBe(200);
    expect((await get.arrayBuffer()).byteLength).toBe(0);
  });

  it("refuses a different Content-Type with 415 and stores nothing", async () => {
    const put = await upload("uploads/wrong-type", MB);
    for (const contentType of ["audio/mpeg", "audio/wav; charset=utf-8", "application/json", "not a type"]) {
      const response = await rawRequest(put.url, {
        method: "PUT",
        headers: { "content-type": contentType },
        body: randomBytes(1000),
      });
      expect(response.status).toBe(415);
      expect(json(response)).toMatchObject({ error: { code: "content_type_mismatch" } });
    }
    const missing = await rawRequest(put.url, { method: "PUT", body: randomBytes(1000) });
    expect(missing.status).toBe(415);
    expect(json(missing)).toMatchObject({ error: { code: "content_type_mismatch" } });
    expect(await store.exists("uploads/wrong-type")).toBe(false);
  });

  it("refuses expired URLs with 403 expired", async () => {
    const put = await upload("uploads/late", MB, "audio/wav", 60);
    const get = await store.presignDownload("uploads/round-trip", { expiresInSec: 60 });
    expect(put.expiresAt.getTime()).toBeLessThanOrEqual(clock + 60_000);
    clock += 61_000;
    try {
      const putResponse = await rawRequest(put.url, {
        method: "PUT",
        headers: put.headers,
        body: randomBytes(10),
      });
      expect(putResponse.status).toBe(403);
      expect(json(putResponse)).toEqual({ error: { code: "expired", message: expect.any(String) } });
      const getResponse = await fetch(get.url);
      expect(getResponse.status).toBe(403);
      expect(await getResponse.json()).toMatchObject({ error: { code: "expired" } });
    } finally {
      clock -= 61_000;
    }
    expect(await store.exists("uploads/late")).toBe(false);
  });

  it("refuses tampered URLs with 403 invalid_signature", async () => {
    const put = await upload("uploads/tamper", MB);
    const url = new URL(put.url);
    const variants: string[] = [];
    const withParam = (name: string, value: string | undefined) => {
      const copy = new URL(url);
      if (value === undefined) copy.searchParams.delete(name);
      else copy.searchParams.set(name, value);
      return copy.toString();
    };
    const sig = url.searchParams.get("sig") ?? "";
    variants.push(withParam("sig", `${sig.slice(0, -1)}${sig.endsWith("0") ? "1" : "0"}`));
    variants.push(withParam("sig", undefined));
    variants.push(withParam("sig", "zz"));
    variants.push(withParam("max", String(2 * MB)));
    variants.push(withParam("expires", String(Number(url.searchParams.get("expires")) + 3600)));
    variants.push(withParam("ct", "text/html"));
    variants.push(withParam("method", "GET"));
    variants.push(put.url.replace("/storage/uploads/tamper?", "/storage/uploads/other?"));
    for (const variant of variants) {
      const contentType = new URL(variant).searchParams.get("ct") ?? "audio/wav";
      const response = await rawRequest(variant, {
        method: "PUT",
        headers: { "content-type": contentType },
        body: randomBytes(10),
      });
      expect(response.status, variant).toBe(403);
      expect(json(response)).toMatchObject({ error: { code: "invalid_signature" } });
    }
    // A PUT URL does not allow GET, nor a GET URL PUT; a signed download name cannot be changed.
    expect((await fetch(put.url)).status).toBe(403);
    const get = await store.presignDownload("uploads/round-trip", {
      expiresInSec: 60,
      downloadName: "a.wav",
    });
    const renamed = new URL(get.url);
    renamed.searchParams.set("name", "b.html");
    expect((await fetch(renamed)).status).toBe(403);
    const noName = new URL(get.url);
    noName.searchParams.delete("name");
    expect((await fetch(noName)).status).toBe(403);
    const putWithGetUrl = await rawRequest(get.url, {
      method: "PUT",
      headers: { "content-type": "audio/wav" },
      body: randomBytes(10),
    });
    expect(putWithGetUrl.status).toBe(403);
    expect(await store.exists("uploads/tamper")).toBe(false);
    expect(await store.exists("uploads/other")).toBe(false);
  });

  it("refuses a body over the signed max with 413, with or without Content-Length, leaving nothing behind", async () => {
    const put = await upload("uploads/too-big", MB);
    const body = randomBytes(2 * MB);

    const declared = await rawRequest(put.url, {
      method: "PUT",
      headers: { ...put.headers, "content-length": body.length },
      body,
    });
    expect(declared.status).toBe(413);
    expect(json(declared)).toMatchObject({ error: { code: "too_large" } });

    const chunked = await rawRequest(put.url, {
      method: "PUT",
      headers: { ...put.headers, "transfer-encoding": "chunked" },
      body,
    });
    expect(chunked.status).toBe(413);
    expect(json(chunked)).toMatchObject({ error: { code: "too_large" } });

    // fetch streams a ReadableStream body chunked (no Content-Length).
    const streamed = await fetch(put.url, {
      method: "PUT",
      headers: put.headers,
      body: new Blob([body]).stream(),
      duplex: "half",
    } as RequestInit & { duplex: "half" });
    expect(streamed.status).toBe(413);

    // Exactly the max is fine.
    const exact = await rawRequest(put.url, {
      method: "PUT",
      headers: { ...put.headers, "transfer-encoding": "chunked" },
      body: body.subarray(0, MB),
    });
    expect(exact.status).toBe(200);
    expect(await store.exists("uploads/too-big")).toBe(true);
    await store.delete("uploads/too-big");

    await waitFor(async () => (await tempFilesUnder(dir)).length === 0);
    expect(await store.exists("uploads/too-big")).toBe(false);
    const get = await fetch((await store.presignDownload("uploads/too-big", { expiresInSec: 60 })).url);
    expect(get.status).toBe(404);
  });

  it("stores an upload once: a second PUT to the URL gets 412 already_uploaded and the first object stays", async () => {
    const original = randomBytes(1000);
    const first = await upload("uploads/keep", MB);
    expect((await fetch(first.url, { method: "PUT", headers: first.headers, body: original })).status).toBe(
      200,
    );
    for (const body of [randomBytes(1000), randomBytes(MB + 1)]) {
      const again = await rawRequest(first.url, {
        method: "PUT",
        headers: { ...first.headers, "transfer-encoding": "chunked" },
        body,
      });
      expect(again.status).toBe(412);
      expect(json(again)).toMatchObject({ error: { code: "already_uploaded" } });
    }
    const get = await fetch((await store.presignDownload("uploads/keep", { expiresInSec: 60 })).url);
    expect(Buffer.from(await get.arrayBuffer()).equals(original)).toBe(true);
  });

  it("stores exactly one of two PUTs racing on one upload URL", async () => {
    const put = await upload("uploads/race", 10 * MB);
    const bodies = [randomBytes(2 * MB), randomBytes(2 * MB)];
    const answers = await Promise.all(
      bodies.map((body) => rawRequest(put.url, { method: "PUT", headers: put.headers, body })),
    );
    expect(answers.map((a) => a.status).sort()).toEqual([200, 412]);
    const winner = bodies[answers.findIndex((a) => a.status === 200)]!;
    const get = await fetch((await store.presignDownload("uploads/race", { expiresInSec: 60 })).url);
    expect(Buffer.from(await get.arrayBuffer()).equals(winner)).toBe(true);
    await waitFor(async () => (await tempFilesUnder(dir)).length === 0);
  });

  it("leaves no object and no temp file when the client aborts mid-upload", async () => {
    const put = await upload("uploads/aborted", 10 * MB);
    const target = new URL(put.url);
    const req = httpRequest({
      host: target.hostname,
      port: target.port,
      method: "PUT",
      path: `${target.pathname}${target.search}`,
      headers: { ...put.headers, "content-length": 4 * MB },
    });
    req.on("error", () => undefined);
    req.write(randomBytes(MB));
    // Abort only once the server is demonstrably streaming into its temp file.
    await waitFor(async () => (await tempFilesUnder(dir)).length > 0);
    req.destroy();
    await waitFor(async () => (await tempFilesUnder(dir)).length === 0);
    expect(await store.exists("uploads/aborted")).toBe(false);
    expect((await filesUnder(dir)).filter((name) => name.includes("aborted"))).toEqual([]);
    // The server is still fine.
    const again = await fetch(put.url, { method: "PUT", headers: put.headers, body: randomBytes(100) });
    expect(again.status).toBe(200);
  });

  it("rejects path traversal and malformed keys", async () => {
    for (const key of [
      "../escape",
      "a/../../escape",
      "/etc/passwd",
      "a//b",
      "a/./b",
      ".hidden",
      "a\\b",
      "a b",
      "",
      "é",
    ]) {
      await expect(upload(key, MB), key).rejects.toBeInstanceOf(InvalidObjectKeyError);
      await expect(store.presignDownload(key, { expiresInSec: 60 })).rejects.toBeInstanceOf(
        InvalidObjectKeyError,
      );
      await expect(store.exists(key)).rejects.toBeInstanceOf(InvalidObjectKeyError);
      await expect(store.putFile(key, join(work, "x"), "audio/wav")).rejects.toBeInstanceOf(
        InvalidObjectKeyError,
      );
    }
    // Signed for a good key, replayed against traversal paths sent verbatim (not normalized).
    const put = await upload("uploads/x", MB);
    const query = new URL(put.url).search;
    const escapee = `escapee-${Date.now()}`;
    const paths = [
      `/storage/../${escapee}`,
      `/storage/uploads/../../${escapee}`,
      `/storage/%2e%2e/${escapee}`,
      `/storage/uploads/%2E%2E/%2E%2E/${escapee}`,
      `/storage/..%2f${escapee}`,
      `/storage/.x`,
    ];
    for (const path of paths) {
      for (const method of ["PUT", "GET"]) {
        const response = await rawRequest(baseUrl, {
          rawPath: `${path}${query}`,
          method,
          headers: method === "PUT" ? put.headers : {},
          body: method === "PUT" ? randomBytes(10) : undefined,
        });
        expect(response.status, `${method} ${path}`).toBe(400);
        expect(json(response)).toMatchObject({ error: { code: "invalid_key" } });
      }
    }
    const parent = join(dir, "..");
    expect((await readdir(parent)).filter((name) => name.includes(escapee))).toEqual([]);
    expect((await filesUnder(dir)).filter((name) => name.includes(escapee) || name.endsWith("x"))).toEqual(
      [],
    );
  });

  it("answers 409 when a key clashes with another key's directory, keeping the existing object", async () => {
    const source = join(work, "clash.bin");
    await writeFile(source, randomBytes(100));
    await store.putFile("clash/a", source, "audio/wav");
    for (const key of ["clash/a/b", "clash"]) {
      const put = await upload(key, MB);
      const response = await rawRequest(put.url, {
        method: "PUT",
        headers: put.headers,
        body: randomBytes(10),
      });
      expect(response.status, key).toBe(409);
      expect(json(response)).toMatchObject({ error: { code: "key_conflict" } });
      await expect(store.putFile(key, source, "audio/wav")).rejects.toThrow();
      expect(await store.exists(key)).toBe(false);
    }
    expect(await store.getToFile("clash/a", join(work, "clash-copy.bin"), MB)).toEqual({ bytes: 100 });
    expect(await tempFilesUnder(dir)).toEqual([]);
  });

  it("answers a missing key with a 404 error body", async () => {
    const get = await store.presignDownload("uploads/never-there", { expiresInSec: 60 });
    const response = await fetch(get.url);
    expect(response.status).toBe(404);
    expect(await response.json()).toEqual({ error: { code: "not_found", message: expect.any(String) } });
    // A key that is only a directory of other keys is missing too.
    const dirGet = await fetch((await store.presignDownload("uploads", { expiresInSec: 60 })).url);
    expect(dirGet.status).toBe(404);
  });

  it("putFile, getToFile, exists and delete work on files directly", async () => {
    const source = join(work, "source.mp3");
    const data = randomBytes(2 * MB + 7);
    await writeFile(source, data);
    await store.putFile("results/job-1/out.mp3", source, "audio/mpeg");
    expect(await store.exists("results/job-1/out.mp3")).toBe(true);
    expect((await readFile(join(dir, "results/job-1/out.mp3"))).equals(data)).toBe(true);

    const destination = join(work, "copy.mp3");
    expect(await store.getToFile("results/job-1/out.mp3", destination, 3 * MB)).toEqual({
      bytes: data.length,
    });
    expect((await readFile(destination)).equals(data)).toBe(true);

    // The content type travels with the object.
    const get = await fetch((await store.presignDownload("results/job-1/out.mp3", { expiresInSec: 60 })).url);
    expect(get.headers.get("content-type")).toBe("audio/mpeg");
    expect(Buffer.from(await get.arrayBuffer()).equals(data)).toBe(true);

    // Replacing swaps the whole object.
    const smaller = randomBytes(10);
    await writeFile(source, smaller);
    await store.putFile("results/job-1/out.mp3", source, "video/mp4");
    expect(await store.getToFile("results/job-1/out.mp3", destination, 3 * MB)).toEqual({ bytes: 10 });
    expect((await readFile(destination)).equals(smaller)).toBe(true);

    await store.delete("results/job-1/out.mp3");
    expect(await store.exists("results/job-1/out.mp3")).toBe(false);
    await store.delete("results/job-1/out.mp3");
    await expect(store.getToFile("results/job-1/out.mp3", destination, MB)).rejects.toBeInstanceOf(
      ObjectNotFoundError,
    );
    await expect(store.putFile("results/missing", join(work, "no-such-file"), "audio/wav")).rejects.toThrow();
    expect(await store.exists("results/missing")).toBe(false);
    expect(await tempFilesUnder(dir)).toEqual([]);
  });

  it("getToFile over maxBytes throws ObjectTooLargeError and leaves no partial file", async () => {
    const source = join(work, "big.bin");
    await writeFile(source, randomBytes(MB + 1));
    await store.putFile("results/big", source, "application/octet-stream");
    const destination = join(work, "big-copy.bin");
    const failure = store.getToFile("results/big", destination, MB);
    await expect(failure).rejects.toBeInstanceOf(ObjectTooLargeError);
    await expect(failure).rejects.toMatchObject({ maxBytes: MB });
    expect(
      (await readdir(work)).filter((name) => name.startsWith("big-copy") || name.includes(".big-copy")),
    ).toEqual([]);
  });

  it("createObjectStore picks the local store", () => {
    const local = createObjectStore({
      kind: "local",
      dir,
      publicBaseUrl: baseUrl,
      secret: "another-secret-0123456789",
    });
    expect(local.kind).toBe("local");
    expect(() => createObjectStore({ kind: "local", dir, publicBaseUrl: baseUrl, secret: "short" })).toThrow(
      RangeError,
    );
  });
});

describe("S3 object store against s3rver", () => {
  let work: string;
  let server: Awaited<ReturnType<typeof startS3>>;
  let store: ObjectStore;

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), "relay-s3-work-"));
    server = await startS3("test-bucket");
    store = createS3ObjectStore({
      bucket: "test-bucket",
      region: "us-east-1",
      endpoint: server.endpoint,
      ...S3_CREDENTIALS,
      forcePathStyle: true,
    });
  });

  afterAll(async () => {
    await store?.close();
    await server?.close();
    await rm(work, { recursive: true, force: true });
  });

  it("signs URLs for S3_PUBLIC_ENDPOINT when clients reach the store at another address", async () => {
    // localhost and 127.0.0.1 reach the same s3rver: the service talks to one, clients the other.
    const publicEndpoint = server.endpoint.replace("127.0.0.1", "localhost");
    const split = createS3ObjectStore({
      bucket: "test-bucket",
      region: "us-east-1",
      endpoint: server.endpoint,
      publicEndpoint,
      ...S3_CREDENTIALS,
      forcePathStyle: true,
    });
    try {
      const put = await split.presignUpload("uploads/public-endpoint", {
        contentType: "audio/wav",
        maxBytes: MB,
        expiresInSec: 60,
      });
      expect(put.url.startsWith(`${publicEndpoint}/test-bucket/`)).toBe(true);
      const data = randomBytes(1000);
      expect((await fetch(put.url, { method: "PUT", headers: put.headers, body: data })).status).toBe(200);
      // The service itself reads it through its own endpoint.
      expect(await split.exists("uploads/public-endpoint")).toBe(true);
      const get = await split.presignDownload("uploads/public-endpoint", { expiresInSec: 60 });
      expect(new URL(get.url).host).toBe(new URL(publicEndpoint).host);
      expect(Buffer.from(await (await fetch(get.url)).arrayBuffer()).equals(data)).toBe(true);
    } finally {
      await split.close();
    }
  });

  it("round-trips a presigned PUT and GET byte-exactly", async () => {
    const data = randomBytes(3 * MB + 5);
    const put = await store.presignUpload("uploads/s3-round-trip", {
      contentType: "audio/wav",
      maxBytes: 10 * MB,
      expiresInSec: 600,
    });
    const signed = new URL(put.url);
    // s3rver does not verify SigV4, so check what a real S3 would: Content-Type is in the signature,
    // and no checksum of an empty body is baked into the URL.
    // If-None-Match is signed too: the bucket refuses a PUT without it, and (conditional writes)
    // one onto an existing object with 412.
    expect(signed.searchParams.get("X-Amz-SignedHeaders")?.split(";")).toEqual(
      expect.arrayContaining(["content-type", "if-none-match"]),
    );
    expect([...signed.searchParams.keys()].filter((name) => name.toLowerCase().includes("checksum"))).toEqual(
      [],
    );
    expect(put.headers).toEqual({ "Content-Type": "audio/wav", "If-None-Match": "*" });
    expect(put.expiresAt.getTime()).toBeGreaterThan(Date.now() + 590_000);

    const putResponse = await fetch(put.url, { method: "PUT", headers: put.headers, body: data });
    expect(putResponse.status).toBe(200);
    expect(await store.exists("uploads/s3-round-trip")).toBe(true);

    const get = await store.presignDownload("uploads/s3-round-trip", { expiresInSec: 60 });
    const getResponse = await fetch(get.url);
    expect(getResponse.status).toBe(200);
    expect(getResponse.headers.get("content-type")).toBe("audio/wav");
    expect(Buffer.from(await getResponse.arrayBuffer()).equals(data)).toBe(true);

    const named = await store.presignDownload("uploads/s3-round-trip", {
      expiresInSec: 60,
      downloadName: "dub é.wav",
    });
    const namedResponse = await fetch(named.url);
    expect(namedResponse.status).toBe(200);
    expect(namedResponse.headers.get("content-disposition")).toBe(
      `attachment; filename="dub _.wav"; filename*=UTF-8''dub%20%C3%A9.wav`,
    );
    expect(Buffer.from(await namedResponse.arrayBuffer()).equals(data)).toBe(true);
  });

  it("without conditional uploads, signs Content-Type only", async () => {
    const plain = createS3ObjectStore({
      bucket: "test-bucket",
      region: "us-east-1",
      endpoint: server.endpoint,
      ...S3_CREDENTIALS,
      forcePathStyle: true,
      conditionalUploads: false,
    });
    try {
      const put = await plain.presignUpload("uploads/plain", {
        contentType: "audio/wav",
        maxBytes: MB,
        expiresInSec: 60,
      });
      expect(new URL(put.url).searchParams.get("X-Amz-SignedHeaders")?.split(";")).not.toContain(
        "if-none-match",
      );
      expect(put.headers).toEqual({ "Content-Type": "audio/wav" });
    } finally {
      await plain.close();
    }
  });

  it("merges its expiration rules into the bucket's lifecycle, keeping the operator's own", async () => {
    // s3rver has no lifecycle API: a stand-in bucket that keeps the configuration it is given.
    let configuration =
      '<?xml version="1.0" encoding="UTF-8"?><LifecycleConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">' +
      "<Rule><ID>operator-logs</ID><Filter><Prefix>logs/</Prefix></Filter><Status>Enabled</Status><Expiration><Days>90</Days></Expiration></Rule>" +
      "<Rule><ID>relay-results</ID><Filter><Prefix>results/</Prefix></Filter><Status>Enabled</Status><Expiration><Days>5</Days></Expiration></Rule>" +
      "</LifecycleConfiguration>";
    const requests: string[] = [];
    const bucket = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        requests.push(`${request.method} ${request.url}`);
        if (!request.url?.includes("lifecycle")) return response.writeHead(404).end();
        if (request.method === "PUT") configuration = Buffer.concat(chunks).toString("utf8");
        response
          .writeHead(200, { "content-type": "application/xml" })
          .end(request.method === "GET" ? configuration : "");
      });
    });
    await new Promise<void>((resolve) => bucket.listen(0, "127.0.0.1", resolve));
    const lifecycle = createS3ObjectStore({
      bucket: "lifecycle-bucket",
      region: "us-east-1",
      endpoint: `http://127.0.0.1:${(bucket.address() as { port: number }).port}`,
      ...S3_CREDENTIALS,
      forcePathStyle: true,
    });
    try {
      await lifecycle.ensureExpiryRules!([
        { id: "relay-uploads", prefix: "uploads/", days: 8 },
        { id: "relay-results", prefix: "results/", days: 31 },
      ]);
      expect(requests.map((r) => r.split(" ")[0])).toEqual(["GET", "PUT"]);
      const rules = [...configuration.matchAll(/<Rule>(.*?)<\/Rule>/gsu)].map((m) => m[1]!);
      expect(rules).toHaveLength(3);
      expect(rules.find((r) => r.includes("operator-logs"))).toContain("<Days>90</Days>");
      for (const [id, prefix, days] of [
        ["relay-uploads", "uploads/", 8],
        ["relay-results", "results/", 31],
      ] as const) {
        const rule = rules.find((r) => r.includes(`<ID>${id}</ID>`));
        expect(rule).toContain(`<Prefix>${prefix}</Prefix>`);
        expect(rule).toContain(`<Days>${days}</Days>`);
        expect(rule).toContain("<Status>Enabled</Status>");
      }
    } finally {
      await lifecycle.close();
      await new Promise((resolve) => bucket.close(resolve));
    }
  });

  it("putFile, getToFile, exists and delete", async () => {
    const source = join(work, "out.mp3");
    const data = randomBytes(2 * MB + 3);
    await writeFile(source, data);
    await store.putFile("results/job-1/out.mp3", source, "audio/mpeg");
    expect(await store.exists("results/job-1/out.mp3")).toBe(true);

    const destination = join(work, "copy.mp3");
    expect(await store.getToFile("results/job-1/out.mp3", destination, 3 * MB)).toEqual({
      bytes: data.length,
    });
    expect((await readFile(destination)).equals(data)).toBe(true);

    const get = await fetch((await store.presignDownload("results/job-1/out.mp3", { expiresInSec: 60 })).url);
    expect(get.headers.get("content-type")).toBe("audio/mpeg");

    await store.delete("results/job-1/out.mp3");
    expect(await store.exists("results/job-1/out.mp3")).toBe(false);
    await store.delete("results/job-1/out.mp3");
  });

  it("getToFile enforces maxBytes without leaving a partial file, and reports missing keys", async () => {
    const source = join(work, "big.bin");
    await writeFile(source, randomBytes(MB + 1));
    await store.putFile("results/big", source, "application/octet-stream");
    const destination = join(work, "big-copy.bin");
    await expect(store.getToFile("results/big", destination, MB)).rejects.toBeInstanceOf(ObjectTooLargeError);
    expect((await readdir(work)).filter((name) => name.includes("big-copy"))).toEqual([]);

    await expect(store.getToFile("results/nothing-here", destination, MB)).rejects.toBeInstanceOf(
      ObjectNotFoundError,
    );
    await expect(store.getToFile("results/nothing-here", destination, MB)).rejects.toMatchObject({
      key: "results/nothing-here",
    });
    expect(await store.exists("results/nothing-here")).toBe(false);
  });

  it("rejects malformed keys before talking to S3", async () => {
    await expect(
      store.presignUpload("../x", { contentType: "audio/wav", maxBytes: MB, expiresInSec: 60 }),
    ).rejects.toBeInstanceOf(InvalidObjectKeyError);
    await expect(store.exists("/abs")).rejects.toBeInstanceOf(InvalidObjectKeyError);
  });

  it("createObjectStore picks the S3 store", async () => {
    const s3 = createObjectStore({ kind: "s3", bucket: "test-bucket", region: "us-east-1" });
    expect(s3.kind).toBe("s3");
    await s3.close();
  });
});
