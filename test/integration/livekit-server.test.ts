import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { SignJWT } from "jose";
import { RoomServiceClient } from "livekit-server-sdk";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { readWavAsPcm16 } from "../../src/audio/wav.js";
import { HttpError } from "../../src/cli/recording-socket.js";
import { roomServiceUrl } from "../../src/rooms/livekit/backend.js";
import { LiveKitParticipant } from "../support/livekit-participant.js";
import { multilingualEngines } from "../support/multilingual-engines.js";
import type { OpenAiTestServer } from "../support/openai-server.js";
import { addRoomParticipant, createRoomSession, type RoomSession } from "../support/room-client.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";
import { startServiceProcess, type ServiceProcess } from "../support/service-process.js";
import { createTestDatabase } from "../support/postgres.js";
import {
  postgresProblem,
  redisProblem,
  redisUrl,
  testLiveKit,
  type TestLiveKit,
} from "../support/servers.js";
import { sharedMissing, sharedPath } from "../support/shared.js";

/**
 * Rooms on a real LiveKit server (the pinned build, started for the run by the global setup:
 * test/support/servers.ts), with the real service and its embedded engines: participants join with
 * LiveKit's own Node SDK (@livekit/rtc-node), publish real speech over WebRTC on loopback, and hear
 * the translator's track and read its data messages as Pinch's clients do.
 */
const livekit = testLiveKit();
const problem =
  "problem" in livekit
    ? livekit.problem
    : sharedMissing("data/speech/librivox-pocketsphinx")
      ? "../shared speech is missing"
      : undefined;
if (problem) console.warn(`rooms on a real LiveKit server not tested: ${problem}`);

const SPEC_ROOM = { source_language: "en-US", target_language: "es-ES" } as const;
const TRANSLATOR = "translation-agent";

let server: TestServer;
const goForward = problem
  ? new Int16Array()
  : await readWavAsPcm16(sharedPath("data/speech/librivox-pocketsphinx/goforward.wav"));
const participants: LiveKitParticipant[] = [];

function liveKitEnv(target: TestLiveKit): Record<string, string> {
  return {
    LIVEKIT_URL: target.url,
    LIVEKIT_API_KEY: target.apiKey,
    LIVEKIT_API_SECRET: target.apiSecret,
    ROOM_DEPARTURE_TIMEOUT_SEC: "30",
    RATE_LIMIT_PER_MINUTE: "1000",
  };
}

async function join(
  access: { url: string; token: string },
  tracks?: (trackName: string) => boolean,
): Promise<LiveKitParticipant> {
  const participant = await LiveKitParticipant.join(access.url, access.token, tracks ? { tracks } : {});
  participants.push(participant);
  return participant;
}

async function endSession(roomName: string, target: { baseUrl: string } = server): Promise<number> {
  const response = await fetch(`${target.baseUrl}/api/beta1/session/end`, {
    method: "POST",
    headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" },
    body: JSON.stringify({ session_id: roomName }),
  });
  return response.status;
}

/** Waits until the translator is in the room (it joins before the session is answered). */
async function translatorPresent(participant: LiveKitParticipant): Promise<void> {
  await expect.poll(() => participant.room.remoteParticipants.has(TRANSLATOR)).toBe(true);
}

/** Speaks `pcm` and waits for the translator's final translation of it, then for its speech. */
async function speakAndHear(participant: LiveKitParticipant, pcm: Int16Array, finalsBefore = 0) {
  await translatorPresent(participant);
  await participant.untilHeard();
  await participant.speak(pcm);
  const finals = () =>
    participant
      .transcripts(TRANSLATOR)
      .filter((message) => message.type === "translated_transcript" && message.is_final === true);
  await expect.poll(() => finals().length, { interval: 200 }).toBeGreaterThan(finalsBefore);
  return finals();
}

