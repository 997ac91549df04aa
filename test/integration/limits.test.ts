import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { createSession, RealtimeSocket } from "../../src/cli/recording-socket.js";
import { injectApp, type InjectedApp } from "../support/app.js";
import { createRoomSession } from "../support/room-client.js";
import { API_KEY, DUBBING_ONLY_KEY, startServer, type TestServer } from "../support/server.js";
import { openSession } from "../support/session-socket.js";
import { concatPcm } from "../../src/audio/pcm.js";
import { readWavAsPcm16 } from "../../src/audio/wav.js";
import { sharedMissing, sharedPath } from "../support/shared.js";

/**
 * Limits that hold for every client: one careless or hostile client cannot hurt the others.
 * HTTP-only checks go through `inject()`; the port serves the WebSocket and raw-socket tests. The
 * services configured differently are injected apps sharing this server's engines.
 */

const OTHER_KEY = "other-key";
let server: TestServer;

beforeAll(async () => {
  server = await startServer({
    API_KEYS: `${API_KEY},${OTHER_KEY},${DUBBING_ONLY_KEY}:10:dubbing`,
    MAX_SESSIONS: "6",
    RATE_LIMIT_PER_MINUTE: "4",
    UNCLAIMED_SESSIONS_PER_ACCOUNT: "3",
  });
});
afterAll(async () => {
  await server?.close();
});

interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  readonly body: { error?: { code: string; message: string } } & Record<string, unknown>;
}

/** A request through `inject()` (to this file's server unless `target` says otherwise). */
async function request(
  method: string,
  path: string,
  options: { authorization?: string; body?: string; headers?: Record<string, string> } = {},
  target: TestServer | InjectedApp = server,
): Promise<Answer> {
  const response = await target.inject(path, {
    method,
    headers: {
      ...(options.authorization ? { authorization: options.authorization } : {}),
      ...(options.body !== undefined ? { "content-type": "application/json" } : {}),
      ...options.headers,
    },
    body: options.body,
  });
  const text = await response.text();
  return {
    status: response.status,
    headers: response.headers,
    text,
    body: JSON.parse(text) as Answer["body"],
  };
}

/** A request over the port, for a URL the service handed out (a `ws_url` fetched as plain HTTP). */
async function requestOverPort(url: string): Promise<Answer> {
  const response = await fetch(url);
  const text = await response.text();
  return {
    status: response.status,
    headers: response.headers,
    text,
    body: JSON.parse(text) as Answer["body"],
  };
}

function expectErrorBody(answer: Answer, code: string): void {
  expect(answer.body).toEqual({ error: { code, message: expect.any(String) } });
}

/** Sends raw bytes and returns the raw HTTP answer (for requests no HTTP client would send). */
function rawRequest(bytes: string): Promise<string> {
  const { port } = new URL(server.baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), "127.0.0.1", () => socket.end(bytes));
    const chunks: Buffer[] = [];
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    socket.on("close", () => resolve(Buffer.concat(chunks).toString("utf8")));
    socket.on("error", reject);
  });
}

function parseRaw(raw: string): { status: number; body: unknown } {
  const [head, body] = raw.split("\r\n\r\n");
  return { status: Number(/^HTTP\/1\.1 (\d{3})/u.exec(head ?? "")?.[1]), body: JSON.parse(body ?? "") };
}

