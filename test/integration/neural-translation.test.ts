/**
 * Neural translation (transformers.js, src/engines/transformers-js/) through the real service, with
 * stand-in Opus-MT and M2M100 models (test/support/stand-in-models/translation.ts) where `relay
 * models pull` puts the real ones. A stand-in translates nothing: it echoes its input and adds its
 * target language's marker ("go forward" → "go forward [es]"), so what is checked here is which
 * models a text went through and in what order, never translation quality.
 *
 * English is recognized by PocketSphinx from real speech; German and Japanese by a stand-in
 * OpenAI-compatible recognizer told which language each utterance is (test/support/openai-server.ts).
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readWavAsPcm16 } from "../../src/audio/wav.js";
import { RealtimeSocket, type ServerMessage } from "../../src/cli/recording-socket.js";
import { EngineBusyError } from "../../src/core/busy.js";
import {
  createTransformersEngine,
  type TransformersEngine,
} from "../../src/engines/transformers-js/index.js";
import { translationModels } from "../../src/engines/transformers-js/models.js";
import { dubbingClient } from "../support/dubbing-client.js";
import { standInEntry, startOpenAiServer, type OpenAiTestServer } from "../support/openai-server.js";
import { createRoomSession, joinRoom } from "../support/room-client.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";
import { recordingsOf } from "../support/recordings.js";
import { sharedMissing, sharedPath } from "../support/shared.js";
import { installStandInTranslation } from "../support/stand-in-models/install.js";
import { finalizeAndWait, openSession } from "../support/session-socket.js";

const SPEECH_MISSING = sharedMissing("data/speech/librivox-pocketsphinx");
const GO_FORWARD = "data/speech/librivox-pocketsphinx/goforward.wav";
/** The spec's ten languages: every one a dubbing target. */
const TARGETS = ["en", "es", "fr", "de", "it", "pt", "ru", "ja", "ko", "zh"] as const;
/**
 * The dubbing targets (docs/testing.md, "Trimmed files"): English (no translation), a Latin-script
 * and a CJK target, each through its own model; every target with RELAY_TEST_FULL=1.
 */
const DUBBED = recordingsOf(TARGETS, ["en", "es", "ja"]);
/** Out of English into each of the other nine, and back into English from German and Japanese. */
const MODELS = [
  "opus-mt-en-es",
  "opus-mt-en-fr",
  "opus-mt-en-de",
  "opus-mt-en-it",
  "opus-mt-en-romance",
  "opus-mt-en-ru",
  "opus-mt-en-zh",
  "m2m100-418m",
  "opus-mt-de-en",
  "opus-mt-ja-en",
];

let modelsDir: string;
let dir: string;
let remote: OpenAiTestServer;
let server: TestServer;
let goForward: Int16Array;

beforeAll(async () => {
  if (SPEECH_MISSING) return;
  modelsDir = await mkdtemp(path.join(tmpdir(), "relay-neural-mt-"));
  dir = await mkdtemp(path.join(tmpdir(), "relay-neural-mt-run-"));
  for (const name of MODELS) installStandInTranslation(modelsDir, name);
  remote = await startOpenAiServer();
  const engines = path.join(dir, "engines.json");
  await writeFile(
    engines,
    JSON.stringify({
      asr: [{ engine: "pocketsphinx" }, standInEntry(remote, "whisper-large", ["de", "ja", "ko"])],
      // Every pulled model, with Apertium behind them.
      mt: [{ engine: "transformers-js" }, { engine: "apertium" }],
      tts: [{ engine: "espeak-ng" }],
    }),
  );
  server = await startServer(
    { MODELS_DIR: modelsDir, ENGINES_FILE: engines, DUBBING_WORKERS: "2", RATE_LIMIT_PER_MINUTE: "1000" },
    { ownEngines: true },
  );
  goForward = await readWavAsPcm16(sharedPath(GO_FORWARD));
});
afterAll(async () => {
  await server?.close();
  await remote?.close();
  for (const d of [modelsDir, dir]) if (d) await rm(d, { recursive: true, force: true });
});

