/**
 * Three service processes behind nginx (round-robin, on loopback) sharing PostgreSQL, Redis, an
 * S3-compatible server (s3rver) and a data directory, started by scripts/fleet.ts as an operator
 * would: real-time sessions, rooms, the dubbing flow and rate limits through nginx, whichever process
 * takes each request. Then one process is killed with -9 in the middle of a dubbing job and of a
 * session: the job is taken over after its lease and charged once, the session's client sees the
 * connection drop, and sessions on the other processes carry on. A graceful stop closes its
 * sessions with 1001 and hands its job back at once to a process still running.
 */
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readWavAsPcm16 } from "../../src/audio/wav.js";
import { createSession, RealtimeSocket, type ServerMessage } from "../../src/cli/recording-socket.js";
import { addRoomParticipant, createRoomSession, joinRoom } from "../support/room-client.js";
import { launchFleet, type Fleet, type FleetProcess } from "../../scripts/fleet.js";
import { dubbingClient } from "../support/dubbing-client.js";
import { makeTestVideo } from "../support/media.js";
import { postgresProblem, postgresUrl, redisProblem, redisUrl, required } from "../support/servers.js";
import { sharedMissing, sharedPath } from "../support/shared.js";
import { execFileSync } from "node:child_process";

function nginxMissing(): string | undefined {
  try {
    execFileSync("nginx", ["-v"], { stdio: "ignore" });
    return undefined;
  } catch {
    return "nginx is not installed (npm run setup installs it)";
  }
}

const problem =
  (await postgresProblem()) ??
  (await redisProblem()) ??
  required(nginxMissing()) ??
  (sharedMissing("data/speech/librivox-pocketsphinx") ? "../shared speech is missing" : undefined);
if (problem) console.warn(`fleet behind nginx not tested: ${problem}`);

const KEY = "fleet-key";
const RATE_KEY = "fleet-rate-key";
let fleet: Fleet;
let speech: Int16Array;
let videoDir: string;

beforeAll(async () => {
  if (problem) return;
  fleet = await launchFleet({
    processes: 3,
    // The build, as `npm start` runs it (test/support/global-setup.ts keeps it fresh).
    built: true,
    postgresAdminUrl: postgresUrl(),
    redisUrl: redisUrl(),
    stderr: "ignore",
    env: {
      API_KEYS: `${KEY}:100,${RATE_KEY}:10`,
      RATE_LIMIT_PER_MINUTE: "10",
      DUBBING_WORKERS: "1",
      DUBBING_LEASE_SEC: "3",
    },
  });
  speech = await readWavAsPcm16(sharedPath("data/speech/librivox-pocketsphinx/goforward.wav"));
  videoDir = await mkdtemp(path.join(tmpdir(), "relay-fleet-video-"));
});
afterAll(async () => {
  await fleet?.close();
  if (videoDir) await rm(videoDir, { recursive: true, force: true });
});

/**
 * A session created through nginx, said `goforward.wav` into and finalized; resolves with the
 * socket once translated. Its socket goes through nginx too, or straight to `on`.
 */
async function translatedSession(
  on?: FleetProcess,
): Promise<{ socket: RealtimeSocket; ready: ServerMessage }> {
  const session = await createSession(fleet.url, KEY, { sourceLanguage: "en", targetLanguage: "es" });
  const wsUrl = new URL(session.ws_url);
  if (on) wsUrl.host = new URL(on.baseUrl).host;
  const socket = await RealtimeSocket.connect(wsUrl.toString());
  const ready = await socket.waitFor((m) => m.type === "ready");
  await socket.stream(speech, { speed: 4 });
  socket.finalize();
  await socket.waitFor(
    (m) => m.type === "translated_transcript" && m.is_final === true && /metros/iu.test(String(m.text)),
  );
  return { socket, ready };
}

function processOf(workerId: unknown): FleetProcess {
  const found = fleet.processes.find((process) => process.workerId === workerId);
  if (!found) throw new Error(`no process ${String(workerId)}`);
  return found;
}

