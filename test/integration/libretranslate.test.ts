import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { readWavAsPcm16 } from "../../src/audio/wav.js";
import { createSession, RealtimeSocket, type ServerMessage } from "../../src/cli/recording-socket.js";
import { createLibreTranslateEngine } from "../../src/engines/libretranslate/index.js";
import { RemoteEngineError } from "../../src/engines/kit/remote/errors.js";
import {
  startLibreTranslateServer,
  type LibreTranslateTestServer,
} from "../support/libretranslate-server.js";
import { freePort } from "../support/ports.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";
import { sharedMissing, sharedPath } from "../support/shared.js";
import { finalizeAndWait, openSession } from "../support/session-socket.js";
import { WAIT } from "../support/wait.js";

/**
 * The service configured (ENGINES_FILE) with LibreTranslate as its translator, served by a local
 * stand-in: what `/v1/languages` reports, real sessions (PocketSphinx recognizing real speech)
 * translated through it, and what happens when it fails, stalls or refuses.
 */
const SPEECH_MISSING = sharedMissing("data/speech/librivox-pocketsphinx");
const SPOKEN = "go forward ten meters";
let lt: LibreTranslateTestServer;
let dir: string;
let goForward: Int16Array;

beforeAll(async () => {
  lt = await startLibreTranslateServer();
  dir = await mkdtemp(path.join(tmpdir(), "libretranslate-"));
  if (!SPEECH_MISSING)
    goForward = await readWavAsPcm16(sharedPath("data/speech/librivox-pocketsphinx/goforward.wav"));
});
afterAll(async () => {
  await lt?.close();
  await rm(dir, { recursive: true, force: true });
});

const entry = (extra: Record<string, unknown> = {}) => ({
  engine: "libretranslate",
  url: lt.url,
  timeoutMs: 2000,
  maxRetries: 1,
  ...extra,
});

/** The service with `mt` as its translators (embedded recognition and speech). */
async function startWith(mt: unknown[], env: Record<string, string> = {}): Promise<TestServer> {
  const file = path.join(dir, `engines-${Math.random().toString(36).slice(2)}.json`);
  await writeFile(file, JSON.stringify({ mt }));
  return startServer({ ENGINES_FILE: file, ...env });
}

async function withService<T>(
  mt: unknown[],
  run: (server: TestServer) => Promise<T>,
  env: Record<string, string> = {},
): Promise<T> {
  const server = await startWith(mt, env);
  try {
    return await run(server);
  } finally {
    await server.close();
  }
}

async function getJson(server: TestServer, route: string): Promise<Record<string, unknown>> {
  const response = await fetch(new URL(route, server.baseUrl));
  expect(response.status).toBe(200);
  return (await response.json()) as Record<string, unknown>;
}

/** English speech into `targetLanguage`, one final per utterance, no speech output. */
const open = (server: TestServer, targetLanguage = "de"): Promise<RealtimeSocket> =>
  openSession(server.baseUrl, {
    sourceLanguage: "en",
    targetLanguage,
    audioOutputEnabled: "false",
    finalizeMode: "sentence",
  });

const isFinal = (type: string) => (m: ServerMessage) => m.type === type && m.is_final === true;

/** Faults for the request translating the whole sentence (interim hypotheses are translated too). */
const sentence = (body: Readonly<Record<string, unknown>>) => body["q"] === SPOKEN;

/**
 * Speaks one utterance and returns what the session sent about it: its final transcript, its
 * translated final (without the translation when it failed) and its error frames. Interim hypotheses
 * are translated as they come, so an utterance makes several requests; each failed call is one
 * error frame.
 */
