/**
 * Real-time benchmark: streams real utterances from ../shared/data/speech through a running
 * service process (started here with the embedded engines) and measures latency, CPU, concurrency
 * and idle-session memory. Prints a Markdown table and writes JSON to bench-results/realtime.json.
 * Then whisper.cpp's streaming capacity with its test models (scripts/bench-whisper-streaming.ts).
 *
 *   npm run bench:realtime [-- --quick]
 *   npm run bench:realtime -- --whisper   (the whisper.cpp part only)
 *   npm run bench:realtime -- --neural    (the sherpa-onnx stack instead of the embedded engines:
 *     real-size stand-ins of the streaming English recognizer and of two Piper medium voices, en and
 *     es, installed where `relay models pull` puts the real ones; random weights, so the compute is
 *     real and the words are not. CPU then counts the service and its sherpa-onnx host processes.)
 *   npm run bench:realtime -- --mt        (neural translation: a real-size stand-in of Opus-MT en-es,
 *     translating through transformers.js in its host process with Apertium behind it; with
 *     --neural as well, the whole neural stack. The stand-in echoes its input, so it decodes as
 *     many tokens as a real translation of the same length.)
 *   npm run bench:realtime -- --real tiny.en|base --engine in-process|server [--quick]
 *     (real Whisper weights, test/support/real-models.ts: `in-process` converts the CTranslate2
 *     model to ggml and starts the service on it as a user would, base as MODELS_DIR's default
 *     ggml-base.bin, tiny.en through an ENGINES_FILE, PocketSphinx behind whisper.cpp either way;
 *     `server` starts faster-whisper-server on the model and points relay's openai engine at it.
 *     CPU then counts the service and that server. Concurrency from 1 session; no idle run and no
 *     streaming-capacity part, which do not depend on the weights.)
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { cpus, loadavg, tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { createSession, RealtimeSocket } from "../src/cli/recording-socket.js";
import { freePort } from "../test/support/ports.js";
import { pythonEnvDir } from "../test/support/python-clients.js";
import { realModelDir } from "../test/support/real-models.js";
import {
  startWhisperServer,
  WHISPER_SERVER_MODEL,
  type WhisperServer,
} from "../test/support/whisper-server.js";
import {
  installStandInRecognizer,
  installStandInTranslation,
  installStandInVoice,
} from "../test/support/stand-in-models/install.js";
import { benchWhisperStreaming } from "./bench-whisper-streaming.js";
import {
  CLIPS,
  flagValue,
  SHARED,
  loadClip,
  measureConcurrency,
  percentile,
  sleep,
  type Clip,
} from "./realtime-load.js";

const QUICK = process.argv.includes("--quick");
const NEURAL = process.argv.includes("--neural");
const MT = process.argv.includes("--mt");
const API_KEY = "bench-key";

/** The value after a command-line flag, checked against its choices; undefined without the flag. */
function choice<T extends string>(flag: string, choices: readonly T[]): T | undefined {
  if (!process.argv.includes(flag)) return undefined;
  const value = flagValue(flag) as T;
  if (!choices.includes(value)) throw new Error(`${flag}: one of ${choices.join(", ")}`);
  return value;
}
const REAL = choice("--real", ["tiny.en", "base"] as const);
const ENGINE = choice("--engine", ["in-process", "server"] as const);
if (REAL && !ENGINE) throw new Error("--real needs --engine in-process|server");
/** The faster-whisper-server of `--engine server`, its CPU counted with the service's. */
let whisperServer: WhisperServer | undefined;

/** The service's environment for `--real`: the model as a user would configure it (file comment). */
async function realWeights(model: "tiny.en" | "base"): Promise<Record<string, string>> {
  const dir = await mkdtemp(path.join(tmpdir(), "relay-bench-real-"));
  const enginesFile = path.join(dir, "engines.json");
  if (ENGINE === "server") {
    whisperServer = await startWhisperServer(`whisper-${model}`);
    const entry = { engine: "openai", baseUrl: whisperServer.baseUrl, model: WHISPER_SERVER_MODEL };
    await writeFile(enginesFile, JSON.stringify({ asr: [{ ...entry, languages: ["en"] }] }));
    return { ENGINES_FILE: enginesFile };
  }
  const ggml = path.join(dir, `ggml-${model}.bin`);
  await promisify(execFile)(path.join(pythonEnvDir("models"), "bin/python"), [
    "scripts/convert-whisper-ct2-to-ggml.py",
    realModelDir(`whisper-${model}`),
    ggml,
  ]);
  if (model === "base") return { MODELS_DIR: dir };
  const asr = [{ engine: "whisper-cpp", model: ggml }, { engine: "pocketsphinx" }];
  await writeFile(enginesFile, JSON.stringify({ asr }));
  return { MODELS_DIR: dir, ENGINES_FILE: enginesFile };
}
/** A models directory holding real-size stand-ins of the neural stack (see the file's comment). */
async function neuralModels(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), "relay-bench-neural-"));
  await installStandInRecognizer(dir, { punctuation: true, size: "real" });
  await installStandInVoice(dir, "piper-en_US-libritts_r-medium", { size: "real", speakers: 1 });
  await installStandInVoice(dir, "piper-es_ES-sharvard-medium", { size: "real", speakers: 1, voice: "es" });
  return dir;
}