describe.skipIf(problem)("rooms on a real LiveKit server", () => {
  const target = livekit as TestLiveKit;
  const rooms = () => new RoomServiceClient(roomServiceUrl(target.url), target.apiKey, target.apiSecret);

  beforeAll(async () => {
    server = await startServer(liveKitEnv(target));
  });
  afterEach(async () => {
    // Before the service closes: its back-end releases the native runtime these share.
    await Promise.all(participants.splice(0).map((participant) => participant.leave()));
  });
  afterAll(async () => {
    await server?.close();
  });

  it("a spec room: real speech in over WebRTC, the translator's translated-audio track and transcripts out", async () => {
    const session = await createRoomSession(server.baseUrl, API_KEY, SPEC_ROOM);
    // The LiveKit server is where clients go; the room exists there before anyone joins.
    expect(session.url).toBe(target.url);
    // …with the limits the service asked for (ROOM_EMPTY_TIMEOUT_SEC, ROOM_DEPARTURE_TIMEOUT_SEC,
    // ROOM_MAX_PARTICIPANTS and one more for the translator), as LiveKit itself applies them.
    const [created] = await rooms().listRooms([session.room_name]);
    expect(created).toMatchObject({
      name: session.room_name,
      emptyTimeout: 60,
      departureTimeout: 30,
      maxParticipants: 9,
    });
    const alice = await join(session);
    const [final] = await speakAndHear(alice, goForward);
    // Pinch's clients read these fields of a translated final (pinch-sdk, Pipecat's service).
    expect(final).toMatchObject({
      type: "translated_transcript",
      is_final: true,
      source_language: "en",
      target_language: "es",
      participant: alice.identity,
    });
    // Which words PocketSphinx hears over WebRTC depends on the load (Opus on a starved CPU): the
    // words themselves are checked over the lossless WebSocket path (rooms.test.ts).
    expect(String(final!.original_text).trim().length).toBeGreaterThan(0);
    expect(String(final!.text).length).toBeGreaterThan(0);
    const originals = alice.transcripts(TRANSLATOR).filter((m) => m.type === "original_transcript");
    expect(originals.some((m) => m.is_final === true && String(m.text).trim().length > 0)).toBe(true);
    // The translated speech, on the track Pinch's clients look for: sound, not silence.
    await expect
      .poll(() => alice.soundSeconds(`${TRANSLATOR}/translated-audio`), { interval: 250 })
      .toBeGreaterThan(0.5);
    expect([...alice.published].filter((key) => key.startsWith(`${TRANSLATOR}/`))).toEqual([
      `${TRANSLATOR}/translated-audio`,
    ]);
  });

  it("a forging participant can neither send captions nor change its language", async () => {
    const session = await createRoomSession(server.baseUrl, API_KEY, SPEC_ROOM);
    const alice = await join(session);
    const mallory = await join(await addRoomParticipant(server.baseUrl, API_KEY, session.room_name));
    await expect.poll(() => alice.room.remoteParticipants.has(mallory.identity)).toBe(true);
    const forged = {
      type: "translated_transcript",
      text: "Envíen el dinero a Mallory",
      is_final: true,
      participant: alice.identity,
    };
    // Mallory's token grants neither data nor its own metadata: LiveKit drops the message (rtc-node
    // does not tell the sender) and refuses the attribute.
    await mallory.room.localParticipant!.publishData(new TextEncoder().encode(JSON.stringify(forged)), {
      reliable: true,
      topic: "transcript",
    });
    await mallory.room.localParticipant!.setAttributes({ language: "fr" }).catch(() => undefined);
    // The real translation still arrives, and nothing from Mallory did.
    await speakAndHear(alice, goForward);
    expect(alice.data.filter((received) => received.from === mallory.identity)).toEqual([]);
    expect(alice.room.remoteParticipants.get(mallory.identity)?.attributes["language"]).toBeUndefined();
  });

  it("a participant who leaves can come back with the same link, and is translated again", async () => {
    const session = await createRoomSession(server.baseUrl, API_KEY, SPEC_ROOM);
    const first = await join(session);
    await speakAndHear(first, goForward);
    await first.leave();
    const again = await join(session);
    const finals = await speakAndHear(again, goForward);
    expect(finals.every((message) => message.participant === again.identity)).toBe(true);
  });

  it("ending the session disconnects everyone and removes the room from LiveKit", async () => {
    const session = await createRoomSession(server.baseUrl, API_KEY, SPEC_ROOM);
    const alice = await join(session);
    await translatorPresent(alice);
    expect(await endSession(session.room_name)).toBe(200);
    await expect.poll(() => alice.disconnected).toBe(true);
    expect(await rooms().listRooms([session.room_name])).toEqual([]);
    // The room is gone: its link opens nothing any more (LiveKit creates no room on join:
    // room.auto_create is off, as in deploy/livekit.yaml).
    await expect(LiveKitParticipant.join(session.url, session.token)).rejects.toThrow();
  });

  it("LiveKit refuses a token that expired more than its 60 s leeway ago, and a token signed with another secret", async () => {
    const session = await createRoomSession(server.baseUrl, API_KEY, SPEC_ROOM);
    const claims = JSON.parse(Buffer.from(session.token.split(".")[1]!, "base64url").toString()) as Record<
      string,
      unknown
    >;
    const now = Math.floor(Date.now() / 1000);
    const expired = await new SignJWT({ ...claims, nbf: now - 900, exp: now - 120 })
      .setProtectedHeader({ alg: "HS256" })
      .sign(new TextEncoder().encode(target.apiSecret));
    await expect(LiveKitParticipant.join(session.url, expired)).rejects.toThrow();
    const forged = await new SignJWT(claims)
      .setProtectedHeader({ alg: "HS256" })
      .sign(new TextEncoder().encode("not-the-secret-of-this-livekit-server"));
    await expect(LiveKitParticipant.join(session.url, forged)).rejects.toThrow();
    // The token as given still opens the room.
    await join(session);
  });
});

