/**
 * Real-time benchmark: streams real utterances from ../shared/data/speech through a running
 * service process (started here with the embedded engines) and measures latency, CPU, concurrency
 * and idle-session memory. Prints a Markdown table and writes JSON to bench-results/realtime.json.
 * Then whisper.cpp's streaming capacity with its test models (scripts/bench-whisper-streaming.ts).
 *
 *   npm run bench:realtime [-- --quick]
 *   npm run bench:realtime -- --whisper   (the whisper.cpp part only)
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import { cpus } from "node:os";
import path from "node:path";
import { readWavAsPcm16 } from "../src/audio/wav.js";
import { createSession, RealtimeSocket } from "../src/client/realtime-client.js";
import { freePort } from "../test/support/ports.js";
import { benchWhisperStreaming } from "./bench-whisper-streaming.js";

const SHARED = process.env.SHARED_DIR ?? path.resolve(import.meta.dirname, "../../shared");
const QUICK = process.argv.includes("--quick");
const API_KEY = "bench-key";
const CLIPS = [
  "librivox-pocketsphinx/goforward.wav",
  "librivox-pocketsphinx/sense_and_sensibility_01_austen_64kb-0870.wav",
  "librivox-pocketsphinx/sense_and_sensibility_01_austen_64kb-0880.wav",
  "librivox-pocketsphinx/sense_and_sensibility_01_austen_64kb-0890.wav",
  "librivox-pocketsphinx/sense_and_sensibility_01_austen_64kb-0920.wav",
  "librivox-pocketsphinx/sense_and_sensibility_01_austen_64kb-0930.wav",
  "misc/jfk.wav",
  "misc/librispeech-1995-1837-0001.wav",
  "ljspeech/wavs/LJ001-0001.wav",
  "ljspeech/wavs/LJ001-0002.wav",
];

interface Clip {
  readonly name: string;
  readonly pcm: Int16Array;
  /** Sample index where speech starts (first 20 ms frame above 10 % of the loudest frame). */
  readonly onset: number;
}

/** Loads a clip and trims trailing silence so that `finalize`, not the VAD, ends the segment. */
async function loadClip(name: string): Promise<Clip> {
  const pcm = await readWavAsPcm16(path.join(SHARED, "data/speech", name));
  const frame = 320;
  const levels: number[] = [];
  for (let i = 0; i + frame <= pcm.length; i += frame) {
    let sum = 0;
    for (let j = i; j < i + frame; j++) sum += pcm[j]! * pcm[j]!;
    levels.push(Math.sqrt(sum / frame));
  }
  const threshold = Math.max(...levels) * 0.1;
  const first = levels.findIndex((level) => level > threshold);
  const last = levels.findLastIndex((level) => level > threshold);
  const end = Math.min(pcm.length, (last + 1) * frame + 1600); // keep 100 ms after the last loud frame
  return { name, pcm: pcm.subarray(0, end), onset: first * frame };
}

async function startService(maxSessions: number): Promise<{ child: ChildProcess; baseUrl: string }> {
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
        DATA_DIR: "/tmp/relay-bench",
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
    if (status === 200) return { child, baseUrl };
    await sleep(100);
  }
  throw new Error("service did not become healthy");
}

async function stopService(child: ChildProcess): Promise<void> {
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGTERM");
  await exited;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** CPU seconds (user + system) used so far by a process, from /proc. */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
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

function percentile(values: (number | null)[], p: number): number | null {
  const sorted = values.filter((v): v is number => v !== null).sort((a, b) => a - b);
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** N sessions stream every clip back to back in real time; real-time means finals keep up. */
async function measureConcurrency(baseUrl: string, clips: Clip[], sessions: number) {
  const errors: string[] = [];
  const finalLatencies: number[] = [];
  const lost: number[] = [];
  await Promise.all(
    Array.from({ length: sessions }, async (_, index) => {
      const socket = await RealtimeSocket.connect((await createSession(baseUrl, API_KEY, {})).ws_url);
      await socket.waitFor((m) => m.type === "ready");
      await sleep(index * 150); // desynchronise the sessions a little, like real users
      for (const clip of clips) {
        const finalizeAt = await streamAndFinalize(socket, clip);
        const final = await socket
          .waitFor(
            (m) =>
              m.type === "translated_transcript" &&
              m.is_final === true &&
              (m.timestamp as number) * 1000 >= finalizeAt.wall,
            20_000,
          )
          .catch(() => undefined);
        const received = final ? socket.received.find((r) => r.message === final) : undefined;
        if (received) finalLatencies.push(received.at - finalizeAt.perf);
        else lost.push(1);
        await socket.settle(300);
      }
      errors.push(...socket.messages.filter((m) => m.type === "error").map((m) => String(m.error)));
      socket.close();
    }),
  );
  const p90 = percentile(finalLatencies, 90);
  const p50 = percentile(finalLatencies, 50);
  return {
    sessions,
    utterances: finalLatencies.length + lost.length,
    finalizeToFinalTranslationP50Ms: p50 === null ? null : Math.round(p50),
    finalizeToFinalTranslationP90Ms: p90 === null ? null : Math.round(p90),
    missingFinals: lost.length,
    errors: errors.length,
    realTime: errors.length === 0 && lost.length === 0 && p90 !== null && p90 <= 1500,
  };
}

async function streamAndFinalize(
  socket: RealtimeSocket,
  clip: Clip,
): Promise<{ perf: number; wall: number }> {
  await socket.stream(clip.pcm, { chunkMs: 20, speed: 1 });
  const mark = { perf: performance.now(), wall: Date.now() };
  socket.finalize();
  return mark;
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

  // 1. latency and CPU: one session at a time, real-time pacing
  const service = await startService(2000);
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
  for (const sessions of QUICK ? [2, 6] : [2, 4, 6, 8, 10, 12, 16, 20, 24]) {
    const result = await measureConcurrency(service.baseUrl, clips.slice(0, QUICK ? 3 : 6), sessions);
    concurrency.push(result);
    console.error(`concurrency ${sessions}: ${JSON.stringify(result)}`);
    if (!result.realTime) break;
  }

  // 3. idle sessions: memory per open socket with no audio
  const idle = await measureIdleSessions(service.baseUrl, pid, QUICK ? 200 : 1000);
  await stopService(service.child);

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
    machine: { cpus: cpus().length, model: cpus()[0]?.model, node: process.version },
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
  await writeFile("bench-results/realtime.json", JSON.stringify(summary, null, 2));

  const row = (name: string, v: { p50: number | null; p90: number | null }, target: string) =>
    `| ${name} | ${v.p50} | ${v.p90} | ${target} |`;
  console.log(
    [
      `Utterances: ${timings.length} (${clips.length} clips × ${rounds}), ${audioSeconds.toFixed(1)} s of speech per round`,
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
      `| idle sessions held open | ${idle.heldOpen} of ${idle.sessions} | 1000 |`,
      `| memory per idle session | ${idle.perIdleSessionKb} KB | ≤ 2 MB |`,
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
console.log("\n" + (await benchWhisperStreaming(SHARED, CLIPS.slice(0, QUICK ? 3 : 6))));