/** The models directory: the neural stack's (`--neural`) and/or Opus-MT en-es (`--mt`), real size. */
async function modelsDir(): Promise<string> {
  const dir = NEURAL ? await neuralModels() : await mkdtemp(path.join(tmpdir(), "relay-bench-mt-"));
  if (MT) installStandInTranslation(dir, "opus-mt-en-es", { size: "real" });
  return dir;
}

async function startService(
  maxSessions: number,
  engines: Record<string, string>,
): Promise<{ child: ChildProcess; baseUrl: string }> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [...(process.env.BENCH_SERVER_NODE_ARGS?.split(" ") ?? []), "dist/main.js"],
    {
      env: {
        ...process.env,
        PORT: String(port),
        HOST: "127.0.0.1",
        API_KEYS: API_KEY,
        LOG_LEVEL: "warn",
        MAX_SESSIONS: String(maxSessions),
        // The idle run connects sessions 50 at a time, beyond one account's default bound of 16
        // created and not yet connected.
        UNCLAIMED_SESSIONS_PER_ACCOUNT: "1000",
        // …and one key holds them all at once.
        LIVE_SESSIONS_PER_ACCOUNT: "1000",
        // Idle sessions are what the idle run measures: none is closed for idling meanwhile.
        SESSION_IDLE_TIMEOUT_SEC: "3600",
        DATA_DIR: "/tmp/relay-bench",
        ...engines,
      },
      stdio: ["ignore", "inherit", "inherit"],
    },
  );
  const baseUrl = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 300; i++) {
    const status = await fetch(`${baseUrl}/healthz`).then(
      (r) => r.status,
      () => 0,
    );
    if (status === 200) {
      // Which recognizer runs: a real-weights run that fell back to PocketSphinx would measure nothing.
      if (REAL) console.error(`healthz: ${await (await fetch(`${baseUrl}/healthz`)).text()}`);
      return { child, baseUrl };
    }
    await sleep(100);
  }
  throw new Error("service did not become healthy");
}

async function stopService(child: ChildProcess): Promise<void> {
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGTERM");
  await exited;
}

/** CPU seconds (user + system) used so far by a process, from /proc. */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  const own = (Number(fields[11]) + Number(fields[12])) / 100;
  const hosts = NEURAL || MT ? childrenCpuSeconds(pid, "host-main") : 0;
  // faster-whisper-server is this script's child, not the service's.
  const server = whisperServer ? childrenCpuSeconds(process.pid, "faster_whisper_server") : 0;
  return own + hosts + server;
}

/**
 * CPU seconds of the children of `parent` whose command line holds `command`: the service's model
 * host processes (sherpa-onnx, transformers.js: host-main.js), faster-whisper-server.
 */
function childrenCpuSeconds(parent: number, command: string): number {
  let total = 0;
  for (const pid of readdirSync("/proc").filter((name) => /^\d+$/u.test(name))) {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
      if (Number(fields[1]) !== parent) continue;
      if (!readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(command)) continue;
      total += (Number(fields[11]) + Number(fields[12])) / 100;
    } catch {
      // ended meanwhile
    }
  }
  return total;
}

function rssBytes(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8").match(/VmRSS:\s+(\d+) kB/u)!;
  return Number(line[1]) * 1024;
}

interface UtteranceTiming {
  clip: string;
  onsetToFirstInterimMs: number | null;
  finalizeToFinalOriginalMs: number | null;
  finalizeToFinalTranslationMs: number | null;
  finalizeToFirstAudioMs: number | null;
}