describe.skipIf(problem || sharedMissing("data/speech/fleurs-dev"))(
  "a room in three languages on a real LiveKit server",
  () => {
    const target = livekit as TestLiveKit;
    let remote: OpenAiTestServer;
    let multilingual: TestServer;
    let dir: string;

    beforeAll(async () => {
      // English is real speech through PocketSphinx and Apertium; German goes through the
      // protocol-faithful OpenAI-compatible stand-in (test/support/multilingual-engines.ts).
      dir = await mkdtemp(path.join(tmpdir(), "relay-livekit-languages-"));
      const engines = await multilingualEngines(dir);
      remote = engines.remote;
      multilingual = await startServer({
        ...liveKitEnv(target),
        ENGINES_FILE: engines.enginesFile,
        ROOM_MAX_PARTICIPANTS: "4",
      });
    });
    afterEach(async () => {
      await Promise.all(participants.splice(0).map((participant) => participant.leave()));
    });
    afterAll(async () => {
      await multilingual?.close();
      await remote?.close();
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    it("each listener subscribes to their language's track and receives their language only", async () => {
      const post = async (route: string, body: unknown) => {
        const response = await fetch(`${multilingual.baseUrl}${route}`, {
          method: "POST",
          headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" },
          body: JSON.stringify(body),
        });
        expect(response.status).toBe(200);
        return (await response.json()) as RoomSession & { language?: string };
      };
      const room = await post("/api/beta1/session", { languages: ["en", "es", "de"], voice_type: "female" });
      const es = await post(`/api/beta1/session/${room.room_name}/participants`, { language: "es" });
      const de = await post(`/api/beta1/session/${room.room_name}/participants`, { language: "de" });
      const alice = await join(room, () => false);
      const bruno = await join(es, (name) => name === "translated-audio-es");
      const clara = await join(de, (name) => name === "translated-audio-de");
      await translatorPresent(alice);
      await alice.untilHeard();
      await alice.speak(goForward);
      const finals = (listener: LiveKitParticipant) =>
        listener
          .transcripts(TRANSLATOR)
          .filter((m) => m.type === "translated_transcript" && m.is_final === true);
      for (const listener of [bruno, clara]) {
        await expect.poll(() => finals(listener).length, { interval: 250 }).toBeGreaterThan(0);
      }
      // Each hears their language's speech, on their language's track, and nothing else.
      await expect
        .poll(() => bruno.soundSeconds(`${TRANSLATOR}/translated-audio-es`), { interval: 250 })
        .toBeGreaterThan(0.3);
      await expect
        .poll(() => clara.soundSeconds(`${TRANSLATOR}/translated-audio-de`), { interval: 250 })
        .toBeGreaterThan(0.3);
      expect([...bruno.heard.keys()]).toEqual([`${TRANSLATOR}/translated-audio-es`]);
      expect([...clara.heard.keys()]).toEqual([`${TRANSLATOR}/translated-audio-de`]);
      expect([...alice.heard.keys()]).toEqual([]);
      // Translations reach their language's listeners only; the speaker gets none of her own.
      const translated = (listener: LiveKitParticipant) =>
        listener.transcripts(TRANSLATOR).filter((m) => m.type === "translated_transcript");
      expect(translated(bruno).every((m) => m.language === "es")).toBe(true);
      expect(translated(clara).every((m) => m.language === "de")).toBe(true);
      expect(
        finals(clara)
          .map((m) => m.translated_text)
          .join(" "),
      ).toMatch(/\[German\]/u);
      expect(translated(alice)).toEqual([]);
    });
  },
);

const fleetProblem = problem ?? (await postgresProblem()) ?? (await redisProblem());

describe.skipIf(fleetProblem)("a fleet on one LiveKit server: two processes, PostgreSQL and Redis", () => {
  const target = livekit as TestLiveKit;
  let database: { url: string; drop(): Promise<void> };
  let dataDir: string;
  let a: ServiceProcess;
  let b: TestServer;
  const prefix = `relay-test-${randomUUID()}:`;
  const openRooms = async (process: { baseUrl: string }) =>
    ((await (await fetch(`${process.baseUrl}/healthz`)).json()) as { rooms: { open: number } }).rooms.open;

  beforeAll(async () => {
    database = await createTestDatabase();
    dataDir = await mkdtemp(path.join(tmpdir(), "relay-livekit-fleet-"));
    const env = {
      ...liveKitEnv(target),
      DATABASE_URL: database.url,
      DATA_DIR: dataDir,
      REDIS_URL: redisUrl(),
      REDIS_KEY_PREFIX: prefix,
      SESSION_SECRET: "fleet-test-secret-of-at-least-32-characters",
    };
    // The translator's host is a process of its own (the build, as `npm start` runs it); the other
    // serves in this one.
    a = await startServiceProcess("livekit-a", { ...env, API_KEYS: API_KEY, LOG_LEVEL: "warn" });
    b = await startServer({ ...env, WORKER_ID: "livekit-b" });
  });
  afterEach(async () => {
    await Promise.all(participants.splice(0).map((participant) => participant.leave()));
  });
  afterAll(async () => {
    await b?.close();
    a?.child.kill("SIGTERM");
    await a?.exited;
    const redis = new Redis(redisUrl());
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
    await database?.drop();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it("a room created through one process is translated there and ended through the other", async () => {
    const session = await createRoomSession(a.baseUrl, API_KEY, SPEC_ROOM);
    const alice = await join(session);
    await speakAndHear(alice, goForward);
    expect(await openRooms(a)).toBe(1);
    expect(await openRooms(b)).toBe(0);
    // b hosts no translator for it: it finds the room's host through Redis and has it end there.
    expect(await endSession(session.room_name, b)).toBe(200);
    await expect.poll(() => alice.disconnected).toBe(true);
    expect(await openRooms(a)).toBe(0);
    const rooms = new RoomServiceClient(roomServiceUrl(target.url), target.apiKey, target.apiSecret);
    expect(await rooms.listRooms([session.room_name])).toEqual([]);
    expect(await endSession(session.room_name, a)).toBe(200);
  });
});

describe.skipIf(problem)("a LiveKit server the service cannot use", () => {
  const target = livekit as TestLiveKit;

  it("wrong keys: creating a room fails with a clear error, and no room or translator is left", async () => {
    const wrong = await startServer({
      ...liveKitEnv(target),
      LIVEKIT_API_SECRET: "a-wrong-secret-for-this-livekit-server",
    });
    try {
      const error = await createRoomSession(wrong.baseUrl, API_KEY, SPEC_ROOM).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(HttpError);
      const body = (error as HttpError).body as { error: { code: string; message: string } };
      // The spec's 500 internal_error, saying what LiveKit answered.
      expect((error as HttpError).status).toBe(500);
      expect(body.error.code).toBe("internal_error");
      expect(body.error.message).toMatch(/LiveKit room service .* could not create room .*401/iu);
      const listed = await new RoomServiceClient(
        roomServiceUrl(target.url),
        target.apiKey,
        target.apiSecret,
      ).listRooms();
      expect(listed.filter((room) => room.numParticipants > 0 && room.name.startsWith("api-"))).toEqual([]);
    } finally {
      await wrong.close();
    }
  });

  it("an unreachable URL: creating a room fails with a clear error", async () => {
    const unreachable = await startServer({ ...liveKitEnv(target), LIVEKIT_URL: "ws://127.0.0.1:9" });
    try {
      const error = await createRoomSession(unreachable.baseUrl, API_KEY, SPEC_ROOM).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(HttpError);
      expect((error as HttpError).status).toBe(500);
      expect(JSON.stringify((error as HttpError).body)).toMatch(
        /LiveKit room service at http:\/\/127\.0\.0\.1:9 /u,
      );
    } finally {
      await unreachable.close();
    }
  });
});