async function utter(socket: RealtimeSocket): Promise<{
  original: ServerMessage;
  translated: ServerMessage | undefined;
  errors: ServerMessage[];
}> {
  const known = new Set(socket.messages.filter(isFinal("original_transcript")).map((m) => m.correlation_id));
  await socket.stream(goForward, { chunkMs: 20, speed: 8 });
  await finalizeAndWait(socket);
  const original = socket.messages.find(
    (m) => isFinal("original_transcript")(m) && !known.has(m.correlation_id),
  )!;
  const about = (m: ServerMessage) => m.correlation_id === original.correlation_id;
  return {
    original,
    translated: socket.messages.find((m) => about(m) && isFinal("translated_transcript")(m)),
    errors: socket.messages.filter((m) => about(m) && m.type === "error"),
  };
}

const escaped = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** The `error` text expected for a failed translation, the server's URL spelt out. */
const failure = (what: string) => new RegExp(`^translation failed: remote MT at ${escaped(lt.url)} ${what}$`);

const answered = (status: number) => lt.ofEndpoint("translate").filter((r) => r.status === status).length;

describe("LibreTranslate's languages in the service", () => {
  it("reports the pairs of the server's GET /languages, in relay's codes, and the server's version", async () => {
    lt.reset();
    await withService([entry()], async (server) => {
      const languages = await getJson(server, "/v1/languages");
      const translation = languages.translation as {
        from: string;
        to: string;
        engines: string[];
        via: null;
      }[];
      const direct = translation.filter((t) => t.via === null);
      expect(direct.every((t) => t.engines.join() === "libretranslate")).toBe(true);
      // pt-BR serves pt, both Chinese scripts serve zh (see DEFAULT_LANGUAGES)
      expect(direct.map((t) => `${t.from}>${t.to}`).sort()).toEqual(
        [
          "en>de",
          "en>es",
          "en>fr",
          "en>pt",
          "en>zh",
          "de>en",
          "de>fr",
          "es>en",
          "fr>de",
          "fr>en",
          "pt>en",
          "zh>en",
        ].sort(),
      );
      expect(languages.engines).toContainEqual({ kind: "mt", id: "libretranslate", version: "1.6.2" });
      expect(lt.count("languages")).toBe(1);
    });
  });

  it("pairs every language with every other on a server without `targets`, drops codes that are no language, and applies `languages`", async () => {
    lt.reset();
    lt.version = undefined; // no GET /spec
    lt.languages = [
      { code: "auto", name: "Auto Detect" },
      { code: "en", name: "English" },
      { code: "de", name: "German" },
      { code: "fr", name: "French" },
      { code: "es", name: "Spanish" },
    ];
    await withService([entry({ languages: ["en", "de", "fr"] })], async (server) => {
      const languages = await getJson(server, "/v1/languages");
      const translation = languages.translation as { from: string; to: string }[];
      expect(translation.map((t) => `${t.from}>${t.to}`).sort()).toEqual(
        ["en>de", "en>fr", "de>en", "de>fr", "fr>en", "fr>de"].sort(),
      );
      expect(languages.engines).toContainEqual({ kind: "mt", id: "libretranslate", version: "remote" });
    });
  });

  it("leaves the engine out, and says why on /healthz, when the server cannot be reached at start", async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    await withService([entry({ url, maxRetries: 0 }), { engine: "apertium" }], async (server) => {
      const health = await getJson(server, "/healthz");
      expect(health.status).toBe("degraded");
      expect(health.unavailable_engines).toEqual([
        {
          id: "libretranslate",
          reason: expect.stringMatching(new RegExp(`^remote MT at ${escaped(url)} is unreachable: `)),
        },
      ]);
      const languages = await getJson(server, "/v1/languages");
      expect((languages.engines as { id: string }[]).map((e) => e.id)).not.toContain("libretranslate");
    });
  });
});

