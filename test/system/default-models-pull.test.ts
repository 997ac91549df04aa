/**
 * What `npm run setup` does on a machine with no `bzip2` and no `tar`: `relay models pull` (the built
 * CLI, as setup runs it) of every default sherpa-onnx, translation and tone colour model, each from a local
 * stand-in of where upstream serves it (GitHub release downloads through their redirect, Hugging
 * Face's `resolve` with its stated SHA-256: test/support/upstream-archives.ts), the archives laid
 * out exactly as upstream's (test/fixtures/upstream-layouts.json) and holding stand-in models. Then
 * the real service starts on that models directory and serves one spoken session with them:
 * recognition, translation and speech. The stand-ins' words mean nothing: what is checked is that
 * every model was pulled, recorded, verified and loaded, and that each stage produced its output.
 */
import type { ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { lstat, mkdir, mkdtemp, readFile, readdir, rm, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readWavAsPcm16 } from "../../src/audio/wav.js";
import { createSession, RealtimeSocket, type ServerMessage } from "../../src/cli/recording-socket.js";
import { bpeVocabFromModel } from "../../src/engines/sherpa-onnx/bpe-vocab.js";
import { MANIFEST } from "../../src/engines/kit/models/model-dir.js";
import { MT_CATALOGUE } from "../../src/engines/transformers-js/catalogue.js";
import { TONE_COLOR_CATALOGUE } from "../../src/engines/openvoice/catalogue.js";
import { writeToneColorStandIn } from "../support/stand-in-models/tone-color.js";
import { SHERPA_CATALOGUE, type SherpaModelEntry } from "../../src/engines/sherpa-onnx/catalogue.js";
import { runScript, type Run } from "../support/run-script.js";
import { startServiceProcess } from "../support/service-process.js";
import { speakOneUtterance } from "../support/session-socket.js";
import { sharedMissing, sharedPath } from "../support/shared.js";
import {
  huggingFaceFiles,
  nodeOnlyBin,
  sherpaReleaseFile,
  startReleaseServer,
  whichOn,
  type ReleaseServer,
  type ServedFile,
  UPSTREAM_LAYOUTS,
} from "../support/upstream-archives.js";

const SHERPA_DEFAULTS = SHERPA_CATALOGUE.filter((entry) => entry.default);
const MT_DEFAULTS = MT_CATALOGUE.filter((entry) => entry.default);
const TONE_DEFAULTS = TONE_COLOR_CATALOGUE.filter((entry) => entry.default);
const SPEECH = "data/speech/librivox-pocketsphinx/goforward.wav";
const KEY = "default-models-key";

let tmp: string;
let modelsDir: string;
let server: ReleaseServer;
/** PATH for the CLI: a directory with `node` and nothing else. */
let nodeOnlyPath: string;
const children: ChildProcess[] = [];

beforeAll(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), "relay-default-models-"));
  modelsDir = path.join(tmp, "models");
  await mkdir(modelsDir);
  const work = path.join(tmp, "work");
  await mkdir(work);
  nodeOnlyPath = await nodeOnlyBin(tmp);
  const files: ServedFile[] = [];
  for (const entry of SHERPA_DEFAULTS) files.push(await sherpaReleaseFile(entry.name, work));
  for (const entry of MT_DEFAULTS) files.push(...(await huggingFaceFiles(entry.name, work)));
  for (const entry of TONE_DEFAULTS) {
    // The files as upstream's recorded layout names them (test/fixtures/upstream-layouts.json).
    const layout = UPSTREAM_LAYOUTS.huggingface[entry.name];
    if (layout?.repo !== entry.repo) throw new Error(`${entry.name}: no recorded layout of ${entry.repo}`);
    for (const file of Object.values(entry.files))
      if (!layout.files.includes(file))
        throw new Error(`${entry.name}: ${entry.repo} has no ${file} upstream`);
    const written = await writeToneColorStandIn(await mkdtemp(path.join(work, "hub-")));
    for (const [kind, file] of Object.entries(entry.files))
      files.push({
        url: `https://huggingface.co/${entry.repo}/resolve/main/${file}`,
        body: await readFile(written[kind as keyof typeof entry.files]),
      });
  }
  server = await startReleaseServer(files);
});
afterAll(async () => {
  for (const child of children) child.kill("SIGKILL");
  await server?.close();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

/** The built CLI with PATH holding only `node`, the stand-in upstream as its mirror. */
const relay = (...args: string[]): Promise<Run> =>
  runScript("src/cli/main.ts", ["models", ...args], {
    PATH: nodeOnlyPath,
    RELAY_MODELS_BASE_URL: server.url,
    MODELS_DIR: modelsDir,
  });

let pulls: Promise<Map<string, Run>> | undefined;

/** Pulls every default model in turn, as setup does (once; both tests need them). */
function pullDefaults(): Promise<Map<string, Run>> {
  pulls ??= (async () => {
    const results = new Map<string, Run>();
    for (const entry of [...SHERPA_DEFAULTS, ...MT_DEFAULTS, ...TONE_DEFAULTS])
      results.set(entry.name, await relay("pull", entry.name));
    return results;
  })();
  return pulls;
}

/** The files each manifest records sizes for, with the sizes on disk. */
async function recordedSizes(
  dir: string,
): Promise<{ recorded: Record<string, number>; actual: Record<string, number> }> {
  const manifest = JSON.parse(await readFile(path.join(dir, MANIFEST), "utf8")) as {
    files: Record<string, string>;
    sizes: Record<string, number>;
  };
  const actual: Record<string, number> = {};
  for (const file of Object.keys(manifest.files)) actual[file] = (await stat(path.join(dir, file))).size;
  return { recorded: manifest.sizes, actual };
}

const SKIP_SESSION = sharedMissing(SPEECH);

describe("the default models, pulled as setup pulls them, with no bzip2 or tar on PATH", () => {
  it("pulls every default sherpa-onnx and translation model through the stand-in upstream; each is recorded and verifies", async () => {
    expect(whichOn("node", nodeOnlyPath)).toBeDefined();
    expect(whichOn("bzip2", nodeOnlyPath)).toBeUndefined();
    expect(whichOn("tar", nodeOnlyPath)).toBeUndefined();
    // Every default the catalogues name (test/support/upstream-archives.ts refuses one it cannot build).
    expect(SHERPA_DEFAULTS.length).toBeGreaterThan(0);
    expect(MT_DEFAULTS.length).toBeGreaterThan(0);

    for (const [name, pulled] of await pullDefaults()) {
      expect(pulled.code, `${name}: ${pulled.stderr}`).toBe(0);
      expect(pulled.stdout).toContain(`pulled ${name}: `);
    }

    // Each download went through the mirror path, the release's redirect and its storage; each Hub
    // LFS file through the stated redirect to its CDN. Nothing asked for was missing.
    for (const entry of SHERPA_DEFAULTS) {
      const release = new URL(entry.url).pathname;
      expect(server.requests).toContainEqual(
        expect.objectContaining({ kind: "mirror", path: `/${entry.file}`, status: 302 }),
      );
      expect(server.requests).toContainEqual(
        expect.objectContaining({ kind: "release", path: release, status: 302 }),
      );
    }
    expect(server.requests.filter((r) => r.kind === "asset" && r.status === 200)).toHaveLength(
      SHERPA_DEFAULTS.length,
    );
    expect(
      server.requests.filter((r) => r.kind === "cdn" && r.method === "GET" && r.status === 200),
    ).toHaveLength(2 * (MT_DEFAULTS.length + TONE_DEFAULTS.length));
    expect(server.requests.filter((r) => r.status >= 400 || r.kind === "unknown")).toEqual([]);

    // Nothing is left beside the models: no archive, no partial download, no staging directory.
    const top = (await readdir(modelsDir)).sort();
    expect(top).toEqual([...SHERPA_DEFAULTS.map((entry) => entry.dir), "mt", "tone-color"].sort());
    expect(await readdir(path.join(modelsDir, "tone-color"))).toEqual(TONE_DEFAULTS.map((e) => e.name));
    expect((await readdir(path.join(modelsDir, "mt"))).sort()).toEqual(MT_DEFAULTS.map((e) => e.name).sort());

    // The zipformer's bpe.vocab, absent upstream, is derived from its bpe.model.
    const zipformer = SHERPA_DEFAULTS.find((entry) => entry.kind === "streaming-asr") as Extract<
      SherpaModelEntry,
      { kind: "streaming-asr" }
    >;
    const asrDir = path.join(modelsDir, zipformer.dir);
    const vocab = await readFile(path.join(asrDir, zipformer.asr.bpeVocab), "utf8");
    expect(vocab).toBe(bpeVocabFromModel(await readFile(path.join(asrDir, zipformer.asr.bpeModel))));
    // One line per token, in tokens.txt's order.
    const tokens = (await readFile(path.join(asrDir, zipformer.asr.tokens), "utf8")).trim().split("\n");
    expect(
      vocab
        .trim()
        .split("\n")
        .map((line) => line.split("\t")[0]),
    ).toEqual(tokens.map((line) => line.slice(0, line.lastIndexOf(" "))));
    // The archive's test_wavs and fp32 models are unpacked as they are (nothing but the loaded files is recorded).
    expect(existsSync(path.join(asrDir, "test_wavs", "0.wav"))).toBe(true);
    expect(existsSync(path.join(asrDir, "encoder-epoch-99-avg-1-chunk-16-left-128.onnx"))).toBe(true);

    // Every manifest records the size of every file it records a checksum of.
    for (const entry of SHERPA_DEFAULTS) {
      const { recorded, actual } = await recordedSizes(path.join(modelsDir, entry.dir));
      expect(recorded, entry.name).toEqual(actual);
      expect(Object.keys(recorded).length, entry.name).toBeGreaterThan(0);
    }
    expect(Object.keys((await recordedSizes(path.join(modelsDir, zipformer.dir))).recorded)).toContain(
      "bpe.vocab",
    );
    for (const entry of MT_DEFAULTS) {
      const { recorded, actual } = await recordedSizes(path.join(modelsDir, "mt", entry.name));
      expect(recorded, entry.name).toEqual(actual);
    }
    // Piper voices: their eSpeak NG data is a real directory of the model's own.
    for (const entry of SHERPA_DEFAULTS.filter((e) => e.kind === "tts")) {
      const data = await lstat(path.join(modelsDir, entry.dir, "espeak-ng-data"));
      expect(data.isDirectory()).toBe(true);
      expect(existsSync(path.join(modelsDir, entry.dir, "espeak-ng-data", "phontab"))).toBe(true);
    }

    const verified = await relay("verify");
    expect(verified.code, verified.stderr).toBe(0);
    for (const entry of [...SHERPA_DEFAULTS, ...MT_DEFAULTS, ...TONE_DEFAULTS])
      expect(verified.stdout).toMatch(new RegExp(`^${entry.name}\\s+ok \\(`, "mu"));

    // A second pull of a pulled model downloads nothing.
    const before = server.requests.length;
    const again = await relay("pull", SHERPA_DEFAULTS[0]!.name);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain("is already pulled");
    expect(server.requests.length).toBe(before);
  });

  it.skipIf(SKIP_SESSION)(
    "the service starts on those models and serves a spoken en→es session with them: transcript, translation, speech",
    async () => {
      for (const [name, pulled] of await pullDefaults())
        expect(pulled.code, `${name}: ${pulled.stderr}`).toBe(0);
      const service = await startServiceProcess("default-models", {
        API_KEYS: `${KEY}:100`,
        DATA_DIR: path.join(tmp, "data"),
        MODELS_DIR: modelsDir,
      });
      children.push(service.child);
      const health = (await (await fetch(`${service.baseUrl}/healthz`)).json()) as {
        status: string;
        engines: { kind: string; id: string; version?: string }[];
        unavailable_engines: unknown[];
        voice_clone: unknown;
      };
      expect(health.unavailable_engines).toEqual([]);
      expect(health.status).toBe("ok");
      const engine = (kind: string, id: string) => health.engines.find((e) => e.kind === kind && e.id === id);
      expect(engine("asr", "sherpa-onnx")?.version).toMatch(/streaming-zipformer-en\+punctuation$/u);
      expect(engine("mt", "transformers-js")).toBeDefined();
      expect(engine("tts", "sherpa-onnx")?.version).toMatch(
        /piper-en_US-libritts_r-medium\+piper-es_ES-sharvard-medium$/u,
      );
      expect(engine("speakers", "sherpa-onnx-speaker")).toBeDefined();
      expect(engine("tone-color", "openvoice")).toBeDefined();
      expect(health.voice_clone).toEqual({ mode: "tone-color", engine: "openvoice" });

      const speech = await readWavAsPcm16(sharedPath(SPEECH));
      const session = await createSession(service.baseUrl, KEY, {
        sourceLanguage: "en",
        targetLanguage: "es",
        audioOutputEnabled: "true",
      });
      const socket = await RealtimeSocket.connect(session.ws_url);
      await socket.waitFor((m) => m.type === "ready");
      await speakOneUtterance(socket, speech);
      const isFinal = (type: string) => (m: ServerMessage) => m.type === type && m.is_final === true;
      const translation = socket.messages.find(isFinal("translated_transcript"))!;
      expect(socket.audioFrames.length).toBeGreaterThan(0);
      socket.close();

      const original = socket.messages.find(isFinal("original_transcript"))!;
      expect(original.text).toEqual(expect.stringMatching(/\S/u));
      expect(translation.correlation_id).toBe(original.correlation_id);
      // The stand-in Opus-MT echoes its input with the target's marker: transformers.js translated it.
      expect(translation.text).toMatch(/\[es\]/u);
      const frames = socket.audioFrames;
      expect(frames.length).toBeGreaterThan(0);
      const samples = frames.flatMap((frame) => Array.from(frame));
      expect(samples.every((s) => Number.isFinite(s) && Math.abs(s) <= 1)).toBe(true);
      expect(samples.some((s) => s !== 0)).toBe(true);

      service.child.kill("SIGTERM");
      expect(await service.exited).toBe(0);
    },
    120_000,
  );
});