describe("rate limits", () => {
  it("count per account whatever the spelling of the Authorization header", async () => {
    const room = JSON.stringify({ source_language: "en-US", target_language: "es-ES" });
    const upload = JSON.stringify({ filename: "a.mp4", content_type: "video/mp4" });
    const spellings = [`Bearer ${API_KEY}`, `bearer ${API_KEY}`, `BEARER ${API_KEY}`, `Bearer  ${API_KEY}`];
    const statuses: number[] = [];
    for (const authorization of [...spellings, `bEaReR ${API_KEY} `]) {
      statuses.push(
        (await request("POST", "/api/dubbing/upload-url", { authorization, body: upload })).status,
      );
    }
    expect(statuses).toEqual([200, 200, 200, 200, 429]);
    const refused = await request("POST", "/api/beta1/session", { authorization: spellings[1], body: room });
    expect(refused.status).toBe(429);
    expectErrorBody(refused, "rate_limited");
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    // Another account keeps its own budget.
    const other = await request("POST", "/api/dubbing/upload-url", {
      authorization: `Bearer ${OTHER_KEY}`,
      body: upload,
    });
    expect(other.status).toBe(200);
  });

  it("do not charge requests refused with 400 to the budget", async () => {
    const authorization = `Bearer ${DUBBING_ONLY_KEY}`;
    for (let i = 0; i < 8; i++) {
      const invalid = await request("POST", "/api/dubbing/upload-url", {
        authorization,
        body: JSON.stringify({ filename: "a.mp4", content_type: "text/plain" }),
      });
      expect(invalid.status).toBe(400);
    }
    const valid = JSON.stringify({ filename: "a.mp4", content_type: "video/mp4" });
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) {
      statuses.push(
        (await request("POST", "/api/dubbing/upload-url", { authorization, body: valid })).status,
      );
    }
    expect(statuses).toEqual([200, 200, 200, 200, 429]);
  });
});

describe("unclaimed sessions", () => {
  it("are bounded per account (429 with Retry-After) without affecting other accounts", async () => {
    const limited = await injectApp(
      { API_KEYS: `${API_KEY},${OTHER_KEY}`, UNCLAIMED_SESSIONS_PER_ACCOUNT: "3" },
      { registry: server.registry },
    );
    try {
      const auth = { authorization: `Bearer ${API_KEY}` };
      const statuses: number[] = [];
      let last: Answer | undefined;
      for (let i = 0; i < 5; i++) {
        last = await request("GET", "/v1/session", auth, limited);
        statuses.push(last.status);
      }
      expect(statuses).toEqual([200, 200, 200, 429, 429]);
      expectErrorBody(last!, "rate_limited");
      const retryAfter = Number(last!.headers.get("retry-after"));
      expect(retryAfter).toBeGreaterThan(0);
      expect(retryAfter).toBeLessThanOrEqual(60);
      expect(
        (await request("GET", "/v1/session", { authorization: `Bearer ${OTHER_KEY}` }, limited)).status,
      ).toBe(200);
      expect(await limited.app.sessions.pendingCount()).toBe(4);
    } finally {
      await limited.close();
    }
  });

  it("are bounded in total: 503 capacity_exhausted with Retry-After", async () => {
    const limited = await injectApp(
      { API_KEYS: `${API_KEY},${OTHER_KEY}`, UNCLAIMED_SESSIONS_MAX: "2" },
      { registry: server.registry },
    );
    try {
      expect(
        (await request("GET", "/v1/session", { authorization: `Bearer ${API_KEY}` }, limited)).status,
      ).toBe(200);
      expect(
        (await request("GET", "/v1/session", { authorization: `Bearer ${API_KEY}` }, limited)).status,
      ).toBe(200);
      const refused = await request("GET", "/v1/session", { authorization: `Bearer ${OTHER_KEY}` }, limited);
      expect(refused.status).toBe(503);
      expectErrorBody(refused, "capacity_exhausted");
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    } finally {
      await limited.close();
    }
  });

  it("keep only the session parameters, each of bounded length", async () => {
    const auth = { authorization: `Bearer ${OTHER_KEY}` };
    const tooLong = await request("GET", `/v1/session?context=${"x".repeat(4001)}`, auth);
    expect(tooLong.status).toBe(400);
    expectErrorBody(tooLong, "invalid_request");
    expect(tooLong.text).not.toContain("xxxx");
    // A context just over its limit still reaches the socket, where the spec puts its error.
    const overContext = await request(
      "GET",
      `/v1/session?context=${"y".repeat(2001)}&junk=${"z".repeat(3000)}`,
      auth,
    );
    expect(overContext.status).toBe(200);
    const socket = new WebSocket(overContext.body.ws_url as string);
    const frames: Record<string, unknown>[] = [];
    socket.on("message", (data, isBinary) => {
      if (!isBinary) frames.push(JSON.parse(String(data)) as Record<string, unknown>);
    });
    const closeCode = await new Promise<number>((resolve) => socket.on("close", resolve));
    expect(closeCode).toBe(1000);
    expect(frames.map((frame) => frame.type)).toEqual(["ready", "error"]);
    expect(frames[1]!.error).toMatch(/context is 2001 characters long/);
  });
});

