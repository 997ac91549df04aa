import { SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSession, HttpError, RealtimeSocket } from "../../src/cli/recording-socket.js";
import { API_KEY, BROKE_KEY, DUBBING_ONLY_KEY, startServer, type TestServer } from "../support/server.js";

const SECRET = "integration-test-secret-0123456789";
let server: TestServer;

beforeAll(async () => {
  server = await startServer({ SESSION_SECRET: SECRET, MAX_SESSIONS: "2" });
});
afterAll(async () => {
  await server?.close();
});

/** A GET through `inject()`: the HTTP-only tests need no port (the WebSocket ones below do). */
async function get(
  path: string,
  apiKey?: string,
): Promise<{ status: number; body: unknown; headers: Headers }> {
  const response = await server.inject(path, {
    headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {},
  });
  return { status: response.status, body: await response.json(), headers: response.headers };
}

function expectErrorBody(body: unknown, code: string): void {
  expect(body).toEqual({ error: { code, message: expect.any(String) } });
  expect((body as { error: { message: string } }).error.message.length).toBeGreaterThan(5);
}

describe("GET /v1/session", () => {
  it("returns a signed ws_url, expires_in 60 and a model_version_id naming build and engines", async () => {
    const { status, body } = await get("/v1/session?targetLanguage=fr&custom=1", API_KEY);
    expect(status).toBe(200);
    const session = body as Record<string, unknown>;
    expect(session).toEqual({
      session_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      ws_url: expect.stringMatching(/^ws:\/\/127\.0\.0\.1:\d+\/v1\/ws\?token=/),
      expires_in: 60,
      model_version_id: expect.stringMatching(
        /^relay-1\/\d+\.\d+\.\d+\/silero-vad@.*pocketsphinx@.*apertium@.*espeak-ng@/,
      ),
    });
  });

  it("answers 401 without or with a wrong key, 402 without balance, 403 without entitlement", async () => {
    const missing = await get("/v1/session");
    expect(missing.status).toBe(401);
    expectErrorBody(missing.body, "unauthorized");
    const wrong = await get("/v1/session", "not-a-key");
    expect(wrong.status).toBe(401);
    expectErrorBody(wrong.body, "unauthorized");
    const broke = await get("/v1/session", BROKE_KEY);
    expect(broke.status).toBe(402);
    expectErrorBody(broke.body, "insufficient_balance");
    const dubbingOnly = await get("/v1/session", DUBBING_ONLY_KEY);
    expect(dubbingOnly.status).toBe(403);
    expectErrorBody(dubbingOnly.body, "forbidden");
  });

  it("answers 503 when the process is at capacity, and a socket arriving then is closed with 4503", async () => {
    const spare = await createSession(server.baseUrl, API_KEY);
    const sockets = [];
    for (let i = 0; i < 2; i++) {
      const socket = await RealtimeSocket.connect((await createSession(server.baseUrl, API_KEY)).ws_url);
      await socket.waitFor((m) => m.type === "ready");
      sockets.push(socket);
    }
    const refused = await get("/v1/session", API_KEY);
    expect(refused.status).toBe(503);
    expect(refused.headers.get("retry-after")).toBe("1");
    expectErrorBody(refused.body, "capacity_exhausted");

    const late = await RealtimeSocket.connect(spare.ws_url);
    expect(await late.closed()).toBe(4503);
    expect(late.messages).toEqual([]);

    for (const socket of sockets) socket.close();
    await Promise.all(sockets.map((s) => s.closed()));
    await expect.poll(async () => (await get("/v1/session", API_KEY)).status).toBe(200);
  });
});

