import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readWavAsPcm16 } from "../../src/audio/wav.js";
import type { RealtimeSocket, ServerMessage } from "../../src/cli/recording-socket.js";
import type { EngineRegistry } from "../../src/engines/routing/registry.js";
import { injectApp } from "../support/app.js";
import { medianPitch } from "../support/audio-measures.js";
import { createTestDatabase, postgresProblem } from "../support/postgres.js";
import { REDIS_URL, redisProblem } from "../support/redis.js";
import { addRoomParticipant, joinRoom, type RoomSession } from "../support/room-client.js";
import { API_KEY, BROKE_KEY, DUBBING_ONLY_KEY, startServer, type TestServer } from "../support/server.js";
import { sharedMissing, sharedPath } from "../support/shared.js";

/**
 * Pinch's own clients against relay, each request exactly as they send it, over real HTTP to the
 * real server:
 * - pinch-sdk 0.1.1 (`PinchClient.create_session`): `{"sourceLanguage": "en-US", "targetLanguage":
 *   "es-ES", "voiceType": "clone"}`; it reads `url`, `token`, `room_name`, prefers the participant
 *   `translation-agent` and its track `translated-audio`, and reads data messages `type`, `text`,
 *   `is_final`.
 * - Pipecat's Pinch service (`PinchApi.new_session`): lower-case bare codes, `voiceType` male, female
 *   or custom with `voiceId`, `enableAudioOutput: false` (and, from a bug of its own,
 *   `enableVideoOutput: false`); `end_session` posts `{"session_id": <room_name>}` to `/session/end`
 *   and needs only a 2xx. It reads `translated_text` of `translated_transcript`.
 * Rooms here are on the embedded room server; the LiveKit side (identity, track name) is in
 * livekit-backend.test.ts.
 */
const SPEECH_MISSING = sharedMissing("data/speech");
let server: TestServer;

beforeAll(async () => {
  server = await startServer({
    RATE_LIMIT_PER_MINUTE: "1000",
    ROOMS_EMPTY_PER_ACCOUNT: "1000",
    // Rooms stay open for their departure timeout after a test: many may be open at once here.
    LIVE_SESSIONS_PER_ACCOUNT: "100",
  });
});
afterAll(async () => {
  await server?.close();
});

interface Answer {
  readonly status: number;
  readonly body: Record<string, unknown> & { error?: { code: string; message: string } };
}

