import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { glossaryFromContext } from "../../src/core/glossary.js";
import {
  createOpenAiAsrEngine,
  createOpenAiMtEngine,
  createOpenAiTtsEngine,
  languageCodeOf,
  RemoteEngineError,
  type OpenAiAsrOptions,
} from "../../src/engines/openai/index.js";
import { cleanPartialTranslation, cleanTranslation } from "../../src/engines/openai/mt.js";
import type { AsrEngine, AsrStream, MtEngine, TranslateRequest } from "../../src/core/contracts.js";
import { findVoice, listVoices } from "../../src/voices/library.js";
import { freePort } from "../support/ports.js";
import { SPEECH_MS_PER_CHAR, startOpenAiServer, type OpenAiTestServer } from "../support/openai-server.js";

let server: OpenAiTestServer;
const engines: { close(): Promise<void> }[] = [];

beforeAll(async () => {
  server = await startOpenAiServer();
});

afterEach(async () => {
  await Promise.all(engines.splice(0).map((engine) => engine.close()));
  server.reset();
});

afterAll(async () => {
  await server.close();
});

function track<T extends { close(): Promise<void> }>(engine: T): T {
  engines.push(engine);
  return engine;
}

/** Fast retries: the scripted failures ask the SDK to wait 10 ms instead of its backoff. */
const FAST_RETRY = { "retry-after-ms": "10" };

/** `ms` of a 440 Hz tone at 16 kHz. */
function speechLike(ms: number): Int16Array {
  const pcm = new Int16Array(ms * 16);
  for (let i = 0; i < pcm.length; i++) pcm[i] = Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / 16_000));
  return pcm;
}

/** Writes `ms` of audio in the pipeline's 96 ms batches. */
async function writeAudio(stream: AsrStream, ms: number): Promise<void> {
  const audio = speechLike(ms);
  for (let offset = 0; offset < audio.length; offset += 96 * 16) {
    await stream.write(audio.subarray(offset, Math.min(audio.length, offset + 96 * 16)));
  }
}

function asr(options: Partial<OpenAiAsrOptions> = {}): AsrEngine {
  return track(
    createOpenAiAsrEngine({
      baseUrl: server.baseUrl,
      model: "whisper-test",
      languages: ["en", "de", "es"],
      ...options,
    }),
  );
}

function mt(options: Partial<Parameters<typeof createOpenAiMtEngine>[0]> = {}): MtEngine {
  return track(
    createOpenAiMtEngine({
      baseUrl: server.baseUrl,
      model: "llm-test",
      languages: ["en", "de", "fr"],
      ...options,
    }),
  );
}

const REQUEST: TranslateRequest = { text: "Hello world", from: "en", to: "de" };

/**
 * Calls until the open circuit lets a trial call through (resetAfterMs after it opened), and returns
 * that call's result: calls refused while open never reach the server.
 */