describe.skipIf(SPEECH_MISSING)("real-time sessions translated by LibreTranslate", () => {
  let server: TestServer;
  beforeAll(async () => {
    lt.reset();
    // The engine reads the server's languages at start within its call timeout: on a loaded
    // machine the stand-in (in this process) can take longer than entry()'s 2 s to answer, and the
    // engine would be left out.
    server = await startWith([entry({ timeoutMs: 15_000 })]);
  });
  afterAll(async () => {
    await server?.close();
  });

  it("translates recognized speech through POST /translate, with the server's code for the target", async () => {
    lt.reset();
    const session = await createSession(server.baseUrl, API_KEY, {
      sourceLanguage: "en",
      targetLanguage: "de",
    });
    expect(session.model_version_id).toContain("libretranslate@1.6.2");

    const socket = await open(server, "de");
    const { original, translated, errors } = await utter(socket);
    expect(original.text).toBe(SPOKEN);
    expect(translated).toMatchObject({
      text: `[de] ${SPOKEN}`,
      original_text: SPOKEN,
      source_language: "en",
      target_language: "de",
    });
    expect(errors).toEqual([]);
    expect(socket.audioFrames).toHaveLength(0);
    socket.close();

    // The final's translation is the last request; interims were translated before it.
    const request = lt.ofEndpoint("translate").at(-1)!;
    expect(request.method).toBe("POST");
    expect(request.headers["content-type"]).toBe("application/json");
    // no context, labels or history: LibreTranslate takes none; no api_key: none configured
    expect(request.body).toEqual({ q: SPOKEN, source: "en", target: "de", format: "text" });
    expect(answered(200)).toBe(lt.count("translate"));

    // Portuguese is offered as pt-BR: that is the code sent, the session speaks of pt.
    const portuguese = await open(server, "pt");
    expect((await utter(portuguese)).translated).toMatchObject({
      text: `[pt-BR] ${SPOKEN}`,
      target_language: "pt",
    });
    expect(lt.ofEndpoint("translate").at(-1)!.body).toMatchObject({ source: "en", target: "pt-BR" });
    portuguese.close();
  });

  it("retries a 503 after the Retry-After it asks for: the line is translated, no error frame", async () => {
    lt.reset();
    lt.script("translate", {
      when: sentence,
      status: 503,
      message: "Cannot translate text: model loading",
      headers: { "retry-after": "1" },
    });
    const socket = await open(server);
    const { translated, errors } = await utter(socket);
    expect(answered(503)).toBe(1);
    // Without the retry, the call that got the 503 would be an error frame.
    expect(errors).toEqual([]);
    expect(translated).toMatchObject({ text: `[de] ${SPOKEN}` });
    socket.close();
  });

  it("does not retry a 400: one error frame with the server's message, and the session goes on", async () => {
    lt.reset();
    lt.script("translate", { when: sentence, status: 400, message: "de is not supported" });
    const socket = await open(server);
    const first = await utter(socket);
    expect(first.original.text).toBe(SPOKEN);
    expect(answered(400)).toBe(1);
    // A retry would have been answered and left no error frame.
    expect(first.errors).toEqual([
      expect.objectContaining({
        error: expect.stringMatching(failure("rejected the request with HTTP 400: de is not supported")),
      }),
    ]);

    const second = await utter(socket);
    expect(second.translated).toMatchObject({ text: `[de] ${SPOKEN}` });
    expect(second.errors).toEqual([]);
    expect(socket.closeCode).toBeUndefined();
    socket.close();
  });

  it("reports a 429 at once when the server asks to wait longer than the call may take", async () => {
    lt.reset();
    lt.script("translate", {
      when: sentence,
      status: 429,
      message: "Slowdown: 30 per 1 minute",
      headers: { "retry-after": "600" },
    });
    const socket = await open(server);
    const { errors } = await utter(socket);
    expect(answered(429)).toBe(1);
    expect(errors).toEqual([
      expect.objectContaining({
        error: expect.stringMatching(failure("failed with HTTP 429: Slowdown: 30 per 1 minute")),
      }),
    ]);
    socket.close();
  });

  it("cancels the request in flight when the session closes", async () => {
    lt.reset();
    lt.script("translate", { when: sentence, delayMs: 20_000 });
    const socket = await open(server);
    await socket.stream(goForward, { chunkMs: 20, speed: 8 });
    socket.finalize();
    const waiting = () => lt.ofEndpoint("translate").find((r) => r.body?.["q"] === SPOKEN);
    await vi.waitFor(() => expect(waiting()).toBeDefined(), { ...WAIT, interval: 50 });
    socket.close();
    await vi.waitFor(() => expect(waiting()!.aborted).toBe(true), WAIT);
  });
});