/** A POST as the clients make it (JSON body, bearer key), over HTTP. */
async function post(target: TestServer, route: string, body: unknown, key: string | undefined = API_KEY) {
  const response = await fetch(new URL(route, target.baseUrl), {
    method: "POST",
    headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Answer["body"] };
}

const openSession = (body: unknown, target = server, key = API_KEY) =>
  post(target, "/api/beta1/session", body, key);
const endSession = (roomName: string, target = server, key = API_KEY) =>
  post(target, "/api/beta1/session/end", { session_id: roomName }, key);

function room(answer: Answer): RoomSession {
  expect(answer).toMatchObject({
    status: 200,
    body: { room_name: expect.stringMatching(/^api-[0-9a-f]{20}$/) },
  });
  return answer.body as unknown as RoomSession;
}

async function openRooms(target: TestServer): Promise<number> {
  const health = await fetch(new URL("/healthz", target.baseUrl));
  return ((await health.json()) as { rooms: { open: number } }).rooms.open;
}

describe("POST /api/beta1/session as Pinch's clients send it", () => {
  it("pinch-sdk 0.1.1: camelCase languages with regions and voiceType clone", async () => {
    const { body } = await openSession({
      sourceLanguage: "en-US",
      targetLanguage: "es-ES",
      voiceType: "clone",
    });
    // The spec's three, and beyond it what clone speaks with (no tone colour model here).
    expect(Object.keys(body).sort()).toEqual(["room_name", "token", "url", "voice_clone"]);
    expect(body.voice_clone).toBe("library");
    const access = room({ status: 200, body });
    // The embedded room names its translator as LiveKit rooms do.
    const socket = await joinRoom(access);
    expect(socket.messages[0]).toMatchObject({
      type: "joined",
      participants: [],
      translator: { identity: "translation-agent", audio_track: "translated-audio" },
    });
    socket.close();
  });

  it("Pipecat: bare lower-case codes, male/female, custom with voiceId, no audio output, enableVideoOutput", async () => {
    const shapes = [
      { sourceLanguage: "en", targetLanguage: "es", voiceType: "female" },
      { sourceLanguage: "en", targetLanguage: "es", voiceType: "male" },
      { sourceLanguage: "en", targetLanguage: "es", voiceType: "custom", voiceId: "12" },
      { sourceLanguage: "en", targetLanguage: "es", voiceType: "female", enableAudioOutput: false },
      { sourceLanguage: "en", targetLanguage: "es", voiceType: "female", enableVideoOutput: false },
    ];
    for (const shape of shapes) {
      const answer = await openSession(shape);
      expect({ shape, status: answer.status }).toEqual({ shape, status: 200 });
      expect((await endSession(room(answer).room_name)).status).toBe(200);
    }
    const silent = room(
      await openSession({
        sourceLanguage: "en",
        targetLanguage: "es",
        voiceType: "female",
        enableAudioOutput: false,
      }),
    );
    const socket = await joinRoom(silent);
    expect(socket.messages[0]).toMatchObject({
      translator: { identity: "translation-agent", audio_track: null },
    });
    socket.close();
  });

  it("refuses what cannot work, naming the field as the client spelled it", async () => {
    const en = { sourceLanguage: "en", targetLanguage: "es" };
    const cases: [unknown, string, RegExp][] = [
      [{ ...en, voiceType: "custom" }, "invalid_request", /voiceType "custom" needs voice_id \(or voiceId\)/],
      [
        { ...en, voiceType: "custom", voiceId: "9999" },
        "invalid_request",
        /voiceId "9999" is no library voice/,
      ],
      [{ ...en, voiceType: "custom", voiceId: "" }, "invalid_request", /voiceId "" is no library voice/],
      [
        { ...en, voiceType: "male", voiceId: "12" },
        "invalid_request",
        /voiceId names a voice only with voiceType "custom"/,
      ],
      [
        { ...en, voiceType: "robot" },
        "invalid_request",
        /voiceType must be "clone", "female", "male" or "custom"/,
      ],
      [{ ...en, enableAudioOutput: "no" }, "invalid_request", /enableAudioOutput must be true or false/],
      [{ ...en, sourceLanguage: 5 }, "invalid_request", /sourceLanguage must be a string/],
      [
        { targetLanguage: "es" },
        "invalid_request",
        /source_language is required.*sourceLanguage is read too/,
      ],
      [{ sourceLanguage: "en" }, "invalid_request", /target_language is required/],
      [
        { ...en, sourceLanguage: "english" },
        "invalid_language",
        /sourceLanguage "english" is not a language code/,
      ],
      [{ ...en, sourceLanguage: "de-DE" }, "invalid_language", /sourceLanguage "de-DE" cannot be recognized/],
      [
        { ...en, targetLanguage: "ja-JP" },
        "invalid_language",
        /targetLanguage "ja-JP" is not supported from sourceLanguage "en"/,
      ],
    ];
    for (const [body, code, message] of cases) {
      const answer = await openSession(body);
      expect({ body, status: answer.status, code: answer.body.error?.code }).toEqual({
        body,
        status: 400,
        code,
      });
      expect(answer.body.error!.message).toMatch(message);
    }
  });

  it("reads both spellings of a field; when both are sent, the spec's snake_case wins", async () => {
    // The camelCase values alone would be refused (German is not recognized, Japanese not reached).
    room(
      await openSession({
        source_language: "en-US",
        sourceLanguage: "de-DE",
        target_language: "es-ES",
        targetLanguage: "ja-JP",
        voice_type: "male",
        voiceType: "custom",
        enable_audio_output: true,
        enableAudioOutput: false,
      }),
    );
    // Spellings mix freely, one per field.
    const mixed = room(
      await openSession({
        source_language: "en-US",
        targetLanguage: "es",
        voice_type: "custom",
        voiceId: 36,
      }),
    );
    const socket = await joinRoom(mixed);
    expect(socket.messages[0]).toMatchObject({ translator: { audio_track: "translated-audio" } });
    socket.close();
    // The spec's names alone keep working.
    room(await openSession({ source_language: "en-US", target_language: "es-ES", voice_type: "clone" }));
  });

  it("without audio output, a target the engines cannot speak is servable", async () => {
    // The same engines with no speech synthesis at all.
    const mute: EngineRegistry = Object.assign(Object.create(server.registry) as EngineRegistry, {
      synthesizer: () => undefined,
      voiceLanguages: () => [],
    });
    const app = await injectApp({}, { registry: mute });
    try {
      const request = (body: unknown) =>
        app.inject("/api/beta1/session", {
          method: "POST",
          headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" },
          body: JSON.stringify(body),
        });
      const speaking = await request({ sourceLanguage: "en", targetLanguage: "es", voiceType: "female" });
      expect(speaking.status).toBe(400);
      expect(((await speaking.json()) as Answer["body"]).error).toEqual({
        code: "invalid_language",
        message: expect.stringMatching(/targetLanguage "es" has no voice output.*enable_audio_output false/),
      });
      const silent = await request({
        sourceLanguage: "en",
        targetLanguage: "es",
        voiceType: "female",
        enableAudioOutput: false,
      });
      expect(silent.status).toBe(200);
    } finally {
      await app.close();
    }
  });
});

describe.skipIf(SPEECH_MISSING)("what the clients receive in the room", () => {
  let goForward: Int16Array;
  beforeAll(async () => {
    goForward = await readWavAsPcm16(sharedPath("data/speech/librivox-pocketsphinx/goforward.wav"));
  });

  const withSilence = (pcm: Int16Array) => {
    const padded = new Int16Array(pcm.length + 24_000);
    padded.set(pcm);
    return padded;
  };
  const finalTranslation = (m: ServerMessage) =>
    m.type === "translated_transcript" && m.is_final === true && /diez metros/iu.test(String(m.text));

  async function speak(access: RoomSession, pcm: Int16Array): Promise<RealtimeSocket> {
    const socket = await joinRoom(access);
    await socket.stream(withSilence(pcm), { chunkMs: 20, speed: 4 });
    await socket.waitFor(finalTranslation, 30_000);
    await socket.settle(1500);
    socket.close();
    return socket;
  }

  const audioOf = (socket: RealtimeSocket) => {
    const all = new Float32Array(socket.audioFrames.reduce((sum, f) => sum + f.length, 0));
    let offset = 0;
    for (const frame of socket.audioFrames) {
      all.set(frame, offset);
      offset += frame.length;
    }
    return all;
  };

  it("transcripts as data messages with type, text and is_final (and translated_text), and speech", async () => {
    const access = room(
      await openSession({ sourceLanguage: "en-US", targetLanguage: "es-ES", voiceType: "clone" }),
    );
    const socket = await speak(access, goForward);
    const transcripts = socket.messages.filter(
      (m) => m.type === "original_transcript" || m.type === "translated_transcript",
    );
    expect(transcripts.length).toBeGreaterThan(1);
    for (const message of transcripts) {
      expect(message).toMatchObject({ text: expect.any(String), is_final: expect.any(Boolean) });
    }
    const translated = socket.messages.filter(finalTranslation).at(-1)!;
    // pinch-sdk reads `text`, Pipecat `translated_text`: the same translation.
    expect(translated.translated_text).toBe(translated.text);
    expect(socket.messages.some((m) => m.type === "original_transcript" && m.is_final === true)).toBe(true);
    expect(audioOf(socket).length / 24_000).toBeGreaterThan(0.8);
  });

  it("enableAudioOutput false: the same transcripts, and no speech at all", async () => {
    const access = room(
      await openSession({
        sourceLanguage: "en",
        targetLanguage: "es",
        voiceType: "female",
        enableAudioOutput: false,
      }),
    );
    const socket = await speak(access, goForward);
    expect(socket.messages.filter(finalTranslation).length).toBeGreaterThan(0);
    expect(socket.audioFrames).toHaveLength(0);
  });

  it('voiceType "custom": voiceId is the voice that speaks (female 1 high, male 36 low)', async () => {
    const pitchWith = async (voiceId: string) => {
      const access = room(
        await openSession({ sourceLanguage: "en", targetLanguage: "es", voiceType: "custom", voiceId }),
      );
      return medianPitch({ samples: audioOf(await speak(access, goForward)), sampleRate: 24_000 });
    };
    expect(await pitchWith("1")).toBeGreaterThan(165);
    expect(await pitchWith("36")).toBeLessThan(165);
  });
});

describe("POST /api/beta1/session/end as Pipecat sends it", () => {
  let small: TestServer;
  beforeAll(async () => {
    // One session slot: whether ending a room frees it shows at once.
    small = await startServer(
      { MAX_SESSIONS: "1", ROOM_DEPARTURE_TIMEOUT_SEC: "1" },
      { registry: server.registry },
    );
  });
  afterAll(async () => {
    await small?.close();
  });

  it("ends the room for its owner: everyone disconnected, the slot freed; again: 200; others: 404", async () => {
    const pipecat = { sourceLanguage: "en", targetLanguage: "es", voiceType: "female" };
    const access = room(await openSession(pipecat, small));
    const participant = await joinRoom(access);
    const listener = await joinRoom(await addRoomParticipant(small.baseUrl, API_KEY, access.room_name));
    expect((await openSession(pipecat, small)).body.error?.code).toBe("capacity_exhausted");

    // Another account: as if the room did not exist, and the room stays.
    const stranger = await endSession(access.room_name, small, BROKE_KEY);
    expect(stranger).toEqual({
      status: 404,
      body: {
        error: { code: "not_found", message: `no room ${access.room_name} created with this API key` },
      },
    });
    expect(participant.isOpen).toBe(true);

    expect(await endSession(access.room_name, small)).toEqual({
      status: 200,
      body: { session_id: access.room_name, status: "ended" },
    });
    for (const socket of [participant, listener]) {
      expect(await socket.closed(5_000)).toBe(1000);
      expect(socket.closeReason).toBe("room closed");
    }
    expect(await openRooms(small)).toBe(0);
    const next = room(await openSession(pipecat, small));

    // Idempotent for its owner, still unknown to anyone else.
    expect(await endSession(access.room_name, small)).toMatchObject({
      status: 200,
      body: { status: "ended" },
    });
    expect((await endSession(access.room_name, small, BROKE_KEY)).status).toBe(404);
    expect((await endSession(next.room_name, small)).status).toBe(200);
  });

  it("ends a room that already closed by itself (its last participant left)", async () => {
    const access = room(await openSession({ sourceLanguage: "en", targetLanguage: "es" }, small));
    const participant = await joinRoom(access);
    participant.close();
    await expect.poll(() => openRooms(small)).toBe(0);
    expect(await endSession(access.room_name, small)).toMatchObject({
      status: 200,
      body: { status: "ended" },
    });
  });

  it("answers 404 for unknown rooms, 400 without session_id, and authenticates as room creation does", async () => {
    expect((await endSession("api-00000000000000000000", small)).status).toBe(404);
    expect((await endSession("ended:api-00000000000000000000", small)).status).toBe(404);
    const missing = await post(small, "/api/beta1/session/end", { room_name: "api-x" });
    expect(missing).toMatchObject({ status: 400, body: { error: { code: "invalid_request" } } });
    expect(missing.body.error!.message).toMatch(/session_id is required/);
    expect((await endSession("api-x", small, "")).body.error?.code).toBe("unauthorized");
    expect((await endSession("api-x", small, "not-a-key")).status).toBe(401);
    expect((await endSession("api-x", small, DUBBING_ONLY_KEY)).status).toBe(
      (await openSession({ sourceLanguage: "en", targetLanguage: "es" }, small, DUBBING_ONLY_KEY)).status,
    );
  });
});

const fleetProblem = (await postgresProblem()) ?? (await redisProblem());

describe.skipIf(fleetProblem)("ending a room through another process of the fleet", () => {
  let database: { url: string; drop(): Promise<void> };
  let dataDir: string;
  let a: TestServer;
  let b: TestServer;
  const prefix = `relay-test-${randomUUID()}:`;

  beforeAll(async () => {
    database = await createTestDatabase();
    dataDir = await mkdtemp(path.join(tmpdir(), "relay-pinch-fleet-"));
    const env = {
      DATABASE_URL: database.url,
      DATA_DIR: dataDir,
      REDIS_URL,
      REDIS_KEY_PREFIX: prefix,
      SESSION_SECRET: "fleet-test-secret-of-at-least-32-characters",
    };
    a = await startServer({ ...env, WORKER_ID: "pinch-a" }, { registry: server.registry });
    b = await startServer({ ...env, WORKER_ID: "pinch-b" }, { registry: server.registry });
    await b.services.db.accounts.ensureKey("fleet-stranger", { balanceUsd: 10, entitlements: ["rooms"] });
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
    const redis = new Redis(REDIS_URL);
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
    await database?.drop();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it("the host disconnects everyone and frees the slot; either process answers again 200, others 404", async () => {
    const access = room(
      await openSession({ sourceLanguage: "en", targetLanguage: "es", voiceType: "male" }, a),
    );
    const participant = await joinRoom(access);
    await expect.poll(() => a.app.fleet.size + b.app.fleet.size).toBe(4);
    expect((await endSession(access.room_name, b, "fleet-stranger")).status).toBe(404);
    expect(participant.isOpen).toBe(true);

    expect(await endSession(access.room_name, b)).toMatchObject({ status: 200, body: { status: "ended" } });
    expect(await participant.closed(5_000)).toBe(1000);
    expect(await openRooms(a)).toBe(0);
    for (const target of [a, b]) {
      expect(await endSession(access.room_name, target)).toMatchObject({
        status: 200,
        body: { status: "ended" },
      });
      expect((await endSession(access.room_name, target, "fleet-stranger")).status).toBe(404);
    }
  });
});