async function circuitHalfOpen<T>(call: () => Promise<T>): Promise<T> {
  for (;;) {
    const outcome = call();
    const error = await outcome.then(
      () => undefined,
      (e: unknown) => e,
    );
    if (!(error instanceof RemoteEngineError && error.kind === "circuit-open")) return outcome;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function failure(promise: Promise<unknown>): Promise<RemoteEngineError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(RemoteEngineError);
  return error as RemoteEngineError;
}

async function collect(iterable: AsyncIterable<string>): Promise<string[]> {
  const values: string[] = [];
  for await (const value of iterable) values.push(value);
  return values;
}

// ---------------------------------------------------------------- speech recognition

describe("remote ASR (POST /v1/audio/transcriptions)", () => {
  it("sends the utterance as a 16 kHz mono WAV with the model, language, granularities and context", async () => {
    const engine = asr({ apiKey: "sk-test" });
    expect(engine.info).toEqual({
      id: "openai-asr",
      version: `whisper-test@${new URL(server.baseUrl).host}`,
    });
    expect(engine.capabilities).toMatchObject({
      languages: ["en", "de", "es"],
      sampleRate: 16_000,
      partialResults: true,
      wordTimings: true,
      punctuation: true,
      languageDetection: true,
    });
    const stream = await engine.createStream({ language: "de", context: "Kubernetes talk, speaker Anna" });
    await writeAudio(stream, 1500);
    const hypothesis = await stream.finish();

    expect(server.count("transcriptions")).toBe(1);
    const [request] = server.ofEndpoint("transcriptions");
    expect(request!.headers["authorization"]).toBe("Bearer sk-test");
    expect(request!.fields).toMatchObject({
      model: ["whisper-test"],
      language: ["de"],
      response_format: ["verbose_json"],
      "timestamp_granularities[]": ["word", "segment"],
      prompt: ["Kubernetes talk, speaker Anna"],
    });
    expect(request!.file).toMatchObject({ filename: "utterance.wav", mimeType: "audio/wav" });
    expect(request!.file!.audio).toEqual({
      sampleRate: 16_000,
      channels: 1,
      bitDepth: "16",
      samples: 24_000,
    });

    // The server answers language "german" (a name, as Whisper does): it is mapped back to the code.
    expect(hypothesis).toEqual({
      text: "speech of 1500 ms.",
      language: "de",
      words: [
        { word: "speech", startMs: 0, endMs: 375 },
        { word: "of", startMs: 375, endMs: 750 },
        { word: "1500", startMs: 750, endMs: 1125 },
        { word: "ms", startMs: 1125, endMs: 1500 },
      ],
    });
  });

  it("omits language (auto) and prompt when unknown, sends no credentials without a key, and maps the detected language", async () => {
    server.detectedLanguage = "castilian";
    const engine = asr();
    const stream = await engine.createStream({ language: "auto" });
    await writeAudio(stream, 800);
    const hypothesis = await stream.finish();
    const [request] = server.ofEndpoint("transcriptions");
    expect(request!.fields!["language"]).toBeUndefined();
    expect(request!.fields!["prompt"]).toBeUndefined();
    expect(request!.headers["authorization"]).toBeUndefined();
    expect(hypothesis.language).toBe("es");
    expect(hypothesis.text).toBe("speech of 800 ms.");
  });

  it("identifies among candidates: one is sent as the language; several identify, and an answer outside them is transcribed again in the first", async () => {
    const engine = asr();
    const single = await engine.createStream({ language: "auto", candidates: ["de"] });
    await writeAudio(single, 800);
    expect((await single.finish()).language).toBe("de");
    expect(server.ofEndpoint("transcriptions").map((r) => r.fields!["language"])).toEqual([["de"]]);

    server.reset();
    server.detectedLanguage = "spanish";
    const inside = await engine.createStream({ language: "auto", candidates: ["de", "es"] });
    await writeAudio(inside, 800);
    expect((await inside.finish()).language).toBe("es");
    expect(server.ofEndpoint("transcriptions").map((r) => r.fields!["language"])).toEqual([undefined]);

    server.reset();
    server.detectedLanguage = "french";
    const outside = await engine.createStream({ language: "auto", candidates: ["de", "es"] });
    await writeAudio(outside, 800);
    expect(await outside.finish()).toMatchObject({ text: "speech of 800 ms.", language: "de" });
    expect(server.ofEndpoint("transcriptions").map((r) => r.fields!["language"])).toEqual([
      undefined,
      ["de"],
    ]);

    // A server that reports no language leaves the utterance unidentified (nothing to correct).
    server.reset();
    server.languageOf = () => undefined;
    const unknown = await engine.createStream({ language: "auto", candidates: ["de", "es"] });
    await writeAudio(unknown, 800);
    expect((await unknown.finish()).language).toBeUndefined();
    expect(server.count("transcriptions")).toBe(1);

    await expect(engine.createStream({ language: "auto", candidates: ["de", "ja"] })).rejects.toThrow(
      /language "ja" is not configured/,
    );
  });

  it("spreads words over segments when the server ignores the word granularity", async () => {
    server.transcriptionWords = false;
    const stream = await asr().createStream({ language: "en" });
    await writeAudio(stream, 1000);
    const { words } = await stream.finish();
    expect(words.map((w) => w.word)).toEqual(["speech", "of", "1000", "ms."]);
    expect(words[0]!.startMs).toBe(0);
    expect(words.at(-1)!.endMs).toBe(1000);
    for (let i = 1; i < words.length; i++) expect(words[i]!.startMs).toBe(words[i - 1]!.endMs);
  });

  it("rejects languages it was not configured for", async () => {
    await expect(asr().createStream({ language: "ja" })).rejects.toThrow(/language "ja" is not configured/);
  });

  it("maps the language names and codes servers report to ISO 639-1 codes", () => {
    const cases: [string, string | undefined][] = [
      ["english", "en"],
      ["German", "de"],
      ["castilian", "es"],
      ["valencian", "ca"],
      ["mandarin", "zh"],
      ["maori", "mi"],
      ["tagalog", "tl"],
      ["fr", "fr"],
      ["EN-us", "en"],
      ["eng", "en"],
      ["iw", "he"],
      ["jw", "jv"],
      ["hawaiian", undefined],
      ["", undefined],
    ];
    for (const [reported, code] of cases) expect(languageCodeOf(reported), reported).toBe(code);
  });

  it("re-transcribes the growing utterance at most once per interval, never two requests at once, without blocking", async () => {
    server.delayMs = 150;
    const stream = await asr({ partialIntervalMs: 500 }).createStream({ language: "en" });

    await writeAudio(stream, 384);
    expect(await stream.partial()).toEqual({ text: "", words: [], language: "en" });
    expect(server.count("transcriptions")).toBe(0); // less than 500 ms of audio

    await writeAudio(stream, 192); // 576 ms
    const started = Date.now();
    expect((await stream.partial()).text).toBe(""); // returns at once, the request runs behind it
    expect(Date.now() - started).toBeLessThan(100);
    await vi.waitFor(() => expect(server.count("transcriptions")).toBe(1));

    await writeAudio(stream, 576); // 1152 ms: due again, but the first request is still in flight
    expect((await stream.partial()).text).toBe("");
    expect(server.count("transcriptions")).toBe(1);

    await vi.waitFor(async () => expect((await stream.partial()).text).toBe("speech of 576 ms."));
    await vi.waitFor(() => expect(server.count("transcriptions")).toBe(2)); // the 1152 ms one, started by that partial()
    await vi.waitFor(async () => expect((await stream.partial()).text).toBe("speech of 1152 ms."));
    await stream.partial(); // no new audio: no new request
    expect(server.count("transcriptions")).toBe(2);

    await writeAudio(stream, 96);
    const final = await stream.finish();
    expect(final.text).toBe("speech of 1248 ms.");
    expect(server.ofEndpoint("transcriptions").map((r) => r.file!.audio!.samples / 16)).toEqual([
      576, 1152, 1248,
    ]);
    expect(server.maxInFlight.transcriptions).toBe(1);
  });

  it("finish() reuses an interim request that already covers all the audio", async () => {
    server.delayMs = 100;
    const stream = await asr({ partialIntervalMs: 500 }).createStream({ language: "en" });
    await writeAudio(stream, 672);
    await stream.partial();
    const final = await stream.finish();
    expect(final.text).toBe("speech of 672 ms.");
    expect(server.count("transcriptions")).toBe(1);
  });

  it("finish() cancels an interim request for less audio before it sends the whole utterance", async () => {
    server.delayMs = 300;
    const stream = await asr({ partialIntervalMs: 500 }).createStream({ language: "en" });
    await writeAudio(stream, 576);
    await stream.partial();
    await vi.waitFor(() => expect(server.count("transcriptions")).toBe(1));
    await writeAudio(stream, 384);
    const final = await stream.finish();
    expect(final.text).toBe("speech of 960 ms.");
    const [interim, whole] = server.ofEndpoint("transcriptions");
    expect(interim!.aborted).toBe(true);
    expect(whole!.aborted).toBe(false);
  });

  it("reports a 4xx with the server's message (FastAPI-style body) and does not retry it", async () => {
    server.script("transcriptions", {
      status: 422,
      shape: "fastapi",
      message: "Unsupported model whisper-test",
    });
    const stream = await asr({ maxRetries: 2 }).createStream({ language: "en" });
    await writeAudio(stream, 500);
    const error = await failure(stream.finish());
    expect(error.message).toBe(
      `remote ASR at ${server.baseUrl} rejected the request with HTTP 422: Unsupported model whisper-test`,
    );
    expect(error.kind).toBe("rejected");
    expect(server.count("transcriptions")).toBe(1);
  });
});

// ---------------------------------------------------------------- machine translation

describe("remote MT (POST /v1/chat/completions)", () => {
  it("offers every ordered pair and sends labels, context and previous sentences in the system prompt", async () => {
    const engine = mt({ apiKey: "sk-mt" });
    expect(engine.info).toEqual({ id: "openai-mt", version: `llm-test@${new URL(server.baseUrl).host}` });
    expect(engine.capabilities.usesContext).toBe(true);
    expect(engine.capabilities.streaming).toBe(true);
    expect(engine.capabilities.pairs).toHaveLength(6);
    expect(engine.capabilities.pairs).toContainEqual({ from: "de", to: "fr" });
    expect(engine.capabilities.pairs).not.toContainEqual({ from: "en", to: "en" });

    const translation = await engine.translate({
      text: "The pods restart every hour.",
      from: "en",
      to: "de",
      fromLabel: "English (US)",
      toLabel: "Swiss German",
      context: "A talk about Kubernetes operations.",
      previous: [
        { source: "Welcome to the talk.", translation: "Willkommen zum Vortrag." },
        { source: "Let's look at the cluster.", translation: "Schauen wir uns den Cluster an." },
      ],
    });
    expect(translation).toBe("[translated] The pods restart every hour.");

    const [request] = server.ofEndpoint("chat");
    expect(request!.headers["authorization"]).toBe("Bearer sk-mt");
    const body = request!.json!;
    expect(body["model"]).toBe("llm-test");
    expect(body["stream"]).toBeUndefined();
    const messages = body["messages"] as { role: string; content: string }[];
    expect(messages.map((m) => m.role)).toEqual(["system", "user"]);
    expect(messages[1]!.content).toBe("The pods restart every hour.");
    const system = messages[0]!.content;
    expect(system).toContain("from English (US) into Swiss German");
    expect(system).toContain("Swiss German translation only");
    expect(system).toContain("A talk about Kubernetes operations.");
    expect(system).toContain(
      "English (US): Welcome to the talk.\nSwiss German: Willkommen zum Vortrag.\n" +
        "English (US): Let's look at the cluster.\nSwiss German: Schauen wir uns den Cluster an.",
    );
    expect(system.indexOf("Welcome to the talk.")).toBeLessThan(system.indexOf("Let's look at the cluster."));
  });

  it("lists the context's glossary in the system message: terms to keep, and terms with their target", async () => {
    const context = "Kubernetes, Anneliese Brandt\nthe cluster => der Verbund";
    await mt().translate({
      text: "Anneliese Brandt runs the cluster.",
      from: "en",
      to: "de",
      context,
      glossary: glossaryFromContext(context),
    });
    const system = (server.ofEndpoint("chat")[0]!.json!["messages"] as { content: string }[])[0]!.content;
    expect(system).toContain(
      "Glossary (write each term exactly as given, without the quotation marks):\n" +
        '"Kubernetes" (keep as is)\n"Anneliese Brandt" (keep as is)\n"the cluster" → "der Verbund"\n' +
        "</session-data>",
    );
  });

  it("names the languages from their codes when no labels are given", async () => {
    await mt().translate({ text: "Bonjour", from: "fr", to: "en" });
    const system = (server.ofEndpoint("chat")[0]!.json!["messages"] as { content: string }[])[0]!.content;
    expect(system).toContain("from French into English");
    expect(system).not.toContain("Background");
    expect(system).not.toContain("<session-data>");
    expect(system).not.toContain("most recent sentences");
  });

  it("rejects pairs outside the configured languages", async () => {
    await expect(mt().translate({ text: "Hi", from: "en", to: "ja" })).rejects.toThrow(
      /cannot translate en → ja/,
    );
    expect(server.count("chat")).toBe(0);
  });

  it("streams growing prefixes that end in the final translation", async () => {
    const engine = mt();
    const request = { ...REQUEST, text: "one two three four five" };
    const values = await collect(engine.translateStream!(request));
    const final = "[translated] one two three four five";
    expect(values.at(-1)).toBe(final);
    expect(values.length).toBeGreaterThan(3);
    for (let i = 1; i < values.length; i++) {
      expect(values[i]!.startsWith(values[i - 1]!)).toBe(true);
      expect(values[i]!.length).toBeGreaterThan(values[i - 1]!.length);
    }
    for (const value of values) expect(final.startsWith(value)).toBe(true);
    const body = server.ofEndpoint("chat")[0]!.json!;
    expect(body["stream"]).toBe(true);
    expect(await engine.translate(request)).toBe(final);
  });

  it("strips labels and wrapping quotes the model adds, streamed or not", async () => {
    server.reply = () => 'Translation: "Hallo Welt"';
    const engine = mt();
    expect(await engine.translate(REQUEST)).toBe("Hallo Welt");
    const values = await collect(engine.translateStream!(REQUEST));
    expect(values.at(-1)).toBe("Hallo Welt");
    for (const value of values) expect("Hallo Welt".startsWith(value)).toBe(true);

    server.reply = () => "<think>\nThe user wants German.\n</think>\n\nGerman: Hallo Welt";
    expect(await engine.translate(REQUEST)).toBe("Hallo Welt");
    expect((await collect(engine.translateStream!(REQUEST))).every((v) => "Hallo Welt".startsWith(v))).toBe(
      true,
    );

    // Quotes that belong to the text stay.
    expect(cleanTranslation('"Ja", sagte er. "Nein"', "x", ["German"])).toBe('"Ja", sagte er. "Nein"');
    expect(cleanTranslation('"Hallo"', '"Hello"', ["German"])).toBe('"Hallo"');
    expect(cleanTranslation("Translation (German): Guten Tag", "x", ["German"])).toBe("Guten Tag");
    expect(cleanPartialTranslation("Transl", "x", ["German"])).toBeUndefined();
    expect(cleanPartialTranslation("Transport", "x", ["German"])).toBe("Transport");
  });

  it("stops the request when the consumer stops reading the stream", async () => {
    server.chunkDelayMs = 50;
    const engine = mt();
    for await (const value of engine.translateStream!({ ...REQUEST, text: "a b c d e f g h i j" })) {
      expect(value).toBe("[translated]");
      break;
    }
    await vi.waitFor(() => expect(server.ofEndpoint("chat")[0]!.aborted).toBe(true));
  });
});

// ---------------------------------------------------------------- speech synthesis

describe("remote TTS (POST /v1/audio/speech)", () => {
  const voices = { female: ["f-alpha", "f-beta"], male: ["m-alpha", "m-beta", "m-gamma"] };

  it("maps library voices by gender and index to server voices, with the voice's rate as speed", async () => {
    const engine = track(
      createOpenAiTtsEngine({ baseUrl: server.baseUrl, model: "tts-test", languages: ["en", "es"], voices }),
    );
    expect(engine.info).toEqual({ id: "openai-tts", version: `tts-test@${new URL(server.baseUrl).host}` });
    expect(engine.capabilities.languages).toEqual(["en", "es"]);
    const female = listVoices("female");
    const male = listVoices("male");
    const picks = [female[0]!, female[3]!, male[0]!, male[4]!, male[5]!];
    for (const voice of picks) await engine.synthesize({ text: "Hola", language: "es", voice });
    const bodies = server.ofEndpoint("speech").map((r) => r.json!);
    expect(bodies.map((b) => b["voice"])).toEqual(["f-alpha", "f-beta", "m-alpha", "m-beta", "m-gamma"]);
    expect(bodies.map((b) => b["speed"])).toEqual(picks.map((v) => v.timbre.rate));
    expect(bodies[0]).toEqual({
      model: "tts-test",
      input: "Hola",
      voice: "f-alpha",
      response_format: "wav",
      speed: 1,
    });
  });

  it("decodes WAV answers at their own rate, including streaming headers, and 24 kHz pcm", async () => {
    const text = "Good morning";
    const expectedMs = text.length * SPEECH_MS_PER_CHAR;
    const voice = findVoice(1)!;
    const wavEngine = track(
      createOpenAiTtsEngine({ baseUrl: server.baseUrl, model: "tts-test", languages: ["en"], voices }),
    );
    const wav = await wavEngine.synthesize({ text, language: "en", voice });
    expect(wav.sampleRate).toBe(22_050);
    expect(wav.samples.length).toBe(Math.round((22_050 * expectedMs) / 1000));
    expect(Math.max(...wav.samples.map(Math.abs))).toBeGreaterThan(0.05);

    server.streamingWavHeader = true;
    server.wavSampleRate = 16_000;
    const streamed = await wavEngine.synthesize({ text, language: "en", voice });
    expect(streamed.sampleRate).toBe(16_000);
    expect(streamed.samples.length).toBe(16 * expectedMs);

    const pcmEngine = track(
      createOpenAiTtsEngine({
        baseUrl: server.baseUrl,
        model: "tts-test",
        languages: ["en"],
        voices,
        responseFormat: "pcm",
      }),
    );
    const pcm = await pcmEngine.synthesize({ text, language: "en", voice });
    expect(server.ofEndpoint("speech").at(-1)!.json!["response_format"]).toBe("pcm");
    expect(pcm.sampleRate).toBe(24_000);
    expect(pcm.samples.length).toBe(24 * expectedMs);

    expect((await pcmEngine.synthesize({ text: "  ", language: "en", voice })).samples.length).toBe(0);
    expect(server.count("speech")).toBe(3);
  });
});

// ---------------------------------------------------------------- resilience

describe("remote engine resilience", () => {
  it("retries 429 and 5xx answers, then succeeds", async () => {
    server.script(
      "chat",
      { status: 429, message: "slow down", headers: FAST_RETRY },
      { status: 500, message: "boom", headers: FAST_RETRY },
    );
    expect(await mt({ maxRetries: 2 }).translate(REQUEST)).toBe("[translated] Hello world");
    expect(server.count("chat")).toBe(3);
  });

  it("backs off exponentially by default and gives up after maxRetries with the server's message", async () => {
    server.script(
      "speech",
      { status: 503, message: "model loading" },
      { status: 503, message: "model loading" },
    );
    const engine = track(
      createOpenAiTtsEngine({
        baseUrl: server.baseUrl,
        model: "tts-test",
        languages: ["en"],
        voices: { female: ["f"], male: ["m"] },
        maxRetries: 1,
      }),
    );
    const started = Date.now();
    const error = await failure(engine.synthesize({ text: "Hi", language: "en", voice: findVoice(1)! }));
    expect(Date.now() - started).toBeGreaterThanOrEqual(350); // the SDK's first backoff: 0.5 s less ≤ 25 % jitter
    expect(error.message).toBe(`remote TTS at ${server.baseUrl} failed with HTTP 503: model loading`);
    expect(error.kind).toBe("server");
    expect(error.status).toBe(503);
    expect(server.count("speech")).toBe(2);
  });

  it("does not retry a 400 and reports the server's message", async () => {
    server.script("chat", { status: 400, message: "model 'llm-test' not found" });
    const error = await failure(mt({ maxRetries: 3 }).translate(REQUEST));
    expect(error.message).toBe(
      `remote MT at ${server.baseUrl} rejected the request with HTTP 400: model 'llm-test' not found`,
    );
    expect(server.count("chat")).toBe(1);
  });

  it("surfaces a timeout as a clear error instead of hanging (every attempt timed out)", async () => {
    server.script("chat", { delayMs: 5_000 }, { delayMs: 5_000 });
    const error = await failure(mt({ timeoutMs: 200, maxRetries: 1 }).translate(REQUEST));
    expect(error.message).toBe(`remote MT at ${server.baseUrl} timed out after 200 ms`);
    expect(error.kind).toBe("timeout");
    expect(server.count("chat")).toBe(2);
    await vi.waitFor(() => expect(server.ofEndpoint("chat").every((r) => r.aborted)).toBe(true));
  });

  it("bounds the whole call when a server stalls after the headers", async () => {
    server.script("chat", { stallBodyMs: 10_000 });
    const started = Date.now();
    const error = await failure(mt({ timeoutMs: 200, maxRetries: 0 }).translate(REQUEST));
    expect(error.kind).toBe("timeout");
    // One attempt (200 ms) plus the watchdog's slack for connecting and reading the body.
    expect(error.message).toBe(`remote MT at ${server.baseUrl} timed out after 1200 ms`);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it("times out a stream that stalls between chunks", async () => {
    server.stallAfterChunks = 2;
    server.stallMs = 5_000;
    const values: string[] = [];
    const error = await failure(
      (async () => {
        for await (const value of mt({ timeoutMs: 300 }).translateStream!({
          ...REQUEST,
          text: "a b c d e",
        })) {
          values.push(value);
        }
      })(),
    );
    expect(error.message).toBe(`remote MT at ${server.baseUrl} timed out after 300 ms`);
    expect(values.at(-1)).toBe("[translated] a");
  });

  it("reports an unreachable server", async () => {
    const baseUrl = `http://127.0.0.1:${await freePort()}/v1`;
    const error = await failure(mt({ baseUrl, maxRetries: 0 }).translate(REQUEST));
    expect(error.kind).toBe("unreachable");
    expect(error.message).toMatch(new RegExp(`^remote MT at ${baseUrl} is unreachable: .*ECONNREFUSED`));
  });

  it("opens the circuit after consecutive failures, fails fast while open, then closes after a trial", async () => {
    const engine = mt({ maxRetries: 0, circuit: { failureThreshold: 2, resetAfterMs: 1_000 } });
    server.script("chat", { status: 500, message: "down" }, { status: 502, message: "down" });
    expect((await failure(engine.translate(REQUEST))).message).toContain("failed with HTTP 500: down");
    expect((await failure(engine.translate(REQUEST))).message).toContain("failed with HTTP 502: down");
    expect(server.count("chat")).toBe(2);

    const open = await failure(engine.translate(REQUEST));
    expect(open.kind).toBe("circuit-open");
    expect(open.message).toMatch(
      new RegExp(
        `^remote MT at ${server.baseUrl.replace(/[.]/g, "\\.")} is failing \\(circuit open after 2 consecutive failures\\); retrying after (0\\.\\d|1)s$`,
      ),
    );
    await failure(engine.translate(REQUEST));
    expect(server.count("chat")).toBe(2); // nothing reached the server while open

    // The trial call, and nothing else while it was open.
    expect(await circuitHalfOpen(() => engine.translate(REQUEST))).toBe("[translated] Hello world");
    expect(server.count("chat")).toBe(3);

    // Closed again: one failure does not reopen it.
    server.script("chat", { status: 500 });
    expect((await failure(engine.translate(REQUEST))).kind).toBe("server");
    expect(await engine.translate(REQUEST)).toBe("[translated] Hello world");
    expect(server.count("chat")).toBe(5);
  });

  it("reopens the circuit when the trial call fails", async () => {
    const engine = mt({ maxRetries: 0, circuit: { failureThreshold: 1, resetAfterMs: 1_000 } });
    server.script("chat", { status: 500 }, { status: 500 });
    await failure(engine.translate(REQUEST));
    expect((await failure(engine.translate(REQUEST))).kind).toBe("circuit-open");
    expect((await failure(circuitHalfOpen(() => engine.translate(REQUEST)))).kind).toBe("server");
    expect((await failure(engine.translate(REQUEST))).kind).toBe("circuit-open");
    expect(server.count("chat")).toBe(2);
  });

  it("does not count rejected requests (4xx) towards the circuit", async () => {
    const engine = mt({ maxRetries: 0, circuit: { failureThreshold: 2, resetAfterMs: 10_000 } });
    server.script("chat", { status: 400 }, { status: 404 }, { status: 400 });
    for (let i = 0; i < 3; i++) expect((await failure(engine.translate(REQUEST))).kind).toBe("rejected");
    expect(await engine.translate(REQUEST)).toBe("[translated] Hello world");
    expect(server.count("chat")).toBe(4);
  });

  it("keeps at most `concurrency` requests in flight", async () => {
    server.delayMs = 100;
    const engine = mt({ concurrency: 2 });
    const texts = Array.from({ length: 7 }, (_, i) => `sentence ${i}`);
    const results = await Promise.all(texts.map((text) => engine.translate({ ...REQUEST, text })));
    expect(results).toEqual(texts.map((text) => `[translated] ${text}`));
    expect(server.count("chat")).toBe(7);
    expect(server.maxInFlight.chat).toBe(2);
  });

  it("cancels requests in flight when the engine closes", async () => {
    server.delayMs = 5_000;
    const engine = mt();
    const pending = failure(engine.translate(REQUEST));
    await vi.waitFor(() => expect(server.count("chat")).toBe(1));
    await engine.close();
    const error = await pending;
    expect(error.kind).toBe("closed");
    expect(error.message).toBe(`remote MT engine for ${server.baseUrl} is closed`);
    expect((await failure(engine.translate(REQUEST))).kind).toBe("closed");
    await vi.waitFor(() => expect(server.ofEndpoint("chat")[0]!.aborted).toBe(true));
  });

  it("cancels a translation or synthesis in flight when the caller's signal aborts", async () => {
    server.delayMs = 5_000;
    const engine = mt();
    const controller = new AbortController();
    const pending = failure(engine.translate(REQUEST, controller.signal));
    await vi.waitFor(() => expect(server.count("chat")).toBe(1));
    controller.abort();
    expect((await pending).kind).toBe("aborted");
    await vi.waitFor(() => expect(server.ofEndpoint("chat")[0]!.aborted).toBe(true));
    const voices = createOpenAiTtsEngine({
      baseUrl: server.baseUrl,
      model: "tts-test",
      languages: ["en"],
      voices: { female: ["f"], male: ["m"] },
    });
    track(voices);
    const speaking = new AbortController();
    const speech = failure(
      voices.synthesize({ text: "Hi", language: "en", voice: findVoice(1)! }, speaking.signal),
    );
    await vi.waitFor(() => expect(server.count("speech")).toBe(1));
    speaking.abort();
    expect((await speech).kind).toBe("aborted");
    await vi.waitFor(() => expect(server.ofEndpoint("speech")[0]!.aborted).toBe(true));
  });

  it("validates its options", () => {
    expect(() => mt({ baseUrl: "not a url" })).toThrow(/baseUrl "not a url" is not a URL/);
    expect(() => mt({ concurrency: 0 })).toThrow(/concurrency must be an integer ≥ 1/);
    expect(() => mt({ languages: [] })).toThrow(/at least one language/);
    expect(() =>
      createOpenAiTtsEngine({
        baseUrl: server.baseUrl,
        model: "t",
        languages: ["en"],
        voices: { female: [], male: ["m"] },
      }),
    ).toThrow(/voices.female must list at least one/);
  });

  it("treats a bare origin as the /v1 API root", async () => {
    const engine = mt({ baseUrl: server.baseUrl.replace(/\/v1$/, "/") });
    expect(await engine.translate(REQUEST)).toBe("[translated] Hello world");
    expect(server.ofEndpoint("chat")[0]!.path).toBe("/v1/chat/completions");
  });
});
