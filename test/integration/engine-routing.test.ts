import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSession, RealtimeSocket } from "../../src/cli/recording-socket.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";
import { sharedMissing, sharedPath } from "../support/shared.js";
import { finalizeAndWait } from "../support/session-socket.js";

/**
 * ENGINES_FILE → registry → what the service offers: whisper.cpp (loaded from the test fixture
 * model, no decoding) in front of PocketSphinx, and a configured engine that cannot load.
 */
const FIXTURE_MISSING = sharedMissing("models/whisper-cpp-test/for-tests-ggml-tiny.bin");
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "engine-routing-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function serve(engines: unknown, env: Record<string, string> = {}): Promise<TestServer> {
  const file = path.join(dir, `engines-${Math.random().toString(36).slice(2)}.json`);
  await writeFile(file, JSON.stringify(engines));
  return startServer({ ENGINES_FILE: file, ...env });
}

interface Languages {
  recognition: { language: string; engine: string }[];
  engines: { kind: string; id: string; version: string }[];
}

describe.skipIf(FIXTURE_MISSING)("engine routing from ENGINES_FILE", () => {
  it("serves whisper.cpp's languages first, keeps PocketSphinx as English fallback, and accepts sourceLanguage=auto", async () => {
    const server = await serve({
      asr: [
        {
          engine: "whisper-cpp",
          model: sharedPath("models/whisper-cpp-test/for-tests-ggml-tiny.bin"),
          languages: ["en", "es", "de", "fr"],
        },
        { engine: "pocketsphinx" },
      ],
    });
    try {
      const languages = (await (await fetch(new URL("/v1/languages", server.baseUrl))).json()) as Languages;
      expect(Object.fromEntries(languages.recognition.map((r) => [r.language, r.engine]))).toEqual({
        en: "whisper-cpp",
        es: "whisper-cpp",
        de: "whisper-cpp",
        fr: "whisper-cpp",
      });
      expect(languages.engines.filter((e) => e.kind === "asr").map((e) => e.id)).toEqual([
        "whisper-cpp",
        "pocketsphinx",
      ]);
      const session = await createSession(server.baseUrl, API_KEY, {
        sourceLanguage: "auto",
        targetLanguage: "es",
        modelName: "relay-2",
      });
      expect(session.model_version_id).toMatch(/whisper-cpp@[^,]+for-tests-ggml-tiny\.bin,pocketsphinx@/);
      const socket = await RealtimeSocket.connect(session.ws_url);
      await socket.waitFor((m) => m.type === "ready");
      // Whatever the session had to say at its start has come before the answer to a finalize.
      await finalizeAndWait(socket);
      expect(socket.messages.filter((m) => m.type === "error")).toEqual([]);
      socket.close();
    } finally {
      await server.close();
    }
  });

  it("starts degraded, naming the reason, when a configured engine cannot load", async () => {
    const server = await serve({
      asr: [{ engine: "whisper-cpp", model: "small-q5_1" }, { engine: "pocketsphinx" }],
    });
    try {
      const health = (await (await fetch(new URL("/healthz", server.baseUrl))).json()) as {
        status: string;
        unavailable_engines: { id: string; reason: string }[];
      };
      expect(health.status).toBe("degraded");
      expect(health.unavailable_engines).toEqual([
        { id: "whisper-cpp", reason: expect.stringMatching(/relay models pull small-q5_1/) },
      ]);
      // Alive, but not ready: a load balancer should send it no traffic until it is fixed.
      expect((await fetch(new URL("/livez", server.baseUrl))).status).toBe(200);
      const ready = await fetch(new URL("/readyz", server.baseUrl));
      expect(ready.status).toBe(503);
      expect(await ready.json()).toMatchObject({
        status: "not_ready",
        problems: [expect.stringMatching(/^engine whisper-cpp unavailable: .*relay models pull small-q5_1/)],
      });
      // English still works through PocketSphinx; auto-detection is refused with the reason.
      await createSession(server.baseUrl, API_KEY, { sourceLanguage: "en" });
      const auto = await createSession(server.baseUrl, API_KEY, {
        sourceLanguage: "auto",
        modelName: "relay-2",
      });
      const socket = await RealtimeSocket.connect(auto.ws_url);
      const error = await socket.waitFor((m) => m.type === "error");
      expect(error.error).toMatch(/sourceLanguage=auto needs a recognizer that identifies languages/);
      socket.close();
    } finally {
      await server.close();
    }
  });
});

describe("engine configuration errors at start-up", () => {
  it("refuses to start with an invalid engines file", async () => {
    await expect(
      serve({ mt: [{ engine: "openai", baseUrl: "not a url", model: "m", languages: ["en"] }] }),
    ).rejects.toThrow(/mt\[0\]\.baseUrl/);
  });
});