/** The state /metrics gives LibreTranslate's circuit breaker. */
async function circuitState(server: { baseUrl: string }): Promise<string | undefined> {
  const text = await (await fetch(new URL("/metrics", server.baseUrl))).text();
  const match = /^relay_engine_circuit\{kind="mt",engine="libretranslate",state="([a-z-]+)"\} 1$/mu.exec(
    text,
  );
  return match?.[1];
}

describe.skipIf(SPEECH_MISSING)("LibreTranslate failing under a session", () => {
  // A test that stopped the clock (the circuit's test) never leaves it stopped for the next.
  afterEach(() => vi.useRealTimers());
  it("opens the circuit after consecutive failures (error frames, no crash), then closes it after a trial call", async () => {
    lt.reset();
    const resetAfterMs = 4000;
    lt.script("translate", ...Array.from({ length: 20 }, () => ({ status: 500, message: "CUDA error" })));
    await withService(
      [entry({ maxRetries: 0, circuit: { failureThreshold: 2, resetAfterMs } })],
      async (server) => {
        const socket = await open(server);
        const errors = () => socket.messages.filter((m) => m.type === "error").map((m) => m.error as string);
        const opened = () => errors().some((e) => /circuit open/.test(e));
        // The circuit's clock (Date) stands still while it is open: however slowly a loaded machine
        // recognizes the utterances, resetAfterMs does not pass before the test says so.
        vi.useFakeTimers({ toFake: ["Date"], now: Date.now() });
        for (let i = 0; i < 5 && !opened(); i++) expect((await utter(socket)).original.text).toBe(SPOKEN);
        expect(errors().filter((e) => !failure("failed with HTTP 500: CUDA error").test(e))).toEqual(
          errors().filter((e) =>
            failure(
              "is failing \\(circuit open after 2 consecutive failures\\); retrying after [\\d.]+s",
            ).test(e),
          ),
        );
        expect(opened()).toBe(true);
        expect(await circuitState(server)).toBe("open");
        // Two calls failed; nothing reached the server while the circuit was open.
        expect(lt.count("translate")).toBe(2);
        expect(answered(500)).toBe(2);

        // The server recovers; once resetAfterMs has passed a trial call goes through and closes it.
        lt.unscript("translate");
        vi.useRealTimers();
        await new Promise((resolve) => setTimeout(resolve, resetAfterMs));
        const after = await utter(socket);
        expect(after.translated).toMatchObject({ text: `[de] ${SPOKEN}` });
        expect(after.errors).toEqual([]);
        expect(await circuitState(server)).toBe("closed");
        expect(socket.closeCode).toBeUndefined();
        socket.close();
      },
    );
  });

  it("times out an attempt that never answers or stalls mid-body, retries it, then reports the timeout", async () => {
    lt.reset();
    lt.script("translate", { when: sentence, delayMs: 10_000 }, { when: sentence, stallBodyMs: 10_000 });
    await withService([entry({ timeoutMs: 300, maxRetries: 1 })], async (server) => {
      const socket = await open(server);
      const { errors } = await utter(socket);
      // Two attempts of one call: one error frame (without the retry there would be two).
      expect(errors).toEqual([
        expect.objectContaining({ error: expect.stringMatching(failure("timed out after 300 ms")) }),
      ]);
      await vi.waitFor(() => expect(lt.ofEndpoint("translate").filter((r) => r.aborted)).toHaveLength(2));
      socket.close();
    });
  });

  it("sends the configured api_key; a key the server refuses (403) is an error frame per call, not retried", async () => {
    lt.reset();
    lt.apiKeys = ["lt-secret"];
    await withService(
      [entry({ apiKey: "${LT_KEY}" })],
      async (server) => {
        const socket = await open(server);
        expect((await utter(socket)).translated).toMatchObject({ text: `[de] ${SPOKEN}` });
        expect(lt.ofEndpoint("translate").every((r) => r.body?.["api_key"] === "lt-secret")).toBe(true);
        expect(lt.ofEndpoint("translate").at(-1)!.body).toEqual({
          q: SPOKEN,
          source: "en",
          target: "de",
          format: "text",
          api_key: "lt-secret",
        });
        socket.close();
      },
      { LT_KEY: "lt-secret" },
    );

    lt.reset();
    lt.apiKeys = ["lt-secret"];
    await withService([entry({ apiKey: "revoked" })], async (server) => {
      const socket = await open(server);
      const { translated, errors } = await utter(socket);
      // the line's translated final still arrives, without the translation
      expect(translated).toMatchObject({ text: "", translated_text: "" });
      expect(errors.length).toBeGreaterThan(0);
      for (const error of errors)
        expect(error.error).toMatch(failure("rejected the request with HTTP 403: Invalid API key"));
      // one request per failed call: none was retried
      expect(answered(403)).toBe(errors.length);
      expect(lt.count("translate")).toBe(errors.length);
      socket.close();
    });
  });
});

