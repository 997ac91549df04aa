/**
 * Flood benchmark: what one careless or hostile API key can do to a running service process.
 * Starts the service (embedded engines) as a child process, then
 *   1. floods `GET /v1/session` from one key with long query strings for a fixed time and
 *      reports how many sessions it got, what the others got, and the process's memory;
 *   2. sends 40,000 `speak` messages on one tts socket, three times, and reports the memory and
 *      error frames after each round.
 * Memory is the child's resident set (VmRSS), read from /proc before, at the peak, and 20 s after
 * each flood (the tts socket still open). Prints a Markdown table.
 *
 *   npm run bench:floods [-- --root <checkout>]   (--root measures another checkout, e.g. a
 *                                                  worktree of an older commit, for before/after)
 */
import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import WebSocket from "ws";
import { freePort } from "../test/support/ports.js";

const ROOT_FLAG = process.argv.indexOf("--root");
const ROOT = path.resolve(
  ROOT_FLAG > 0 ? process.argv[ROOT_FLAG + 1]! : path.join(import.meta.dirname, ".."),
);
const KEY = "flood-key";
const OTHER_KEY = "bystander-key";
const SESSION_FLOOD_MS = 20_000;
const SPEAK_MESSAGES = 40_000;
/** How long after a flood the memory is read again (V8 has collected what it will by then). */
const SETTLE_MS = 20_000;
const SPEAK_ROUNDS = 3;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function rssMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  return Math.round(Number(/VmRSS:\s+(\d+)/u.exec(status)![1]) / 1024);
}

