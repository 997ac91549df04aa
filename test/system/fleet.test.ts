/**
 * Two service instances sharing PostgreSQL, Redis and one data directory, as processes of a fleet
 * do: a `ws_url` from one is claimed (once) on the other, request budgets and unclaimed-session
 * bounds are the fleet's, `GET /v1/session` answers 503 only when every process is full, rooms are
 * reached through either process, a setup the others cannot work with is refused at start, and a
 * process that shuts down leaves the fleet at once; the account slots of a process killed with -9
 * are freed once the others find it gone. (Three processes behind nginx, with S3 storage and
 * `kill -9`: fleet-nginx.test.ts.)
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readWavAsPcm16 } from "../../src/audio/wav.js";
import { createSession, HttpError, RealtimeSocket } from "../../src/cli/recording-socket.js";
import { addRoomParticipant, createRoomSession, joinRoom } from "../support/room-client.js";
import { HEARTBEAT_MS } from "../../src/fleet/membership.js";
import { until } from "../support/wait.js";
import { createTestDatabase, postgresProblem } from "../support/postgres.js";
import { REDIS_URL, redisProblem } from "../support/redis.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";
import { startServiceProcess } from "../support/service-process.js";
import { sharedMissing, sharedPath } from "../support/shared.js";

const problem = (await postgresProblem()) ?? (await redisProblem());
if (problem) console.warn(`fleet tests skipped: ${problem}`);

let database: { url: string; drop(): Promise<void> };
let dataDir: string;
let a: TestServer;
let b: TestServer;
const prefix = `relay-test-${randomUUID()}:`;
let env: Record<string, string>;

beforeAll(async () => {
  if (problem) return;
  database = await createTestDatabase();
  dataDir = await mkdtemp(path.join(tmpdir(), "relay-fleet-"));
  env = {
    DATABASE_URL: database.url,
    DATA_DIR: dataDir,
    REDIS_URL,
    REDIS_KEY_PREFIX: prefix,
    RATE_LIMIT_PER_MINUTE: "3",
    UNCLAIMED_SESSIONS_PER_ACCOUNT: "100",
    MAX_SESSIONS: "1",
    SESSION_SECRET: "fleet-test-secret-of-at-least-32-characters",
  };
  a = await startServer({ ...env, WORKER_ID: "fleet-a" });
  b = await startServer({ ...env, WORKER_ID: "fleet-b" }, { registry: a.registry });
  // a joined first: it learns of b at its next heartbeat.
  await until(async () => (await fleetSize(a)) === 2, "a to see b");
});
afterAll(async () => {
  await b?.close();
  await a?.close();
  if (problem) return;
  const redis = new Redis(REDIS_URL);
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
  await database.drop();
  await rm(dataDir, { recursive: true, force: true });
});

async function uploadUrl(
  server: TestServer,
  key: string,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(new URL("/api/dubbing/upload-url", server.baseUrl), {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ filename: "talk.mp4", content_type: "video/mp4" }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** The same `ws_url` on another process: the path and token are the credential, the host is the route. */
function on(server: { readonly baseUrl: string }, wsUrl: string): string {
  const url = new URL(wsUrl);
  url.host = new URL(server.baseUrl).host;
  return url.toString();
}

async function sessionStatus(server: TestServer, key = API_KEY): Promise<number> {
  return createSession(server.baseUrl, key).then(
    () => 200,
    (error: unknown) => (error instanceof HttpError ? error.status : 0),
  );
}

/** The live processes of the fleet, as `server` knows them. */
async function fleetSize(server: TestServer): Promise<number> {
  const health = (await (await fetch(new URL("/healthz", server.baseUrl))).json()) as {
    fleet: { processes: number };
  };
  return health.fleet.processes;
}

/** Gives the account slot `holderId` holds in Redis a lease of `ms` from now, as a lease that long would. */
async function extendLease(holderId: string, ms: number): Promise<void> {
  const redis = new Redis(REDIS_URL);
  try {
    for (const key of await redis.keys(`${prefix}live:*`)) {
      if ((await redis.zadd(key, "XX", "CH", Date.now() + ms, holderId)) === 1) {
        await redis.pexpire(key, ms);
        return;
      }
    }
    throw new Error(`no account slot is held by ${holderId}`);
  } finally {
    redis.disconnect();
  }
}