describe("session WebSocket handshake", () => {
  it("refuses forged, reused and expired URLs with HTTP 401", async () => {
    const session = await createSession(server.baseUrl, API_KEY);
    const url = new URL(session.ws_url);

    const forged = new URL(url);
    const token = url.searchParams.get("token")!;
    forged.searchParams.set("token", `${token.slice(0, -4)}AAAA`);
    await expect(RealtimeSocket.connect(forged.toString())).rejects.toMatchObject({ status: 401 });

    const otherSecret = await new SignJWT({})
      .setProtectedHeader({ alg: "HS256" })
      .setSubject(session.session_id)
      .setAudience("session-ws")
      .setExpirationTime("60s")
      .sign(new TextEncoder().encode("some-other-secret-that-is-long"));
    forged.searchParams.set("token", otherSecret);
    await expect(RealtimeSocket.connect(forged.toString())).rejects.toMatchObject({ status: 401 });

    const first = await RealtimeSocket.connect(session.ws_url);
    await first.waitFor((m) => m.type === "ready");
    await expect(RealtimeSocket.connect(session.ws_url)).rejects.toMatchObject({ status: 401 });
    first.close();

    const fresh = await createSession(server.baseUrl, API_KEY);
    const expired = await new SignJWT({})
      .setProtectedHeader({ alg: "HS256" })
      .setSubject(fresh.session_id)
      .setAudience("session-ws")
      .setIssuedAt(Math.floor(Date.now() / 1000) - 120)
      .setExpirationTime(Math.floor(Date.now() / 1000) - 60)
      .sign(new TextEncoder().encode(SECRET));
    const expiredUrl = new URL(fresh.ws_url);
    expiredUrl.searchParams.set("token", expired);
    await expect(RealtimeSocket.connect(expiredUrl.toString())).rejects.toMatchObject({ status: 401 });

    const noToken = new URL(url);
    noToken.search = "";
    await expect(RealtimeSocket.connect(noToken.toString())).rejects.toBeInstanceOf(HttpError);
  });
});

describe("GET /v1/voices", () => {
  it("lists 70 voices of both genders without authentication", async () => {
    const { status, body } = await get("/v1/voices");
    expect(status).toBe(200);
    const voices = (
      body as { voices: { id: number; name: string; gender: string; strong_accent: boolean }[] }
    ).voices;
    expect(voices).toHaveLength(70);
    expect(new Set(voices.map((v) => v.id)).size).toBe(70);
    for (const voice of voices) {
      expect(voice).toEqual({
        id: expect.any(Number),
        name: expect.any(String),
        gender: expect.stringMatching(/^(female|male)$/),
        strong_accent: expect.any(Boolean),
      });
    }
    expect(voices.filter((v) => v.strong_accent).length).toBeGreaterThan(0);
  });

  it("filters by gender and rejects unknown genders", async () => {
    const female = (await get("/v1/voices?gender=female")).body as { voices: { gender: string }[] };
    const male = (await get("/v1/voices?gender=male")).body as { voices: { gender: string }[] };
    expect(female.voices.length).toBeGreaterThan(10);
    expect(female.voices.every((v) => v.gender === "female")).toBe(true);
    expect(female.voices.length + male.voices.length).toBe(70);
    const bad = await get("/v1/voices?gender=robot");
    expect(bad.status).toBe(400);
    expectErrorBody(bad.body, "invalid_request");
  });
});

describe("GET /v1/languages, /healthz and unknown routes", () => {
  it("reports what the configured engines serve", async () => {
    const { status, body } = await get("/v1/languages");
    expect(status).toBe(200);
    const report = body as {
      recognition: { language: string; engine: string }[];
      translation: { from: string; to: string; via: string | null }[];
      voice_output: { language: string }[];
      engines: { kind: string; id: string }[];
    };
    expect(report.recognition).toContainEqual(
      expect.objectContaining({ language: "en", engine: "pocketsphinx" }),
    );
    expect(report.translation).toContainEqual(expect.objectContaining({ from: "en", to: "es", via: null }));
    expect(report.translation).toContainEqual(expect.objectContaining({ from: "en", to: "fr", via: "es" }));
    expect(report.translation).toContainEqual(expect.objectContaining({ from: "pt", to: "it", via: "es" }));
    for (const language of ["en", "es", "fr", "de", "ru", "zh"]) {
      expect(report.voice_output.map((v) => v.language)).toContain(language);
    }
    expect(report.engines.map((e) => e.kind).sort()).toEqual(
      expect.arrayContaining(["asr", "mt", "tts", "vad"]),
    );
  });

  it("answers /healthz once the engines are loaded", async () => {
    const { status, body } = await get("/healthz");
    expect(status).toBe(200);
    expect(body).toMatchObject({ status: "ok", sessions: { capacity: 2 } });
  });

  it("gives unknown routes a 404 error body", async () => {
    const { status, body } = await get("/v2/nothing");
    expect(status).toBe(404);
    expectErrorBody(body, "not_found");
  });
});