async function startService(): Promise<{ baseUrl: string; pid: number; stop(): Promise<void> }> {
  const port = await freePort();
  const dataDir = await mkdtemp(path.join(tmpdir(), "relay-floods-"));
  const child = spawn(process.execPath, ["--import", "tsx", path.join(ROOT, "src/main.ts")], {
    cwd: ROOT,
    env: {
      ...process.env,
      PORT: String(port),
      HOST: "127.0.0.1",
      LOG_LEVEL: "error",
      DATA_DIR: dataDir,
      API_KEYS: `${KEY},${OTHER_KEY}`,
      DUBBING_WORKERS: "0",
    },
    stdio: ["ignore", "ignore", "inherit"],
  });
  const baseUrl = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error("service exited at start-up");
    const up = await fetch(`${baseUrl}/healthz`).then(
      (r) => r.ok,
      () => false,
    );
    if (up) break;
    if (i > 600) throw new Error("service did not start in 60 s");
    await sleep(100);
  }
  return {
    baseUrl,
    pid: child.pid!,
    async stop() {
      child.kill("SIGKILL");
      await new Promise((resolve) => child.once("exit", resolve));
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

interface Row {
  readonly flood: string;
  readonly rssBefore: number;
  readonly rssPeak: number;
  readonly rssAfter: number;
  readonly outcome: string;
}

/** Polls the child's memory while `work` runs; returns the peak. */
async function withPeak(
  pid: number,
  work: () => Promise<string>,
): Promise<{ peak: number; outcome: string }> {
  let peak = await rssMb(pid);
  let running = true;
  const poller = (async () => {
    while (running) {
      peak = Math.max(peak, await rssMb(pid).catch(() => 0));
      await sleep(200);
    }
  })();
  const outcome = await work();
  running = false;
  await poller;
  return { peak, outcome };
}

async function sessionFlood(service: { baseUrl: string; pid: number }): Promise<Row> {
  // Every parameter the spec lists, each at a length a careless client might send.
  const query = new URLSearchParams({
    context: "c".repeat(2000),
    sourceLanguageLabel: "s".repeat(1500),
    targetLanguageLabel: "t".repeat(1500),
    languageHints: "x".repeat(1000),
    junk: "j".repeat(3000),
  }).toString();
  const rssBefore = await rssMb(service.pid);
  const counts = new Map<number, number>();
  const { peak, outcome } = await withPeak(service.pid, async () => {
    const deadline = Date.now() + SESSION_FLOOD_MS;
    const worker = async () => {
      while (Date.now() < deadline) {
        const response = await fetch(`${service.baseUrl}/v1/session?${query}`, {
          headers: { authorization: `Bearer ${KEY}` },
        });
        await response.arrayBuffer();
        counts.set(response.status, (counts.get(response.status) ?? 0) + 1);
      }
    };
    await Promise.all(Array.from({ length: 16 }, worker));
    const bystander = await fetch(`${service.baseUrl}/v1/session`, {
      headers: { authorization: `Bearer ${OTHER_KEY}` },
    });
    const statuses = [...counts].map(([status, n]) => `${n}× ${status}`).join(", ");
    return `${statuses}; another key then got ${bystander.status}`;
  });
  await sleep(SETTLE_MS);
  return {
    flood: `GET /v1/session from one key, 16 at a time for ${SESSION_FLOOD_MS / 1000} s`,
    rssBefore,
    rssPeak: peak,
    rssAfter: await rssMb(service.pid),
    outcome,
  };
}

/**
 * Three rounds of speaks on one socket, each read after it settles: memory a session keeps grows
 * round after round, memory V8 merely has not handed back to the system does not.
 */
async function speakFlood(service: { baseUrl: string; pid: number }): Promise<Row[]> {
  const created = (await (
    await fetch(`${service.baseUrl}/v1/session?mode=tts&targetLanguage=en`, {
      headers: { authorization: `Bearer ${OTHER_KEY}` },
    })
  ).json()) as { ws_url: string };
  const socket = new WebSocket(created.ws_url);
  let errors = 0;
  let speechEnds = 0;
  socket.on("message", (data, isBinary) => {
    if (isBinary) return;
    const type = (JSON.parse(String(data)) as { type: string }).type;
    if (type === "error") errors++;
    if (type === "speech_end") speechEnds++;
  });
  await new Promise((resolve, reject) => {
    socket.once("open", resolve);
    socket.once("error", reject);
  });
  // Near the 5000-character limit of one `speak`, as a client pasting documents would send.
  const text = "The quick brown fox jumps over the lazy dog near the river bank today. ".repeat(60);
  const rows: Row[] = [];
  for (let round = 1; round <= SPEAK_ROUNDS; round++) {
    const rssBefore = await rssMb(service.pid);
    const { peak, outcome } = await withPeak(service.pid, async () => {
      for (let i = 0; i < SPEAK_MESSAGES; i++) {
        socket.send(JSON.stringify({ type: "speak", text }));
        if (i % 1000 === 999) await sleep(5);
      }
      await sleep(SETTLE_MS);
      return `${errors} error frames and ${speechEnds} lines spoken so far, socket ${
        socket.readyState === WebSocket.OPEN ? "open" : "closed"
      }`;
    });
    rows.push({
      flood: `${SPEAK_MESSAGES.toLocaleString("en")} speaks of 4,300 characters on one tts socket, round ${round}`,
      rssBefore,
      rssPeak: peak,
      // Read with the socket still open: what the session itself keeps.
      rssAfter: await rssMb(service.pid),
      outcome,
    });
  }
  socket.close(1000);
  return rows;
}

async function main(): Promise<void> {
  const rows: Row[] = [];
  const floods: ((service: { baseUrl: string; pid: number }) => Promise<Row | Row[]>)[] = [
    sessionFlood,
    speakFlood,
  ];
  for (const flood of floods) {
    const service = await startService();
    try {
      rows.push(...[await flood(service)].flat());
    } finally {
      await service.stop();
    }
  }
  console.log(`Service: ${ROOT}\n`);
  console.log(`| flood | RSS before | RSS peak | RSS ${SETTLE_MS / 1000} s after | outcome |`);
  console.log("| --- | ---: | ---: | ---: | --- |");
  for (const row of rows) {
    console.log(
      `| ${row.flood} | ${row.rssBefore} MB | ${row.rssPeak} MB | ${row.rssAfter} MB | ${row.outcome} |`,
    );
  }
}

await main();