describe.skipIf(problem !== undefined)("a fleet of two processes", () => {
  it("claims a ws_url minted by one process on the other, exactly once, naming the serving process", async () => {
    const created = await createSession(a.baseUrl, API_KEY, { sourceLanguage: "en", targetLanguage: "es" });
    // A plain GET on either process leaves the session unused.
    expect((await fetch(on(b, created.ws_url).replace(/^ws/u, "http"))).status).toBe(426);
    const socket = await RealtimeSocket.connect(on(b, created.ws_url));
    const ready = await socket.waitFor((m) => m.type === "ready");
    expect(ready).toMatchObject({ session_id: created.session_id, worker_id: "fleet-b" });
    // Claimed on b: refused on a and on b alike.
    for (const server of [a, b]) {
      await expect(RealtimeSocket.connect(on(server, created.ws_url))).rejects.toMatchObject({ status: 401 });
    }
    socket.close();
    await socket.closed();
  });

  it("shares one account's bound on unclaimed sessions across the processes", async () => {
    const other = await startServer(
      { ...env, WORKER_ID: "fleet-limits", UNCLAIMED_SESSIONS_PER_ACCOUNT: "2" },
      {
        registry: a.registry,
      },
    );
    try {
      // A key of its own: the bound counts this key's sessions, fleet-wide.
      const key = "fleet-bound-key";
      await other.services.db.accounts.ensureKey(key, { balanceUsd: 10, entitlements: ["realtime"] });
      expect((await createSession(other.baseUrl, key)).session_id).toBeTruthy();
      expect((await createSession(a.baseUrl, key)).session_id).toBeTruthy();
      // Two unclaimed: the third is refused by the process whose bound is 2, though it created one.
      await expect(createSession(other.baseUrl, key)).rejects.toMatchObject({
        status: 429,
        body: { error: { code: "rate_limited" } },
      });
    } finally {
      await other.close();
    }
  });

  it("bounds one account's live sessions across the processes", async () => {
    const other = await startServer(
      { ...env, WORKER_ID: "fleet-live", LIVE_SESSIONS_PER_ACCOUNT: "1", MAX_SESSIONS: "2" },
      { registry: a.registry },
    );
    try {
      const key = "fleet-live-key";
      await other.services.db.accounts.ensureKey(key, { balanceUsd: 10, entitlements: ["realtime"] });
      const late = await createSession(other.baseUrl, key);
      // The account's one session is open on a…
      const first = await RealtimeSocket.connect(on(a, (await createSession(a.baseUrl, key)).ws_url));
      await first.waitFor((m) => m.type === "ready");
      // …so the process whose bound is 1 refuses another, and closes a socket claimed beyond it.
      await expect(createSession(other.baseUrl, key)).rejects.toMatchObject({
        status: 429,
        body: { error: { code: "rate_limited" } },
      });
      const beyond = await RealtimeSocket.connect(on(other, late.ws_url));
      expect(await beyond.closed()).toBe(4429);
      expect(beyond.messages.map((m) => m.type)).toEqual(["error"]);
      // Another account still gets a session there.
      expect((await createSession(other.baseUrl, API_KEY)).session_id).toBeTruthy();
      first.close();
      await first.closed();
      await expect
        .poll(() =>
          createSession(other.baseUrl, key).then(
            () => 200,
            () => 429,
          ),
        )
        .toBe(200);
    } finally {
      await other.close();
    }
    // The next tests count on a fleet of two: both must have seen this process leave.
    await expect.poll(() => fleetSize(a)).toBe(2);
    await expect.poll(() => fleetSize(b)).toBe(2);
  });

  it("counts one key's requests once across the processes", async () => {
    const key = "fleet-rate-key";
    await a.services.db.accounts.ensureKey(key, { balanceUsd: 10, entitlements: ["dubbing"] });
    // 3 a minute for the key: two on one process and one on the other use it up…
    expect((await uploadUrl(a, key)).status).toBe(200);
    expect((await uploadUrl(b, key)).status).toBe(200);
    expect((await uploadUrl(a, key)).status).toBe(200);
    // …so the next is refused whichever process takes it.
    for (const server of [b, a]) {
      const refused = await uploadUrl(server, key);
      expect(refused.status).toBe(429);
      expect(refused.body).toMatchObject({ error: { code: "rate_limited" } });
    }
  });

  it("answers 503 for a new session only when every process is full (one slot each)", async () => {
    const first = await RealtimeSocket.connect(on(a, (await createSession(a.baseUrl, API_KEY)).ws_url));
    let second: RealtimeSocket | undefined;
    try {
      await first.waitFor((m) => m.type === "ready");
      // a is full, b is not: a still hands out sessions (once it has b's latest heartbeat: on a
      // loaded machine one may be late).
      await expect.poll(() => sessionStatus(a)).toBe(200);
      second = await RealtimeSocket.connect(on(b, (await createSession(a.baseUrl, API_KEY)).ws_url));
      await second.waitFor((m) => m.type === "ready");
      // Both full: refused on each once it has heard the other's heartbeat (b may not have
      // heard a's since a filled up).
      await expect.poll(() => sessionStatus(a)).toBe(503);
      await expect.poll(() => sessionStatus(b)).toBe(503);
      // A socket arriving at a full process is closed with 4503.
      second.close();
      await second.closed();
      const late = await createSession(b.baseUrl, API_KEY);
      const refused = await RealtimeSocket.connect(on(a, late.ws_url));
      await refused.closed();
      expect(refused.closeCode).toBe(4503);
    } finally {
      // Free both slots whatever happened, so the next tests find the fleet empty.
      second?.close();
      first.close();
      await Promise.all([first.closed(), second?.closed()]);
    }
    await expect.poll(() => sessionStatus(b)).toBe(200);
    await expect.poll(() => sessionStatus(a)).toBe(200);
  });

  it.skipIf(sharedMissing("data/speech"))(
    "reaches a room hosted by one process through the other, speech and translation included",
    async () => {
      const room = await createRoomSession(a.baseUrl, API_KEY, {
        source_language: "en-US",
        target_language: "es-ES",
        voice_type: "female",
      });
      // A participant granted by the other process, joining through it.
      const extra = await addRoomParticipant(b.baseUrl, API_KEY, room.room_name);
      const viaB = await joinRoom({ ...extra, url: on(b, extra.url) });
      expect(viaB.messages[0]).toMatchObject({ type: "joined", room_name: room.room_name });
      const direct = await joinRoom(room);
      await viaB.waitFor((m) => m.type === "participant_joined");
      // Speech sent through b reaches the translator on a, and its translation comes back through b.
      await viaB.stream(await readWavAsPcm16(sharedPath("data/speech/librivox-pocketsphinx/goforward.wav")), {
        speed: 4,
      });
      viaB.sendAudio(new Int16Array(16_000));
      // Stable mode may commit the utterance in parts: the one with "ten meters" comes last.
      const translation = (m: { type: string; is_final?: unknown; text?: unknown }) =>
        m.type === "translated_transcript" && m.is_final === true && /metros/iu.test(String(m.text));
      await viaB.waitFor(translation);
      await direct.waitFor(translation);
      await viaB.settle(500);
      expect(viaB.audioFrames.length).toBeGreaterThan(0);
      // Another account's key gets no access to the room on either process.
      await b.services.db.accounts.ensureKey("fleet-stranger", { balanceUsd: 10, entitlements: ["rooms"] });
      await expect(addRoomParticipant(b.baseUrl, "fleet-stranger", room.room_name)).rejects.toMatchObject({
        status: 404,
      });
      viaB.close();
      direct.close();
    },
    60_000,
  );

  it("shares the embedded store on one data directory: uploaded through one process, served by both", async () => {
    const { body } = await uploadUrl(a, API_KEY);
    expect(new URL(body.upload_url as string).host).toBe(new URL(a.baseUrl).host);
    const bytes = Buffer.from("a fleet shares one store");
    const put = await fetch(on(b, body.upload_url as string), {
      method: "PUT",
      headers: body.upload_headers as Record<string, string>,
      body: bytes,
    });
    expect(put.status).toBe(200);
    const key = `uploads/${String(body.upload_id)}`;
    expect(await a.services.store.exists(key)).toBe(true);
    const download = await a.services.store.presignDownload(key, { expiresInSec: 60 });
    for (const server of [a, b]) {
      const got = await fetch(on(server, download.url));
      expect(Buffer.from(await got.arrayBuffer())).toEqual(bytes);
    }
  });

  it("refuses to start a process whose setup the others cannot work with, saying what to change", async () => {
    const refusal = (overrides: Record<string, string>) =>
      startServer(
        { ...env, WORKER_ID: `fleet-odd-${randomUUID()}`, ...overrides },
        { registry: a.registry },
      ).then(
        async (server) => {
          await server.close();
          return "started";
        },
        (error: unknown) => (error as Error).message,
      );
    expect(await refusal({ SESSION_SECRET: "another-secret-of-at-least-32-characters" })).toMatch(
      /sessionSecret differs.*same SESSION_SECRET/u,
    );
    // Its own data directory: an upload to it would be missing on the others.
    const ownDir = await mkdtemp(path.join(tmpdir(), "relay-fleet-odd-"));
    try {
      expect(await refusal({ DATA_DIR: ownDir })).toMatch(/storage differs.*S3-compatible storage/u);
    } finally {
      await rm(ownDir, { recursive: true, force: true });
    }
    const noRedis = { ...env, WORKER_ID: "fleet-no-redis" } as Record<string, string>;
    delete noRedis.REDIS_URL;
    expect(
      await startServer(noRedis, { registry: a.registry }).then(
        async (server) => {
          await server.close();
          return "started";
        },
        (error: unknown) => (error as Error).message,
      ),
    ).toMatch(/REDIS_URL is not set/u);
  });

  it("starts beside the fresh row of a process killed moments ago with another setup", async () => {
    // What kill -9 leaves: a row seen just now, which will never beat again.
    const killed = (await a.services.db.processes.seenSince(0)).find((row) => row.workerId === "fleet-a")!;
    await a.services.db.processes.beat({
      ...killed,
      workerId: "fleet-killed",
      sharedSetup: killed.sharedSetup.replace(/"sessionSecret":"[^"]*"/u, '"sessionSecret":"00000000"'),
      live: 1,
      capacity: 1,
      seenAt: Date.now(),
    });
    try {
      const restarted = await startServer({ ...env, WORKER_ID: "fleet-restarted" }, { registry: a.registry });
      await restarted.close();
    } finally {
      await a.services.db.processes.remove("fleet-killed");
    }
  });

  it("drops a process that shuts down from the fleet at once; its sockets get 1001", async () => {
    const c = await startServer({ ...env, WORKER_ID: "fleet-c" }, { registry: a.registry });
    await expect.poll(() => fleetSize(a)).toBe(3);
    const socket = await RealtimeSocket.connect(on(c, (await createSession(a.baseUrl, API_KEY)).ws_url));
    await socket.waitFor((m) => m.type === "ready");
    await c.close();
    await socket.closed();
    expect(socket.closeCode).toBe(1001);
    await expect.poll(() => fleetSize(a)).toBe(2);
  });

  it("frees the account slots of a process killed with -9 once the fleet finds it gone, long before their lease ends", async () => {
    const key = "fleet-crash-key";
    const bound = { LIVE_SESSIONS_PER_ACCOUNT: "1" };
    await a.services.db.accounts.ensureKey(key, { balanceUsd: 10, entitlements: ["realtime"] });
    // The fleet as this test finds it (a, b, and any process an earlier test failed to stop).
    const before = await fleetSize(a);
    const survivor = await startServer(
      { ...env, ...bound, WORKER_ID: "fleet-survivor" },
      { registry: a.registry },
    );
    // A real process (the build, as `npm start` runs it), to be killed with -9.
    const doomed = await startServiceProcess("fleet-doomed", { ...env, ...bound, API_KEYS: `${key}:10` });
    try {
      await expect.poll(() => fleetSize(survivor)).toBe(before + 2);
      const created = await createSession(survivor.baseUrl, key);
      const socket = await RealtimeSocket.connect(on(doomed, created.ws_url));
      expect(await socket.waitFor((m) => m.type === "ready")).toMatchObject({ worker_id: "fleet-doomed" });
      // The account is at its bound.
      await expect(createSession(survivor.baseUrl, key)).rejects.toMatchObject({
        status: 429,
        body: { error: { message: expect.stringMatching(/live sessions/u) as unknown } },
      });

      doomed.child.kill("SIGKILL");
      expect(await socket.closed()).toBe(1006);
      // Its slot's lease (renewed no more) made ten minutes long: within the test, only the fleet's
      // membership can free the slot.
      await extendLease(created.session_id, 10 * 60_000);
      // Each attempt, then the fleet as the survivor sees it right after, until one is accepted.
      const attempts: [number, number][] = [];
      for (;;) {
        const status = await sessionStatus(survivor, key);
        attempts.push([status, await fleetSize(survivor)]);
        if (status === 200) break;
        expect(status).toBe(429);
        await new Promise((resolve) => setTimeout(resolve, HEARTBEAT_MS / 4));
      }
      // Accepted once the fleet had dropped the killed process.
      expect(attempts.at(-1)).toEqual([200, before + 1]);
    } finally {
      doomed.child.kill("SIGKILL");
      await doomed.exited;
      await survivor.close();
    }
    await expect.poll(() => fleetSize(a)).toBe(before);
  });
});