describe("the LibreTranslate engine on its own", () => {
  it("honours the caller's AbortSignal: the request is cancelled and the call rejects at once", async () => {
    lt.reset();
    const engine = await createLibreTranslateEngine({ url: `${lt.url}/` });
    try {
      lt.script("translate", { delayMs: 20_000 });
      const controller = new AbortController();
      const pending = engine.translate({ text: "hello", from: "en", to: "de" }, controller.signal);
      await vi.waitFor(() => expect(lt.count("translate")).toBe(1));
      controller.abort();
      const error = await pending.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(RemoteEngineError);
      expect((error as RemoteEngineError).kind).toBe("aborted");
      await vi.waitFor(() => expect(lt.ofEndpoint("translate")[0]!.aborted).toBe(true));
      // An empty line is not sent (the server would answer 400); a pair it lacks is refused here.
      expect(await engine.translate({ text: " ", from: "en", to: "de" })).toBe("");
      await expect(engine.translate({ text: "hallo", from: "de", to: "es" })).rejects.toThrow(
        /does not translate de → es/,
      );
      expect(lt.count("translate")).toBe(1);
    } finally {
      await engine.close();
    }
  });

  it("refuses to start on an unusable language list or a server without a usable pair", async () => {
    lt.reset();
    lt.languages = [
      { code: "en", name: "English", targets: ["en"] },
      { code: "english", name: "English (by name)", targets: ["en"] },
    ];
    await expect(createLibreTranslateEngine({ url: lt.url })).rejects.toThrow(
      /offers no language pair relay can use/,
    );
    lt.script("languages", { body: '{"languages": ["en", "de"]}' });
    await expect(createLibreTranslateEngine({ url: lt.url })).rejects.toThrow(
      new RegExp(`^remote MT at ${escaped(lt.url)} returned an unusable answer to GET /languages: `),
    );
    expect(lt.count("languages")).toBe(2); // an unusable answer is not retried
    lt.script("translate", { body: '{"translation": "hallo"}' });
    lt.languages = [{ code: "en", name: "English", targets: ["de"] }];
    const engine = await createLibreTranslateEngine({ url: lt.url });
    try {
      const error = await engine.translate({ text: "hello", from: "en", to: "de" }).then(
        () => undefined,
        (e: unknown) => e as RemoteEngineError,
      );
      expect(error?.kind).toBe("invalid-response");
      expect(error?.message).toMatch(/returned an unusable answer to POST \/translate: .*translatedText/);
    } finally {
      await engine.close();
    }
  });
});
