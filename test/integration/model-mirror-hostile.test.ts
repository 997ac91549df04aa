/**
 * Pulls from a hostile mirror (`RELAY_MODELS_BASE_URL`), through the real pull code against the
 * stand-in of GitHub's release downloads and Hugging Face (test/support/upstream-archives.ts), with
 * upstream's layouts and one crafted file each: a zipformer archive whose `bpe.model` is 17 MiB of
 * empty pieces (under 1 kB of the archive), and models whose files quote terminal escapes (a speaker
 * model's metadata, a translation model's config.json). Each pull fails fast with a one-line plain
 * message and leaves nothing in the models directory; the service started next to what the old
 * pull left (the model's directory, its crafted bpe.model, no bpe.vocab) serves, and the next pull
 * from a good source replaces it. Nothing here uses the network.
 */
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, rename, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import onnxProto from "onnx-proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ModelError } from "../../src/engines/kit/models/download.js";
import { unpackTarBz2 } from "../../src/engines/kit/models/unpack.js";
import { findSherpaModelOf } from "../../src/engines/sherpa-onnx/catalogue.js";
import { pullSherpaModel } from "../../src/engines/sherpa-onnx/pull.js";
import { findMtModel } from "../../src/engines/transformers-js/catalogue.js";
import { pullMtModel } from "../../src/engines/transformers-js/pull.js";
import { injectApp } from "../support/app.js";
import {
  buildUpstreamArchive,
  buildUpstreamFile,
  huggingFaceFiles,
  startReleaseServer,
  type ReleaseServer,
} from "../support/upstream-archives.js";

// onnx-proto is CommonJS: its namespace is a property of the default export.
const { onnx } = onnxProto;

const ZIPFORMER = findSherpaModelOf("streaming-asr", "streaming-zipformer-en")!;
const SPEAKER = findSherpaModelOf("speaker", "speaker-campplus-en")!;
const EN_ES = findMtModel("opus-mt-en-es")!;
const MiB = 1024 * 1024;
/** Terminal escapes as a mirror would plant them: a title change, a bell, a C1 CSI clearing the screen. */
const ESCAPES = "\u001b]0;pwned\u0007x\u009b2J";
const controls = (text: string): string[] => [...text.matchAll(/[\p{Cc}\p{Cf}]/gu)].map((m) => m[0]);

let tmp: string;
let work: string;
let server: ReleaseServer;
let cases = 0;
/** The zipformer archive with a bpe.model of 17 MiB of empty pieces (each a tag and a zero length). */
let craftedArchive: Buffer;

