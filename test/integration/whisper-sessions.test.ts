import { copyFile, mkdir, mkdtemp, rm } from "node:fs/promises";
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readWavAsPcm16 } from "../../src/audio/wav.js";
import { createSession, RealtimeSocket } from "../../src/cli/recording-socket.js";
import { NATIVE_BUILD_PATH } from "../../src/engines/whisper-cpp/binding.js";
import type { WhisperCppEngine } from "../../src/engines/whisper-cpp/index.js";
import { makeTestVideo } from "../support/media.js";
import { dubbingClient } from "../support/dubbing-client.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";
import { sharedMissing, sharedPath } from "../support/shared.js";
import { finalizeAndWait } from "../support/session-socket.js";

/**
 * whisper.cpp behind the real server as the default recognizer, once the default model is in the
 * models directory. whisper.cpp's tiny test model stands in for `ggml-base.bin` (the file the
 * service looks for): the real tiny architecture with random weights, so it hears nothing and costs
 * a quarter of what base costs (whisper-cpp.test.ts loads the base test model itself). These tests
 * check the plumbing — which engines serve without any configuration, that auto and two-way
 * sessions and dubbing's `source_lang=auto` run through whisper's identification — and never
 * recognition quality (the stand-in OpenAI server tests, two-way.test.ts and auto-language.test.ts,
 * check what the sessions do with the languages identified).
 */
const MISSING =
  sharedMissing("models", "whisper-cpp-test", "for-tests-ggml-tiny.bin") ||
  sharedMissing("data", "speech", "librivox-pocketsphinx", "goforward.wav");
const NATIVE = existsSync(NATIVE_BUILD_PATH);

let server: TestServer;
let dir: string;
let whisper: WhisperCppEngine;
let goforward: Int16Array;

beforeAll(async () => {
  if (MISSING) return;
  dir = await mkdtemp(path.join(tmpdir(), "whisper-sessions-"));
  const models = path.join(dir, "models");
  await mkdir(models);
  await copyFile(
    sharedPath("models", "whisper-cpp-test", "for-tests-ggml-tiny.bin"),
    path.join(models, "ggml-base.bin"),
  );
  server = await startServer({ MODELS_DIR: models, DUBBING_WORKERS: "1" });
  whisper = server.services.registry.languageIdentifier() as WhisperCppEngine;
  goforward = await readWavAsPcm16(sharedPath("data", "speech", "librivox-pocketsphinx", "goforward.wav"));
});

afterAll(async () => {
  await server?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe.skipIf(MISSING)("whisper.cpp as the default recognizer", () => {
  it("serves first without configuration once the default model is there, with PocketSphinx behind it, and says how it runs", async () => {
    const languages = (await (await fetch(`${server.baseUrl}/v1/languages`)).json()) as {
      recognition: { language: string; engine: string }[];
      language_identification: string | null;
      engines: { kind: string; id: string; version: string; detail?: string }[];
    };
    expect(languages.language_identification).toBe("whisper-cpp");
    const engineOf = (language: string) => languages.recognition.find((r) => r.language === language)?.engine;
    expect(engineOf("de")).toBe("whisper-cpp");
    expect(engineOf("ja")).toBe("whisper-cpp");
    // The prebuilt fallback is too slow for live English: PocketSphinx keeps it there.
    expect(engineOf("en")).toBe(NATIVE ? "whisper-cpp" : "pocketsphinx");
    const asr = languages.engines.filter((e) => e.kind === "asr");
    expect(asr.map((e) => e.id)).toEqual(
      NATIVE ? ["whisper-cpp", "pocketsphinx"] : ["pocketsphinx", "whisper-cpp"],
    );
    const entry = asr.find((e) => e.id === "whisper-cpp")!;
    expect(entry.version).toMatch(/-(native|prebuilt)\+ggml-base\.bin$/u);
    expect(entry.detail).toMatch(NATIVE ? /^built for this CPU/u : /without SIMD/u);

    const health = (await (await fetch(`${server.baseUrl}/healthz`)).json()) as {
      engines: { id: string; detail?: string }[];
    };
    expect(health.engines.find((e) => e.id === "whisper-cpp")?.detail).toBe(entry.detail);
  });

  it.each([
    [
      "sourceLanguage=auto with languageHints",
      { sourceLanguage: "auto", modelName: "relay-2", languageHints: "en,fr" },
    ],
    ["twoWay", { sourceLanguage: "en", twoWay: "true" }],
  ])(
    "runs a %s session through whisper's identification",
    async (_name, params) => {
      const session = await createSession(server.baseUrl, API_KEY, {
        targetLanguage: "es",
        audioOutputEnabled: "false",
        ...params,
      });
      const socket = await RealtimeSocket.connect(session.ws_url);
      await socket.waitFor((m) => m.type === "ready");
      expect(session.model_version_id).toContain("whisper-cpp@");
      const before = whisper.stats().started.final;
      await socket.stream(goforward, { chunkMs: 40, speed: 4 });
      await finalizeAndWait(socket);
      // The utterance reached whisper (one final decode of it), whatever the weightless model made of it.
      expect(whisper.stats().started.final).toBeGreaterThan(before);
      expect(socket.messages.filter((m) => m.type === "error")).toEqual([]);
      expect(socket.isOpen).toBe(true);
      socket.close();
    },
    120_000,
  );

  it("resolves dubbing's source_lang=auto by whisper's identification", async () => {
    const client = dubbingClient(server.baseUrl, API_KEY);
    const { body: created } = await client.request("POST", "/api/dubbing/jobs", {
      source_url: await client.upload(await makeTestVideo(dir)),
      target_lang: "es",
      source_lang: "auto",
    });
    const job = await client.finished(created.job_id as string);
    // The weightless model scores every language alike and whisper then takes its first, English;
    // the job is dubbed from it (with nothing heard, there is nothing to speak).
    expect(job).toMatchObject({ source_lang: "en", target_lang: "es" });
    expect(job.status).toBe("completed");
  });
});