/** Streams one clip in real time on a fresh session and measures its latencies. */
async function measureUtterance(baseUrl: string, clip: Clip): Promise<UtteranceTiming> {
  const socket = await RealtimeSocket.connect((await createSession(baseUrl, API_KEY, {})).ws_url);
  await socket.waitFor((m) => m.type === "ready");
  const streamStart = performance.now();
  await socket.stream(clip.pcm, { chunkMs: 20, speed: 1 });
  const finalizeAt = performance.now();
  socket.finalize();
  await socket
    .waitFor((m) => m.type === "translated_transcript" && m.is_final === true, 30_000)
    .catch(() => undefined);
  await socket.settle(1500);
  socket.close();

  const onsetAt = streamStart + (clip.onset / 16_000) * 1000;
  const firstInterim = socket.received.find(
    (r) => r.message?.type === "original_transcript" && r.message.is_final === false && r.message.text !== "",
  );
  const after = socket.received.filter((r) => r.at >= finalizeAt);
  const finalOriginal = after.find(
    (r) => r.message?.type === "original_transcript" && r.message.is_final === true,
  );
  const finalTranslation = after.find(
    (r) => r.message?.type === "translated_transcript" && r.message.is_final === true,
  );
  const firstAudio = finalTranslation ? after.find((r) => r.audio && r.at >= finalTranslation.at) : undefined;
  const since = (at: number | undefined, from: number) => (at === undefined ? null : Math.round(at - from));
  return {
    clip: clip.name,
    onsetToFirstInterimMs: since(firstInterim?.at, onsetAt),
    finalizeToFinalOriginalMs: since(finalOriginal?.at, finalizeAt),
    finalizeToFinalTranslationMs: since(finalTranslation?.at, finalizeAt),
    finalizeToFirstAudioMs: since(firstAudio?.at, finalizeAt),
  };
}

async function measureIdleSessions(baseUrl: string, pid: number, count: number) {
  await sleep(1000);
  const before = rssBytes(pid);
  const sockets: RealtimeSocket[] = [];
  for (let i = 0; i < count; i += 50) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(50, count - i) }, async () => {
        const socket = await RealtimeSocket.connect((await createSession(baseUrl, API_KEY, {})).ws_url);
        await socket.waitFor((m) => m.type === "ready");
        return socket;
      }),
    );
    sockets.push(...batch);
  }
  await sleep(3000);
  const after = rssBytes(pid);
  const held = sockets.filter((s) => s.isOpen).length;
  const health = (await (await fetch(`${baseUrl}/healthz`)).json()) as { sessions: { live: number } };
  for (const socket of sockets) socket.close();
  return {
    sessions: count,
    heldOpen: held,
    serverLiveSessions: health.sessions.live,
    rssBeforeMb: +(before / 2 ** 20).toFixed(1),
    rssAfterMb: +(after / 2 ** 20).toFixed(1),
    perIdleSessionKb: Math.round((after - before) / count / 1024),
  };
}