describe("model_version_id", () => {
  it("never echoes an invalid modelName", async () => {
    const answer = await request("GET", "/v1/session?modelName=%3Cscript%3Ehello", {
      authorization: `Bearer ${OTHER_KEY}`,
    });
    expect(answer.status).toBe(200);
    expect(answer.body.model_version_id).toMatch(/^relay-1\//);
    expect(answer.text).not.toContain("script");
  });
});

describe("a plain HTTP GET of a ws_url", () => {
  it("gets a JSON error and leaves the session unused", async () => {
    const created = await request("GET", "/v1/session", { authorization: `Bearer ${OTHER_KEY}` });
    const wsUrl = created.body.ws_url as string;
    const preview = await requestOverPort(wsUrl.replace(/^ws/u, "http"));
    expect(preview.status).toBe(426);
    expectErrorBody(preview, "upgrade_required");
    const again = await requestOverPort(wsUrl.replace(/^ws/u, "http"));
    expect(again.status).toBe(426);

    const socket = new WebSocket(wsUrl);
    const ready = await new Promise<Record<string, unknown>>((resolve, reject) => {
      socket.once("message", (data) => resolve(JSON.parse(String(data)) as Record<string, unknown>));
      socket.once("error", reject);
    });
    expect(ready.type).toBe("ready");
    socket.close(1000);
    // Once claimed, the URL is spent for a plain GET too.
    const spent = await requestOverPort(wsUrl.replace(/^ws/u, "http"));
    expect(spent.status).toBe(401);
    expectErrorBody(spent, "unauthorized");
  });
});

describe("every HTTP error has the error body and does not echo the request", () => {
  const marker = "ECHO-MARKER-7f3a";

  /** The status, the error body with its code, and nothing of the request in the answer. */
  function expectRefused(answer: Answer, status: number, code: string): void {
    expect(answer.status).toBe(status);
    expectErrorBody(answer, code);
    expect(answer.text).not.toContain(marker);
  }

  it("404 for an unknown route", async () => {
    const answer = await request("GET", `/no/such/${marker}`);
    expectRefused(answer, 404, "not_found");
  });

  it("413 for a body over the limit", async () => {
    const answer = await request("POST", "/api/beta1/session", {
      authorization: `Bearer ${API_KEY}`,
      body: JSON.stringify({ pad: marker.repeat(200_000) }),
    });
    expectRefused(answer, 413, "payload_too_large");
  });

  it("414 for a path parameter over the limit", async () => {
    const answer = await request("GET", `/api/dubbing/jobs/${marker.repeat(20)}`, {
      authorization: `Bearer ${API_KEY}`,
    });
    expectRefused(answer, 414, "uri_too_long");
  });

  it("415 and malformed JSON bodies", async () => {
    const wrongType = await request("POST", "/api/beta1/session", {
      authorization: `Bearer ${API_KEY}`,
      headers: { "content-type": `application/${marker}` },
      body: "{}",
    });
    expectRefused(wrongType, 415, "unsupported_media_type");
    const badJson = await request("POST", "/api/beta1/session", {
      authorization: `Bearer ${API_KEY}`,
      body: `{"${marker}": nope}`,
    });
    expectRefused(badJson, 400, "invalid_request");
    expect(badJson.text).not.toContain("nope");
  });

  it("431 for headers over the limit", async () => {
    const raw = await rawRequest(`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: ${marker.repeat(2000)}\r\n\r\n`);
    const answer = parseRaw(raw);
    expect(answer.status).toBe(431);
    expect(answer.body).toEqual({ error: { code: "headers_too_large", message: expect.any(String) } });
    expect(raw).not.toContain(marker);
  });

  it("400 for malformed headers and request lines", async () => {
    for (const bytes of [
      `GET /healthz HTTP/1.1\r\nHost: x\r\n${marker} no colon\r\n\r\n`,
      `GET /${marker} HTTP/9.9 extra\r\n\r\n`,
    ]) {
      const raw = await rawRequest(bytes);
      const answer = parseRaw(raw);
      expect(answer.status).toBe(400);
      expect(answer.body).toEqual({ error: { code: "invalid_request", message: expect.any(String) } });
      expect(raw).not.toContain(marker);
    }
    // The service is still there.
    expect((await request("GET", "/healthz")).status).toBe(200);
  });
});

describe("empty rooms", () => {
  it("one account cannot fill the session capacity with rooms nobody joins", async () => {
    const room = JSON.stringify({ source_language: "en-US", target_language: "es-ES" });
    const limited = await injectApp(
      { API_KEYS: `${API_KEY},${OTHER_KEY}`, MAX_SESSIONS: "6", RATE_LIMIT_PER_MINUTE: "20" },
      { registry: server.registry },
    );
    try {
      // Sent at once, so rooms still being created count too.
      const answers = await Promise.all(
        Array.from({ length: 6 }, () =>
          request("POST", "/api/beta1/session", { authorization: `Bearer ${API_KEY}`, body: room }, limited),
        ),
      );
      const statuses = answers.map((answer) => answer.status).sort();
      expect(statuses).toEqual([200, 200, 200, 200, 429, 429]);
      const refused = answers.find((answer) => answer.status === 429)!;
      expectErrorBody(refused, "rate_limited");
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
      // The rest of the capacity is still there for everyone else.
      expect(
        (await request("GET", "/v1/session", { authorization: `Bearer ${OTHER_KEY}` }, limited)).status,
      ).toBe(200);
      const otherRoom = await request(
        "POST",
        "/api/beta1/session",
        { authorization: `Bearer ${OTHER_KEY}`, body: room },
        limited,
      );
      expect(otherRoom.status).toBe(200);
    } finally {
      await limited.close();
    }
  });
});

describe("live sessions per account", () => {
  it("bound one account's open sockets and rooms together (429), fleet slots stay for the others", async () => {
    const bounded = await startServer(
      { API_KEYS: `${API_KEY},${OTHER_KEY}`, LIVE_SESSIONS_PER_ACCOUNT: "2", MAX_SESSIONS: "6" },
      { registry: server.registry },
    );
    const sockets: RealtimeSocket[] = [];
    try {
      const open = async (key: string) => {
        const socket = await RealtimeSocket.connect((await createSession(bounded.baseUrl, key)).ws_url);
        sockets.push(socket);
        await socket.waitFor((m) => m.type === "ready");
        return socket;
      };
      // A ws_url minted while the account was within its bound, claimed once it is not.
      const late = await createSession(bounded.baseUrl, API_KEY);
      const first = await open(API_KEY);
      await open(API_KEY);
      const refused = await createSession(bounded.baseUrl, API_KEY).catch((error: unknown) => error);
      expect(refused).toMatchObject({
        status: 429,
        body: { error: { code: "rate_limited", message: expect.stringMatching(/2 live sessions/u) } },
      });
      // Rooms hold the same slots.
      await expect(
        createRoomSession(bounded.baseUrl, API_KEY, { source_language: "en-US", target_language: "es-ES" }),
      ).rejects.toMatchObject({ status: 429, body: { error: { code: "rate_limited" } } });
      const beyond = await RealtimeSocket.connect(late.ws_url);
      expect(await beyond.closed()).toBe(4429);
      expect(beyond.messages).toEqual([
        expect.objectContaining({ type: "error", error: expect.stringMatching(/2 live sessions/u) }),
      ]);
      // Another account is not affected.
      await open(OTHER_KEY);
      // Ending one of its sessions gives the account its slot back.
      first.close();
      await first.closed();
      await expect
        .poll(() =>
          createSession(bounded.baseUrl, API_KEY).then(
            () => 200,
            () => 429,
          ),
        )
        .toBe(200);
    } finally {
      for (const socket of sockets) socket.close();
      await bounded.close();
    }
  });
});

describe("idle and overlong sessions", () => {
  let idle: TestServer;
  let short: TestServer;
  beforeAll(async () => {
    idle = await startServer({ SESSION_IDLE_TIMEOUT_SEC: "1" }, { registry: server.registry });
    short = await startServer(
      { SESSION_IDLE_TIMEOUT_SEC: "1", SESSION_MAX_DURATION_SEC: "3" },
      { registry: server.registry },
    );
  });
  afterAll(async () => {
    await idle?.close();
    await short?.close();
  });

  const open = (params: Record<string, string> = {}, target = idle): Promise<RealtimeSocket> =>
    openSession(target.baseUrl, params);

  it("closes a session that sends no audio and no message (4408), after an error frame", async () => {
    const socket = await open();
    expect(await socket.closed()).toBe(4408);
    expect(socket.messages.map((m) => m.type)).toEqual(["ready", "error"]);
    expect(socket.messages[1]!.error).toMatch(/no audio and no message for 1 s/u);
  });

  it("closes a tts session idle after its last speech (4408)", async () => {
    const socket = await open({ mode: "tts", targetLanguage: "en" });
    socket.send({ type: "speak", text: "Hello there." });
    expect(await socket.closed()).toBe(4408);
    const types = socket.messages.map((m) => m.type);
    expect(types.slice(-2)).toEqual(["speech_end", "error"]);
    expect(socket.audioFrames.length).toBeGreaterThan(0);
  });

  // A client that sends a recording faster than real time and then waits: the server is behind it
  // by many idle periods, and the session stays open until the last result is out (a loaded server
  // is 60 s behind the same way).
  it.skipIf(sharedMissing("data/speech/misc/jfk.wav"))(
    "keeps a session open while the server still works on its audio, and closes it an idle period after the last result",
    async () => {
      const jfk = await readWavAsPcm16(sharedPath("data/speech/misc/jfk.wav"));
      const marker = await readWavAsPcm16(sharedPath("data/speech/librivox-pocketsphinx/goforward.wav"));
      const pause = new Int16Array(16_000);
      const recording = concatPcm([jfk, jfk, pause, marker, pause]); // 26 s: within the 30 s backlog
      const socket = await open();
      await socket.stream(recording, { chunkMs: 100, speed: Infinity });
      expect(await socket.closed(240_000)).toBe(4408);
      const { messages } = socket;
      expect(messages.at(-1)).toMatchObject({
        type: "error",
        error: expect.stringMatching(/no audio and no message/u),
      });
      expect(messages.filter((m) => m.type === "error")).toHaveLength(1);
      // The marker, the recording's last utterance, was heard and translated before the close.
      const marked = messages.find(
        (m) => m.type === "original_transcript" && m.is_final === true && /forward/u.test(m.text as string),
      );
      expect(marked, JSON.stringify(messages.filter((m) => m.is_final))).toBeDefined();
      expect(
        messages.some(
          (m) =>
            m.type === "translated_transcript" &&
            m.is_final === true &&
            m.correlation_id === marked!.correlation_id,
        ),
      ).toBe(true);
    },
  );

  it("keeps a session that sends audio past the idle period, and closes it at its maximum length (4409)", async () => {
    const socket = await open({}, short);
    // Silence, frame after frame: activity, though nothing is said.
    const sending = setInterval(() => socket.sendAudio(new Int16Array(1600)), 100);
    try {
      expect(await socket.closed()).toBe(4409);
    } finally {
      clearInterval(sending);
    }
    const errors = socket.messages.filter((m) => m.type === "error");
    expect(errors).toEqual([
      expect.objectContaining({ error: expect.stringMatching(/maximum length of 3 s/u) }),
    ]);
  });
});