describe("context of 2,000 characters in any script", () => {
  /** `text` repeated to exactly `count` characters (code points). */
  const characters = (text: string, count: number) =>
    Array.from({ length: Math.ceil(count / [...text].length) }, () => text)
      .join("")
      .match(/./gsu)!
      .slice(0, count)
      .join("");
  const CONTEXTS = {
    Chinese: characters("本次会议讨论语音翻译系统的延迟、准确率和术语表。", 2000),
    Japanese: characters("本日の会議では音声翻訳の遅延と精度、用語集について話し合いました。", 2000),
    // 4 UTF-8 bytes (12 percent-encoded) and two UTF-16 units each: the longest a character can be.
    "emoji and CJK Extension B": characters("😀𠀀𠀁🎙️𠮷", 2000),
  };

  /** Opens a session with `context`; the messages up to the ack of an update_metadata sent at once. */
  async function sessionWith(context: string, update = context) {
    const session = await createSession(server.baseUrl, API_KEY, {
      sourceLanguage: "en",
      targetLanguage: "es",
      context,
    });
    const socket = await RealtimeSocket.connect(session.ws_url);
    await socket.waitFor((m) => m.type === "ready");
    socket.send({ type: "update_metadata", metadata: { context: update } });
    // A session-start error is sent right after ready, before anything the session answers.
    await socket.waitFor((m) => m.type === "metadata_ack" || m.type === "error");
    socket.close();
    return socket.messages;
  }

  for (const [script, context] of Object.entries(CONTEXTS)) {
    it(`accepts ${script} context of 2,000 characters at GET /v1/session and in update_metadata`, async () => {
      expect([...context]).toHaveLength(2000);
      const messages = await sessionWith(context);
      expect(messages.filter((m) => m.type === "error")).toEqual([]);
      expect(messages.map((m) => m.type)).toContain("metadata_ack");
    });
  }

  it("counts characters, not UTF-16 units: 2,001 four-byte characters are one too many", async () => {
    const tooLong = characters("𠀀", 2001);
    const messages = await sessionWith(tooLong, "short");
    expect(messages).toContainEqual(
      expect.objectContaining({
        type: "error",
        error: expect.stringContaining("context is 2001 characters long; the limit is 2000"),
      }),
    );
  });

  it("holds every other route to 16 KiB of request line and headers, with the 431 error body", async () => {
    const padded = (bytes: number) => ({ "x-padding": "a".repeat(bytes) });
    for (const route of ["/livez", "/v1/voices", "/v1/languages"]) {
      const refused = await fetch(new URL(route, server.baseUrl), { headers: padded(17_000) });
      expect(refused.status, route).toBe(431);
      expectErrorBody(await refused.json(), "headers_too_large");
      // Just under the bound still passes.
      expect((await fetch(new URL(route, server.baseUrl), { headers: padded(15_000) })).status).toBe(200);
    }
    // The session route's own bound (16 KiB plus the longest context) holds too.
    const huge = await fetch(new URL("/v1/session", server.baseUrl), {
      headers: { ...padded(45_000), authorization: `Bearer ${API_KEY}` },
    });
    expect(huge.status).toBe(431);
    expectErrorBody(await huge.json(), "headers_too_large");
  });
});