const finalsOf = (socket: RealtimeSocket, type: string) =>
  socket.messages.filter((m: ServerMessage) => m.type === type && m.is_final === true);

const open = (params: Record<string, string> = {}): Promise<RealtimeSocket> =>
  openSession(server.baseUrl, params);

/** Streams one utterance, finalizes, and waits for its translated final. */
async function speak(socket: RealtimeSocket, pcm: Int16Array): Promise<ServerMessage> {
  const before = finalsOf(socket, "translated_transcript").length;
  await socket.stream(pcm, { chunkMs: 20, speed: 4 });
  await finalizeAndWait(socket);
  expect(finalsOf(socket, "translated_transcript").length).toBeGreaterThan(before);
  // `finalizeMode=stable` may commit the utterance in parts: the last final ends it.
  return finalsOf(socket, "translated_transcript").at(-1)!;
}

describe.skipIf(SPEECH_MISSING)("neural translation through the service (stand-in models)", () => {
  it("serves every direction between the ten languages, neural first, and says so", async () => {
    const languages = (await (await fetch(`${server.baseUrl}/v1/languages`)).json()) as {
      translation: { from: string; to: string; engines: string[]; via: string | null }[];
    };
    const pair = (from: string, to: string) =>
      languages.translation.find((t) => t.from === from && t.to === to);
    expect(pair("en", "es")).toEqual({ from: "en", to: "es", engines: ["transformers-js"], via: null });
    expect(pair("de", "es")).toEqual({ from: "de", to: "es", engines: ["transformers-js"], via: "en" });
    expect(pair("ja", "ko")).toEqual({ from: "ja", to: "ko", engines: ["transformers-js"], via: "en" });
    // No neural way out of French here: Apertium keeps it, through Spanish.
    expect(pair("fr", "pt")).toEqual({ from: "fr", to: "pt", engines: ["apertium"], via: "es" });
    for (const target of TARGETS.filter((t) => t !== "en")) expect(pair("en", target)).toBeDefined();
    const health = (await (await fetch(`${server.baseUrl}/healthz`)).json()) as {
      engines: { kind: string; id: string; version: string }[];
      translation_pairs: unknown[];
    };
    expect(health.engines).toContainEqual(
      expect.objectContaining({ kind: "mt", id: "transformers-js", version: expect.stringMatching(/^4\./u) }),
    );
    expect(health.translation_pairs).toContainEqual({
      from: "de",
      to: "ja",
      engines: ["transformers-js"],
      via: "en",
    });
  });

  it("accepts auto-language sessions between languages only the neural models join", async () => {
    // Refused with Apertium alone ("no translation from de to es").
    remote.reset();
    remote.languageOf = () => "japanese";
    const socket = await open({
      modelName: "relay-2",
      sourceLanguage: "auto",
      languageHints: "de,ja",
      targetLanguage: "es",
    });
    const translated = await speak(socket, goForward);
    socket.close();
    expect(translated).toMatchObject({ detected_language: "ja" });
    expect(translated.text).toMatch(/\[en\] \[es\]$/u);
  });

  it("translates real English speech in a session through the direct model", async () => {
    const socket = await open({ sourceLanguage: "en", targetLanguage: "es", audioOutputEnabled: "false" });
    await speak(socket, goForward);
    socket.close();
    const originals = finalsOf(socket, "original_transcript");
    expect(originals.map((m) => m.text).join(" ")).toMatch(/forward/iu);
    // Each committed part of the utterance went through the model on its own: its text, then the
    // model's marker ("go forward [es] ten meters [es]").
    for (const translated of finalsOf(socket, "translated_transcript")) {
      const text = translated.text as string;
      expect(text).toMatch(/ \[es\]$/u);
      expect(text.replaceAll(" [es]", "")).toBe(translated.original_text);
    }
    expect(socket.messages.filter((m) => m.type === "error")).toEqual([]);
  });

  it("carries the context's terms through the model's tokenizer as placeholders and puts their targets back", async () => {
    const socket = await open({
      sourceLanguage: "en",
      targetLanguage: "es",
      audioOutputEnabled: "false",
      context: "forward => adelante\nmeters => metros",
    });
    await speak(socket, goForward);
    socket.close();
    // The stand-in echoes what its tokenizer read: the placeholders came back through the real
    // tokenizer files and the model, and the targets stand in the terms' places.
    const translated = finalsOf(socket, "translated_transcript").map((m) => m.text as string);
    expect(translated.join(" ")).toMatch(/adelante/u);
    expect(translated.join(" ")).not.toMatch(/forward|\b3\d\d\b/u);
    for (const text of translated) expect(text).toMatch(/ \[es\]$/u);
  });

  it("translates German into Spanish through English (de→en, en→es)", async () => {
    remote.reset();
    remote.languageOf = () => "german";
    const socket = await open({ sourceLanguage: "de", targetLanguage: "es", audioOutputEnabled: "false" });
    const translated = await speak(socket, goForward);
    socket.close();
    const original = finalsOf(socket, "original_transcript").at(-1)!;
    // The English hop's marker, then the Spanish one's.
    expect(translated.text).toMatch(/^speech of \d+.* \[en\] \[es\]$/u);
    expect(translated.original_text).toBe(original.text);
  });

  it("runs a two-way session between German and Japanese, spoken in each", async () => {
    remote.reset();
    remote.languageOf = ({ utterance }) => (utterance === 0 ? "german" : "japanese");
    const socket = await open({ twoWay: "true", sourceLanguage: "de", targetLanguage: "ja" });
    const intoJapanese = await speak(socket, goForward);
    const intoGerman = await speak(socket, goForward);
    await expect.poll(() => socket.audioFrames.length).toBeGreaterThan(0);
    socket.close();
    expect(intoJapanese).toMatchObject({ detected_language: "de" });
    expect(intoJapanese.text).toMatch(/\[en\].*\[ja\]$/u);
    expect(intoGerman).toMatchObject({ detected_language: "ja" });
    expect(intoGerman.text).toMatch(/\[en\].*\[de\]$/u);
    expect(socket.messages.filter((m) => m.type === "error")).toEqual([]);
  });

  it("translates a room between German and Korean", async () => {
    remote.reset();
    remote.languageOf = () => "german";
    const room = await createRoomSession(server.baseUrl, API_KEY, {
      source_language: "de-DE",
      target_language: "ko-KR",
    });
    const socket = await joinRoom(room);
    const padded = new Int16Array(goForward.length + 24_000);
    padded.set(goForward);
    await socket.stream(padded, { chunkMs: 20, speed: 4 });
    const translated = await socket.waitFor(
      (m) => m.type === "translated_transcript" && m.is_final === true,
      30_000,
    );
    socket.close();
    expect(translated.text).toMatch(/\[en\].*\[ko\]$/u);
  });

  it("gives a room's and a dubbing job's context to the model's route: targets in translations and subtitles", async () => {
    const context = "forward => adelante (glosario)";
    const room = await createRoomSession(server.baseUrl, API_KEY, {
      source_language: "en-US",
      target_language: "es-ES",
      context,
    });
    const socket = await joinRoom(room);
    const padded = new Int16Array(goForward.length + 24_000);
    padded.set(goForward);
    await socket.stream(padded, { chunkMs: 20, speed: 4 });
    const translated = await socket.waitFor(
      (m) => m.type === "translated_transcript" && m.is_final === true && /adelante/u.test(String(m.text)),
      30_000,
    );
    socket.close();
    expect(translated.text).toMatch(/adelante \(glosario\).*\[es\]$/u);

    const client = dubbingClient(server.baseUrl, API_KEY);
    const sourceUrl = await client.upload(sharedPath(GO_FORWARD), "audio/wav");
    const created = await client.request("POST", "/api/dubbing/jobs", {
      source_url: sourceUrl,
      source_lang: "en",
      target_lang: "es",
      voice: "female",
      context,
    });
    expect(created.status).toBe(201);
    const job = await client.finished(created.body.job_id as string);
    expect(job.status).toBe("completed");
    const segments = job.segments as { translated_text: string }[];
    expect(segments.map((segment) => segment.translated_text).join(" ")).toMatch(/adelante \(glosario\)/u);
  });

  it(`dubs into ${DUBBED.join(", ")} (each of the ten with RELAY_TEST_FULL=1)`, async () => {
    const client = dubbingClient(server.baseUrl, API_KEY);
    // A recording (no picture to carry through): what is dubbed is its speech.
    const sourceUrl = await client.upload(sharedPath(GO_FORWARD), "audio/wav");
    const jobs = await Promise.all(
      DUBBED.map(async (target) => {
        const created = await client.request("POST", "/api/dubbing/jobs", {
          source_url: sourceUrl,
          source_lang: "en",
          target_lang: target,
          // One voice: matching voices is tested elsewhere, and measuring the library in ten
          // languages would cost about 50 s.
          voice: "female",
        });
        expect(created.status).toBe(201);
        return { target, id: created.body.job_id as string };
      }),
    );
    for (const { target, id } of jobs) {
      const job = await client.finished(id);
      expect(job, target).toMatchObject({ status: "completed", error: null, target_lang: target });
      const subtitles = await fetch(
        new URL(`/api/dubbing/jobs/${id}/subtitles?track=translated&format=srt`, server.baseUrl),
        { headers: { authorization: `Bearer ${API_KEY}` } },
      );
      const text = await subtitles.text();
      // English needs no translation; every other target came through its own model.
      if (target === "en") expect(text).not.toMatch(/\[\w\w\]/u);
      else expect(text, target).toContain(`[${target}]`);
    }
  });
});