/** The worker holding the job once it is under way (past `pending`: its work folder exists). */
async function jobOwner(jobId: string): Promise<string | null> {
  const client = new pg.Client({ connectionString: fleet.databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ lease_owner: string | null }>(
      "select lease_owner from jobs where id = $1 and status <> 'pending'",
      [jobId],
    );
    return rows[0]?.lease_owner ?? null;
  } finally {
    await client.end();
  }
}

/**
 * A translated session on every process still running, by worker id. The sockets go to each
 * process directly: with two processes left behind round-robin, nginx would send every socket to
 * the same one (each session is two requests).
 */
async function sessionOnEveryProcess(): Promise<Map<unknown, RealtimeSocket>> {
  const running = fleet.processes.filter(
    (process) => process.child.exitCode === null && !process.child.signalCode,
  );
  const sessions = await Promise.all(running.map((process) => translatedSession(process)));
  return new Map(sessions.map(({ socket, ready }) => [ready.worker_id, socket]));
}

/** A dubbing job created through nginx, once a worker has taken it: its id and that worker's process. */
async function jobUnderWay(): Promise<{ jobId: string; owner: FleetProcess }> {
  const client = dubbingClient(fleet.url, KEY);
  const sourceUrl = await client.upload(await makeTestVideo(videoDir));
  const { body: created } = await client.request("POST", "/api/dubbing/jobs", {
    source_url: sourceUrl,
    source_lang: "en",
    target_lang: "es",
  });
  const jobId = created.job_id as string;
  for (;;) {
    const owner = await jobOwner(jobId);
    if (owner) return { jobId, owner: processOf(owner.split("/")[0]) };
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Once the job completed: its result can be fetched, and its attempts and charges as the database has them. */
async function completedJob(jobId: string): Promise<{ attempts: number; charges: number }> {
  const job = await dubbingClient(fleet.url, KEY).finished(jobId);
  expect(job).toMatchObject({ status: "completed" });
  expect((await fetch(job.output_url as string)).status).toBe(200);
  const db = new pg.Client({ connectionString: fleet.databaseUrl });
  await db.connect();
  try {
    const { rows } = await db.query<{ attempts: number; charges: string }>(
      `select attempts, (select count(*) from ledger_entries where job_id = $1 and kind = 'charge') as charges
           from jobs where id = $1`,
      [jobId],
    );
    return { attempts: rows[0]!.attempts, charges: Number(rows[0]!.charges) };
  } finally {
    await db.end();
  }
}

describe.skipIf(problem !== undefined)("three processes behind nginx", () => {
  it("serves real-time sessions whichever process mints and claims each ws_url", async () => {
    const sessions = await Promise.all([translatedSession(), translatedSession(), translatedSession()]);
    const workers = new Set(sessions.map(({ ready }) => ready.worker_id));
    // nginx alternates: the sessions are served by more than one process.
    expect(workers.size).toBeGreaterThan(1);
    for (const { socket } of sessions) socket.close();
  });

  it("keeps one rate budget for a key across the processes", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 12; i++) {
      const response = await fetch(new URL("/api/dubbing/upload-url", fleet.url), {
        method: "POST",
        headers: { authorization: `Bearer ${RATE_KEY}`, "content-type": "application/json" },
        body: JSON.stringify({ filename: "talk.mp4", content_type: "video/mp4" }),
      });
      statuses.push(response.status);
    }
    expect(statuses).toEqual([...Array<number>(10).fill(200), 429, 429]);
  });

  it("lets participants joining through any process share a room", async () => {
    const room = await createRoomSession(fleet.url, KEY, {
      source_language: "en-US",
      target_language: "es-ES",
      voice_type: "male",
    });
    const first = await joinRoom(room);
    const second = await joinRoom(await addRoomParticipant(fleet.url, KEY, room.room_name));
    await first.waitFor((m) => m.type === "participant_joined");
    await second.stream(speech, { speed: 4 });
    second.sendAudio(new Int16Array(16_000));
    for (const socket of [first, second]) {
      await socket.waitFor(
        (m) => m.type === "translated_transcript" && m.is_final === true && /metros/iu.test(String(m.text)),
      );
    }
    first.close();
    second.close();
  });

  it("serves the meeting page, and a meeting in two languages, through nginx", async () => {
    const page = await fetch(new URL("/meeting", fleet.url));
    expect(page.status).toBe(200);
    expect(await page.text()).toMatch(/meeting\.js/u);
    expect((await fetch(new URL("/playground/meeting.js", fleet.url))).status).toBe(200);
    const post = async (pathname: string, body: unknown) => {
      const response = await fetch(new URL(pathname, fleet.url), {
        method: "POST",
        headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      expect(response.status).toBe(200);
      return (await response.json()) as { url: string; token: string; room_name: string };
    };
    // Spanish is listen-only on the embedded tier: English speech reaches the Spanish listener.
    const created = await post("/api/beta1/session", { languages: ["en", "es"], voice_type: "female" });
    const english = await joinRoom(created);
    const spanish = await joinRoom(
      await post(`/api/beta1/session/${created.room_name}/participants`, { language: "es" }),
    );
    await english.stream(speech, { speed: 4 });
    english.sendAudio(new Int16Array(16_000));
    await spanish.waitFor(
      (m) => m.type === "translated_transcript" && m.is_final === true && /metros/iu.test(String(m.text)),
    );
    await spanish.settle(1000);
    expect(spanish.audioFrames.length).toBeGreaterThan(0);
    expect(english.messages.filter((m) => m.type === "translated_transcript")).toEqual([]);
    expect(english.audioFrames).toEqual([]);
    english.close();
    spanish.close();
  });

  it("survives kill -9 of a process mid-job and mid-session: the job is taken over and charged once, other sessions carry on", async () => {
    // A translating session on every process, and a dubbing job: the process whose worker takes
    // the job is killed as soon as it has.
    const byWorker = await sessionOnEveryProcess();
    const { jobId, owner: victim } = await jobUnderWay();
    const onVictim = byWorker.get(victim.workerId)!;
    const survivor = [...byWorker].find(([worker]) => worker !== victim.workerId)![1];

    victim.child.kill("SIGKILL");
    await victim.exited;
    expect(await onVictim.closed()).toBe(1006);

    // The session on another process goes on translating.
    const before = survivor.messages.length;
    await survivor.stream(speech, { speed: 4 });
    survivor.finalize();
    await survivor.waitFor(
      (m) =>
        survivor.messages.indexOf(m) >= before &&
        m.type === "translated_transcript" &&
        m.is_final === true &&
        /metros/iu.test(String(m.text)),
    );
    // New sessions still start through nginx (the dead process is skipped).
    const after = await translatedSession();
    expect(after.ready.worker_id).not.toBe(victim.workerId);
    after.socket.close();

    // The job is taken over after its lease (a second attempt), completes, and is charged once.
    const { attempts, charges } = await completedJob(jobId);
    expect(attempts).toBeGreaterThanOrEqual(2);
    expect(charges).toBe(1);
    // The worker that took over removed the dead attempt's work folder from the shared directory.
    const left = (await readdir(path.join(fleet.dataDir, "work"))).filter((name) => name.includes(jobId));
    expect(left).toEqual([]);
    for (const socket of byWorker.values()) socket.close();
  });

  it("on SIGTERM a process closes its sessions with 1001 and hands its job back, which another resumes at once", async () => {
    const byWorker = await sessionOnEveryProcess();
    const { jobId, owner: stopping } = await jobUnderWay();
    stopping.child.kill("SIGTERM");
    expect(await byWorker.get(stopping.workerId)!.closed()).toBe(1001);
    expect(await stopping.exited).toBe(0);
    const next = await translatedSession();
    expect(next.ready.worker_id).not.toBe(stopping.workerId);
    next.socket.close();
    // Handed back, not left to its lease: the interrupted attempt is not counted.
    expect(await completedJob(jobId)).toEqual({ attempts: 1, charges: 1 });
    for (const socket of byWorker.values()) socket.close();
  });
});
