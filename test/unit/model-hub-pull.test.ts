/**
 * kit/models/hugging-face.ts's pull against a mirror in Hugging Face's layout that lies: a local
 * server whose `resolve` answers state one size and whose storage sends another, states sizes far
 * beyond the model's, never answers, or serves a configuration quoting terminal escapes. Each pull
 * stops with a one-line message, keeps nothing it refused, and prints nothing raw.
 */
import { createHash, randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ModelError } from "../../src/engines/kit/models/download.js";
import { hubStagingDir, pullHubModel, type HubModel } from "../../src/engines/kit/models/hugging-face.js";

const MiB = 1024 * 1024;
const REPO = "example/model";
const CONFIG = Buffer.from('{"model_type":"marian"}\n');
const WEIGHTS = randomBytes(200_000);
const WEIGHTS_SHA256 = createHash("sha256").update(WEIGHTS).digest("hex");

/** How the mirror answers for model.onnx. */
interface Lies {
  /** X-Linked-Size of the resolve answer (default the true size). */
  statedSize?: number;
  /** The storage streams this many bytes instead of the file (and no Content-Length). */
  streams?: number;
  /** The resolve answer never comes. */
  silent?: boolean;
  /** config.json's bytes. */
  config?: Buffer;
}

let server: Server;
let base: string;
let lies: Lies = {};
let streamed = 0;
let tmp: string;
let cases = 0;

function serve(request: IncomingMessage, response: ServerResponse): void {
  const url = request.url ?? "";
  if (url === `/${REPO}/resolve/main/config.json`) {
    const body = lies.config ?? CONFIG;
    response.writeHead(200, { "content-length": body.length });
    response.end(request.method === "HEAD" ? undefined : body);
    return;
  }
  if (url === `/${REPO}/resolve/main/model.onnx`) {
    if (lies.silent) return;
    response
      .writeHead(302, {
        location: `${base}/cdn/${WEIGHTS_SHA256}`,
        "x-linked-etag": `"${WEIGHTS_SHA256}"`,
        "x-linked-size": lies.statedSize ?? WEIGHTS.length,
      })
      .end();
    return;
  }
  if (url === `/cdn/${WEIGHTS_SHA256}`) {
    if (lies.streams === undefined) {
      response.writeHead(200, { "content-length": WEIGHTS.length }).end(WEIGHTS);
      return;
    }
    const upTo = lies.streams;
    response.writeHead(200);
    streamed = 0;
    const chunk = randomBytes(64 * 1024);
    const pump = (): void => {
      while (!response.destroyed && streamed < upTo) {
        streamed += chunk.length;
        if (!response.write(chunk)) return void response.once("drain", pump);
      }
      if (!response.destroyed) response.end();
    };
    pump();
    return;
  }
  response.writeHead(404).end();
}

beforeAll(async () => {
  server = createServer(serve);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  tmp = await mkdtemp(path.join(os.tmpdir(), "relay-hub-pull-"));
});
afterAll(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  if (tmp) await rm(tmp, { recursive: true, force: true });
});
beforeEach(() => {
  lies = {};
  server.closeAllConnections();
});

const model = (approxMiB?: number): HubModel => ({
  name: "example",
  repo: REPO,
  licence: "MIT",
  files: ["config.json", "model.onnx"],
  ...(approxMiB !== undefined ? { approxMiB } : {}),
});

/** The model's directory in a fresh models directory, and a check that reads config.json as a family's does. */
function plan() {
  const target = path.join(tmp, `models-${++cases}`, "example");
  return {
    target,
    check: async (dir: string) => {
      const { model_type: type } = JSON.parse(await readFile(path.join(dir, "config.json"), "utf8")) as {
        model_type: string;
      };
      // As transformers-js/model-check.ts words it: the file's value quoted as it is.
      return type === "marian" ? undefined : `config.json says model_type ${type}, not marian`;
    },
  };
}

const failure = (promise: Promise<unknown>) =>
  promise.then(
    () => new Error("no error"),
    (e: unknown) => e,
  );

describe("pullHubModel against a lying mirror", () => {
  it("pulls the model when the mirror tells the truth (sizes from X-Linked-Size and Content-Length)", async () => {
    const steps = plan();
    const result = await pullHubModel(model(1), steps, { baseUrl: base });
    expect(result).toMatchObject({ files: 2, checked: 1, bytes: CONFIG.length + WEIGHTS.length });
  });

  it("stops the storage's body at the size the resolve answer stated, keeping nothing of it", async () => {
    lies = { statedSize: 500, streams: 64 * MiB };
    const steps = plan();
    const error = await failure(pullHubModel(model(), steps, { baseUrl: base }));
    expect(error).toBeInstanceOf(ModelError);
    expect((error as Error).message).toMatch(
      /^download of model\.onnx refused: 127\.0\.0\.1:\d+ sent more than the 500 bytes allowed \(its published size\); the download was deleted/u,
    );
    expect(streamed).toBeLessThan(16 * MiB);
    expect(existsSync(hubStagingDir(steps.target))).toBe(false);
    expect(existsSync(steps.target)).toBe(false);
  });

  it("refuses a stated size beyond the whole model's bound before downloading it", async () => {
    lies = { statedSize: 1024 * MiB };
    const steps = plan();
    const error = await failure(pullHubModel(model(1), steps, { baseUrl: base }));
    const limit = Math.ceil(1.5 * MiB + 8 * MiB);
    expect((error as Error).message).toBe(
      `example: ${base} states model.onnx is ${1024 * MiB} bytes, more than the ${limit - CONFIG.length} bytes ` +
        `left of the ${limit} the model may take (about 1 MiB, plus 50 % and 8 MiB); the pull's files were deleted`,
    );
    // config.json came from the same source: it goes too.
    expect(existsSync(hubStagingDir(steps.target))).toBe(false);
  });

  it("bounds a file the mirror states no size for by what is left of the model's", async () => {
    lies = { statedSize: Number.NaN, streams: 64 * MiB };
    const error = await failure(pullHubModel(model(1), plan(), { baseUrl: base }));
    expect((error as Error).message).toMatch(
      /^download of model\.onnx refused: 127\.0\.0\.1:\d+ sent more than the \d+ bytes allowed \(what is left of the model's size\)/u,
    );
    expect(streamed).toBeLessThan(32 * MiB);
  });

  it("gives up on a resolve answer that never comes, as unreachable", async () => {
    lies = { silent: true };
    const error = await failure(pullHubModel(model(), plan(), { baseUrl: base, connectTimeoutMs: 200 }));
    expect((error as Error).message).toMatch(
      /^cannot reach 127\.0\.0\.1:\d+ \(no response within 0\.2 s\)\. Is this machine offline\? To install example by hand, /u,
    );
  });

  it("quotes a configuration's terminal escapes as plain text", async () => {
    lies = { config: Buffer.from('{"model_type":"\\u001b]0;pwned\\u0007bert\\u009b2J"}\n') };
    const steps = plan();
    const error = await failure(pullHubModel(model(), steps, { baseUrl: base }));
    expect((error as Error).message).toBe(
      "example: config.json says model_type ]0;pwned bert 2J, not marian; the download was deleted",
    );
    expect(existsSync(hubStagingDir(steps.target))).toBe(false);
  });
});