async function main(): Promise<void> {
  const clips = await Promise.all(CLIPS.map(loadClip));
  const audioSeconds = clips.reduce((sum, clip) => sum + clip.pcm.length / 16_000, 0);

  const loadBefore = loadavg()[0]!.toFixed(2);
  // 1. latency and CPU: one session at a time, real-time pacing
  const engines = REAL ? await realWeights(REAL) : NEURAL || MT ? { MODELS_DIR: await modelsDir() } : {};
  const service = await startService(2000, engines);
  const pid = service.child.pid!;
  const rounds = QUICK ? 1 : 3;
  const timings: UtteranceTiming[] = [];
  await measureUtterance(service.baseUrl, clips[0]!); // warm-up
  const cpuBefore = cpuSeconds(pid);
  for (let round = 0; round < rounds; round++) {
    for (const clip of clips) timings.push(await measureUtterance(service.baseUrl, clip));
  }
  const cpuPerAudioSecond = (cpuSeconds(pid) - cpuBefore) / (audioSeconds * rounds);

  // 2. concurrency: the largest N whose finals keep up
  const concurrency = [];
  // Whisper on 2 cores keeps up with few sessions: from one, in small steps.
  const steps = REAL ? [1, 2, 3, 4, 6] : QUICK ? [2, 6] : [2, 4, 6, 8, 10, 12, 16, 20, 24];
  for (const sessions of steps) {
    const result = await measureConcurrency(
      service.baseUrl,
      API_KEY,
      clips.slice(0, QUICK ? 3 : 6),
      sessions,
    );
    concurrency.push(result);
    console.error(`concurrency ${sessions}: ${JSON.stringify(result)}`);
    // On real weights the steps after the first miss show how far latency grows, until finals go missing.
    if (REAL ? result.missingFinals > 0 || result.errors > 0 : !result.realTime) break;
  }

  // 3. idle sessions: memory per open socket with no audio
  const idle = REAL ? undefined : await measureIdleSessions(service.baseUrl, pid, QUICK ? 200 : 1000);
  await stopService(service.child);
  await whisperServer?.close();

  const latency = (key: keyof Omit<UtteranceTiming, "clip">) => ({
    p50: percentile(
      timings.map((t) => t[key]),
      50,
    ),
    p90: percentile(
      timings.map((t) => t[key]),
      90,
    ),
  });
  const summary = {
    machine: {
      cpus: cpus().length,
      model: cpus()[0]?.model,
      node: process.version,
      loadAverageBefore: loadBefore,
      loadAverageAfter: loadavg()[0]!.toFixed(2),
    },
    ...(REAL ? { real: { model: REAL, engine: ENGINE } } : {}),
    utterances: timings.length,
    audioSecondsPerRound: +audioSeconds.toFixed(1),
    latencyMs: {
      onsetToFirstInterim: latency("onsetToFirstInterimMs"),
      finalizeToFinalOriginal: latency("finalizeToFinalOriginalMs"),
      finalizeToFinalTranslation: latency("finalizeToFinalTranslationMs"),
      finalizeToFirstAudio: latency("finalizeToFirstAudioMs"),
    },
    cpuSecondsPerAudioSecond: +cpuPerAudioSecond.toFixed(3),
    maxRealTimeSessions: Math.max(0, ...concurrency.filter((c) => c.realTime).map((c) => c.sessions)),
    concurrency,
    idle,
    timings,
  };
  await mkdir("bench-results", { recursive: true });
  const results = REAL ? `realtime-real-${REAL}-${ENGINE}.json` : "realtime.json";
  await writeFile(path.join("bench-results", results), JSON.stringify(summary, null, 2));

  const row = (name: string, v: { p50: number | null; p90: number | null }, target: string) =>
    `| ${name} | ${v.p50} | ${v.p90} | ${target} |`;
  console.log(
    [
      ...(REAL ? [`Real weights: whisper ${REAL}, engine ${ENGINE}`] : []),
      `Utterances: ${timings.length} (${clips.length} clips × ${rounds}), ${audioSeconds.toFixed(1)} s of speech per round`,
      `Machine: ${summary.machine.model} × ${summary.machine.cpus}, load average ${loadBefore} before, ${summary.machine.loadAverageAfter} after`,
      "",
      "| latency (ms) | p50 | p90 | target |",
      "| --- | --- | --- | --- |",
      row("speech onset → first interim", summary.latencyMs.onsetToFirstInterim, "≤ 500"),
      row("finalize → final original transcript", summary.latencyMs.finalizeToFinalOriginal, ""),
      row("finalize → final translation", summary.latencyMs.finalizeToFinalTranslation, "p50 ≤ 550"),
      row("finalize → first translated audio", summary.latencyMs.finalizeToFirstAudio, "p50 ≤ 700"),
      "",
      "| capacity | measured | target |",
      "| --- | --- | --- |",
      `| CPU seconds per audio second (one session) | ${summary.cpuSecondsPerAudioSecond} | |`,
      `| concurrent real-time sessions | ${summary.maxRealTimeSessions} | ≥ 6 |`,
      ...(idle
        ? [
            `| idle sessions held open | ${idle.heldOpen} of ${idle.sessions} | 1000 |`,
            `| memory per idle session | ${idle.perIdleSessionKb} KB | ≤ 2 MB |`,
          ]
        : []),
      "",
      "| concurrent sessions | finalize → final translation p50 / p90 (ms) | missing finals | errors | real-time |",
      "| --- | --- | --- | --- | --- |",
      ...concurrency.map(
        (c) =>
          `| ${c.sessions} | ${c.finalizeToFinalTranslationP50Ms} / ${c.finalizeToFinalTranslationP90Ms} | ${c.missingFinals} | ${c.errors} | ${c.realTime ? "yes" : "no"} |`,
      ),
    ].join("\n"),
  );
}

if (!process.argv.includes("--whisper")) await main();
if (!NEURAL && !MT && !REAL) {
  console.log("\n" + (await benchWhisperStreaming(SHARED, CLIPS.slice(0, QUICK ? 3 : 6))));
}