describe("the transformers-js engine (stand-in models, its own host process)", () => {
  let engine: TransformersEngine;
  let engineModels: string;

  beforeAll(async () => {
    engineModels = await mkdtemp(path.join(tmpdir(), "relay-mt-engine-"));
    for (const name of ["opus-mt-en-es", "opus-mt-es-en", "opus-mt-en-de"])
      installStandInTranslation(engineModels, name);
    engine = await createTransformersEngine({
      models: translationModels(undefined, engineModels),
      maxBatch: 4,
      maxQueued: 6,
      maxLoaded: 2,
    });
  });
  afterAll(async () => {
    await engine?.close();
    if (engineModels) await rm(engineModels, { recursive: true, force: true });
  });

  it("translates sentence by sentence, streaming each as it is done", async () => {
    const text = "Good morning. How are you? Fine.";
    expect(await engine.translate({ text, from: "en", to: "es" })).toBe(
      "Good morning. [es] How are you? [es] Fine. [es]",
    );
    const partials: string[] = [];
    for await (const partial of engine.translateStream!({ text, from: "en", to: "es" }))
      partials.push(partial);
    expect(partials).toEqual([
      "Good morning. [es]",
      "Good morning. [es] How are you? [es]",
      "Good morning. [es] How are you? [es] Fine. [es]",
    ]);
  });

  it("batches sentences that arrive together, refuses beyond the queue's bound and drops what is cancelled", async () => {
    const before = (await engine.stats()).sentences;
    const session = new AbortController();
    // One goes to the host at once; six wait (the bound); the rest are refused.
    const calls = Array.from({ length: 10 }, (_, i) =>
      engine.translate(
        { text: `sentence ${i}`, from: "en", to: "es" },
        i === 5 || i === 6 ? session.signal : undefined,
      ),
    );
    session.abort();
    const results = await Promise.allSettled(calls);
    const fulfilled = results.flatMap((r, i) => (r.status === "fulfilled" ? [[i, r.value]] : []));
    expect(fulfilled).toEqual([0, 1, 2, 3, 4].map((i) => [i, `sentence ${i} [es]`]));
    // Cancelled while waiting: never sent.
    for (const i of [5, 6])
      expect((results[i] as PromiseRejectedResult).reason).toHaveProperty("name", "AbortError");
    for (const i of [7, 8, 9])
      expect((results[i] as PromiseRejectedResult).reason).toBeInstanceOf(EngineBusyError);
    const stats = await engine.stats();
    expect(stats.sentences - before).toBe(5);
    // The first alone, then the four that waited in one batch.
    expect(stats.waiting["opus-mt-en-es"]).toBe(0);
    // An interim is refused from half the bound, while a final still gets in.
    const busy = Array.from({ length: 4 }, (_, i) =>
      engine.translate({ text: `final ${i}`, from: "en", to: "es" }),
    );
    await expect(
      engine.translate({ text: "interim", from: "en", to: "es", interim: true }),
    ).rejects.toBeInstanceOf(EngineBusyError);
    await Promise.all(busy);
  });

  it("keeps at most maxLoaded models, the most recently used", async () => {
    await engine.translate({ text: "hola", from: "es", to: "en" });
    await engine.translate({ text: "hallo", from: "en", to: "de" });
    const { host } = await engine.stats();
    expect(host.loaded).toEqual(["opus-mt-es-en", "opus-mt-en-de"]);
    expect(host.rss).toBeGreaterThan(0);
    // A model released comes back on demand.
    expect(await engine.translate({ text: "hello", from: "en", to: "es" })).toBe("hello [es]");
    expect((await engine.stats()).host.loaded).toEqual(["opus-mt-en-de", "opus-mt-en-es"]);
  });

  it("warms the models serving the directions asked for, and only those (the service asks for what speech can reach)", async () => {
    const warming = await createTransformersEngine({ models: translationModels(undefined, engineModels) });
    try {
      await warming.warmUp!([{ from: "en", to: "de" }]);
      expect((await warming.stats()).host.loaded).toEqual(["opus-mt-en-de"]);
    } finally {
      await warming.close();
    }
  });

  it("replaces its host process once the host's memory passes the bound, and goes on translating", async () => {
    const small = await createTransformersEngine({
      models: translationModels(["opus-mt-en-es"], engineModels),
      maxHostMiB: 1,
    });
    try {
      // Every reply finds the host past its bound: each request is served by a new process.
      expect(await small.translate({ text: "one", from: "en", to: "es" })).toBe("one [es]");
      expect(await small.translate({ text: "two", from: "en", to: "es" })).toBe("two [es]");
      const stats = await small.stats();
      expect(stats.recycled).toBeGreaterThanOrEqual(2);
      // The new host has loaded nothing yet: models load again as they are needed.
      expect(stats.host.loaded).toEqual([]);
    } finally {
      await small.close();
    }
  });

  it("finds a model that cannot load at start: it serves no direction and is listed unavailable", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "relay-mt-truncated-"));
    try {
      installStandInTranslation(dir, "opus-mt-en-es");
      installStandInTranslation(dir, "opus-mt-en-de");
      const decoder = path.join(dir, "mt", "opus-mt-en-de", "onnx", "decoder_model_merged_quantized.onnx");
      const bytes = await readFile(decoder);
      await writeFile(decoder, bytes.subarray(0, Math.floor(bytes.length / 2)));
      const partial = await createTransformersEngine({ models: translationModels(undefined, dir) });
      try {
        expect(partial.capabilities.pairs).toEqual([{ from: "en", to: "es" }]);
        expect(partial.unavailableParts).toEqual([
          {
            id: "transformers-js opus-mt-en-de",
            reason: expect.stringMatching(/decoder_model_merged_quantized/),
          },
        ]);
        expect(await partial.translate({ text: "hello", from: "en", to: "es" })).toBe("hello [es]");
      } finally {
        await partial.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
