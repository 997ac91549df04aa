/**
 * Fleet benchmark: sessions held by 1, 2 and 3 service processes behind nginx (scripts/fleet.ts),
 * sharing PostgreSQL, Redis and an S3-compatible store.
 *
 * - real-time: the most concurrent sessions whose finals keep up (every utterance's final
 *   translation within 1.5 s of `finalize` at p90, none missing, no error), streaming real speech
 *   through nginx (`least_conn`, as docs/deployment.md recommends), ramped in steps of 2;
 * - capacity: with MAX_SESSIONS=20 per process, idle sessions opened through nginx until
 *   `GET /v1/session` answers 503: the fleet holds its processes' capacity together. Measured with
 *   `least_conn` and with round-robin, which sends every socket of a two-process fleet to one process.
 *
 *   npm run bench:fleet [-- --quick]
 */
import { cpus } from "node:os";
import { mkdir, writeFile } from "node:fs/promises";
import { createSession, HttpError, RealtimeSocket } from "../src/cli/recording-socket.js";
import { launchFleet, type Fleet } from "./fleet.js";
import { CLIPS, loadClip, measureConcurrency, sleep } from "./realtime-load.js";

const QUICK = process.argv.includes("--quick");
const API_KEY = "bench-key";
const CAPACITY_PER_PROCESS = 20;

interface FleetResult {
  readonly processes: number;
  readonly realTimeSessions: number;
  readonly steps: Awaited<ReturnType<typeof measureConcurrency>>[];
  readonly heldOpen: number;
  readonly workersServing: number;
}

async function benchFleet(processes: number, balance: "least_conn" | "round-robin"): Promise<Fleet> {
  const fleet = await launchFleet({
    processes,
    built: true,
    balance,
    env: {
      API_KEYS: `${API_KEY}:100`,
      MAX_SESSIONS: String(CAPACITY_PER_PROCESS),
      UNCLAIMED_SESSIONS_PER_ACCOUNT: "1000",
      // One key opens every session of the benchmark.
      LIVE_SESSIONS_PER_ACCOUNT: "1000",
      // Idle sessions are what the idle run measures: none is closed for idling meanwhile.
      SESSION_IDLE_TIMEOUT_SEC: "3600",
    },
  });
  await sleep(3000); // every process has heard the others' heartbeats
  return fleet;
}

async function measureFleet(processes: number): Promise<FleetResult> {
  const clips = await Promise.all(CLIPS.slice(0, QUICK ? 3 : 6).map(loadClip));
  const fleet = await benchFleet(processes, "least_conn");
  try {
    const steps = [];
    for (let sessions = 2; ; sessions += 2) {
      const step = await measureConcurrency(fleet.url, API_KEY, clips, sessions);
      console.error(`${processes} process(es), ${sessions} sessions: ${JSON.stringify(step)}`);
      steps.push(step);
      if (!step.realTime || sessions >= CAPACITY_PER_PROCESS * processes) break;
    }
    const { held, workers } = await holdIdleSessions(fleet.url);
    return {
      processes,
      realTimeSessions: Math.max(0, ...steps.filter((step) => step.realTime).map((step) => step.sessions)),
      steps,
      heldOpen: held,
      workersServing: workers,
    };
  } finally {
    await fleet.close();
  }
}

/** Opens idle sessions through nginx until the fleet refuses one; returns how many it held and on how many processes. */
async function holdIdleSessions(url: string): Promise<{ held: number; workers: number }> {
  const sockets: RealtimeSocket[] = [];
  const workers = new Set<unknown>();
  try {
    for (let refusedInARow = 0; refusedInARow < 20;) {
      let wsUrl: string;
      try {
        wsUrl = (await createSession(url, API_KEY)).ws_url;
      } catch (error) {
        if (error instanceof HttpError && error.status === 503) break;
        throw error;
      }
      const socket = await RealtimeSocket.connect(wsUrl);
      // Undefined when the socket is closed instead (4503).
      const first = await socket.waitFor((m) => m.type === "ready").catch(() => undefined);
      if (!first) {
        // 4503: nginx sent it to a full process while another still has room; the client retries.
        refusedInARow++;
        continue;
      }
      refusedInARow = 0;
      workers.add(first.worker_id);
      sockets.push(socket);
      // Heartbeats every 2 s: let the processes learn who is full before the last few slots.
      if (sockets.length % CAPACITY_PER_PROCESS === 0) await sleep(2500);
    }
    return { held: sockets.filter((socket) => socket.isOpen).length, workers: workers.size };
  } finally {
    for (const socket of sockets) socket.close();
  }
}

const counts = QUICK ? [1, 2] : [1, 2, 3];
const results: FleetResult[] = [];
for (const processes of counts) results.push(await measureFleet(processes));

/**
 * Round-robin over two processes sends every session's socket to the same process (each session
 * is two requests: GET /v1/session, then the socket): the capacity again with round-robin.
 */
const roundRobin: { processes: number; held: number; workers: number }[] = [];
for (const processes of counts.filter((count) => count > 1)) {
  const fleet = await benchFleet(processes, "round-robin");
  try {
    roundRobin.push({ processes, ...(await holdIdleSessions(fleet.url)) });
  } finally {
    await fleet.close();
  }
}
const base = results[0]!;
await mkdir("bench-results", { recursive: true });
await writeFile(
  "bench-results/fleet.json",
  JSON.stringify({ machine: { cpus: cpus().length, model: cpus()[0]?.model }, results, roundRobin }, null, 2),
);
console.log(
  [
    `Machine: ${cpus().length} cores (${cpus()[0]?.model}); nginx least_conn; MAX_SESSIONS=${CAPACITY_PER_PROCESS} per process`,
    "",
    "| processes | concurrent real-time sessions | vs 1 process | idle sessions held (capacity) | processes serving them |",
    "| --- | --- | --- | --- | --- |",
    ...results.map(
      (result) =>
        `| ${result.processes} | ${result.realTimeSessions} | ${(result.realTimeSessions / Math.max(1, base.realTimeSessions)).toFixed(2)}× | ${result.heldOpen} of ${CAPACITY_PER_PROCESS * result.processes} | ${result.workersServing} |`,
    ),
    "",
    "| processes | idle sessions held with nginx round-robin | processes serving them |",
    "| --- | --- | --- |",
    ...roundRobin.map(
      (row) =>
        `| ${row.processes} | ${row.held} of ${CAPACITY_PER_PROCESS * row.processes} | ${row.workers} |`,
    ),
    "",
    "| processes | sessions | finalize → final translation p50 / p90 (ms) | missing finals | errors | real-time |",
    "| --- | --- | --- | --- | --- | --- |",
    ...results.flatMap((result) =>
      result.steps.map(
        (step) =>
          `| ${result.processes} | ${step.sessions} | ${step.finalizeToFinalTranslationP50Ms} / ${step.finalizeToFinalTranslationP90Ms} | ${step.missingFinals} | ${step.errors} | ${step.realTime ? "yes" : "no"} |`,
      ),
    ),
  ].join("\n"),
);