beforeAll(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), "relay-hostile-mirror-"));
  work = path.join(tmp, "work");
  await mkdir(work);
  const pieces = Buffer.alloc(17 * MiB);
  for (let at = 0; at < pieces.length; at += 2) pieces[at] = 0x0a;
  craftedArchive = await buildUpstreamArchive(ZIPFORMER.name, work, { files: { "bpe.model": pieces } });
  server = await startReleaseServer([{ url: ZIPFORMER.url, body: craftedArchive }]);
});
afterAll(async () => {
  await server?.close();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

async function freshModelsDir(): Promise<string> {
  const dir = path.join(tmp, `models-${++cases}`);
  await mkdir(dir);
  return dir;
}

const failure = (promise: Promise<unknown>) =>
  promise.then(
    () => new Error("no error"),
    (e: unknown) => e,
  );

describe("a crafted bpe.model (issue 48: 256 MiB of empty pieces took 5.9 GiB and ended the pull)", () => {
  it("is refused before it is read, and nothing of the model stays in MODELS_DIR", async () => {
    const dir = await freshModelsDir();
    // What a pull that died while unpacking left: cleared by the next.
    await mkdir(path.join(dir, `.unpack-${ZIPFORMER.dir}-died`));
    await writeFile(path.join(dir, `.unpack-${ZIPFORMER.dir}-died`, "bpe.model"), "left");
    const error = await failure(pullSherpaModel(ZIPFORMER, dir, { baseUrl: server.url }));
    expect(error).toBeInstanceOf(ModelError);
    expect((error as Error).message).toBe(
      `${ZIPFORMER.name}: bpe.model: not a SentencePiece model (bpe.model): it is ${17 * MiB} bytes, ` +
        `more than the ${16 * MiB} a SentencePiece model may have; the download was deleted`,
    );
    // No model directory, archive, partial or staging.
    expect(await readdir(dir)).toEqual([]);
  });

  it("the service starts and serves next to what the old pull left; the next good pull replaces it", async () => {
    const dir = await freshModelsDir();
    // As the old pull left it: unpacked and renamed into place, bpe.vocab never written.
    const archive = path.join(work, "crafted.tar.bz2");
    await writeFile(archive, craftedArchive);
    const staging = await mkdtemp(path.join(work, "unpack-"));
    await unpackTarBz2(archive, staging);
    await rename(path.join(staging, ZIPFORMER.dir), path.join(dir, ZIPFORMER.dir));
    expect(existsSync(path.join(dir, ZIPFORMER.dir, ZIPFORMER.asr.bpeModel))).toBe(true);
    expect(existsSync(path.join(dir, ZIPFORMER.dir, ZIPFORMER.asr.bpeVocab))).toBe(false);

    const app = await injectApp({ MODELS_DIR: dir }, { ownEngines: true });
    try {
      const health = await app.inject("/healthz");
      expect(health.status).toBe(200);
      const body = (await health.json()) as { engines: { kind: string; id: string }[] };
      expect(body.engines.some((engine) => engine.kind === "asr")).toBe(true);
      // The leftover is not a pulled model: nothing loads it.
      expect(JSON.stringify(body)).not.toContain(ZIPFORMER.name);
    } finally {
      await app.close();
    }

    server.set({ url: ZIPFORMER.url, body: await buildUpstreamArchive(ZIPFORMER.name, work) });
    try {
      await pullSherpaModel(ZIPFORMER, dir, { baseUrl: server.url });
      expect(existsSync(path.join(dir, ZIPFORMER.dir, ZIPFORMER.asr.bpeVocab))).toBe(true);
      expect(await readdir(dir)).toEqual([ZIPFORMER.dir]);
    } finally {
      server.set({ url: ZIPFORMER.url, body: craftedArchive });
    }
  });
});

describe("what a mirror's files say reaches the terminal as plain text", () => {
  it("a speaker model's metadata (sherpa-onnx pull)", async () => {
    const model = onnx.ModelProto.decode(await buildUpstreamFile(SPEAKER.name, work));
    for (const entry of model.metadataProps) if (entry.key === "framework") entry.value = ESCAPES;
    server.set({ url: SPEAKER.url, body: onnx.ModelProto.encode(model).finish() });
    const dir = await freshModelsDir();
    const error = await failure(pullSherpaModel(SPEAKER, dir, { baseUrl: server.url }));
    const message = (error as Error).message;
    expect(message).toContain('sherpa-onnx cannot use framework " ]0;pwned x 2J"');
    expect(message).toMatch(/; the download was deleted \(https:\/\/github\.com\/.+\)$/u);
    expect(controls(message)).toEqual([]);
    expect(await readdir(dir)).toEqual([]);
  });

  it("a translation model's config.json (Hugging Face pull)", async () => {
    for (const file of await huggingFaceFiles(EN_ES.name, work)) {
      const hostile = file.url.endsWith("/config.json")
        ? Buffer.from(
            JSON.stringify({ ...JSON.parse(Buffer.from(file.body).toString("utf8")), model_type: ESCAPES }),
          )
        : file.body;
      server.set({ url: file.url, body: hostile });
    }
    const dir = await freshModelsDir();
    const error = await failure(pullMtModel(EN_ES, dir, { baseUrl: server.url }));
    expect((error as Error).message).toBe(
      `${EN_ES.name}: config.json says model_type ]0;pwned x 2J, not marian; the download was deleted`,
    );
    expect(await readdir(dir)).toEqual(["mt"]);
    expect(await readdir(path.join(dir, "mt"))).toEqual([]);
  });
});
