/**
 * What speaking in the speaker's own voice costs (voice_type=clone with the OpenVoice tone colour
 * converter, src/engines/openvoice/), on a **real-size stand-in** of the published models
 * (test/support/stand-in-models/tone-color.ts, `size: "real"`: the real layers and compute, random
 * weights; its sound means nothing):
 *
 *   1. the converter alone: extraction and conversion time, real-time factor, and the first
 *      piece's latency (a sentence is converted in pieces, chunks.ts), at 1 and 2 threads;
 *   2. live sessions (the service as `npm start` runs it: PocketSphinx, Apertium, eSpeak NG, the
 *      converter in its host): finalize → first translated audio p50/p90 with voiceType=clone and
 *      with a library voice, at 1 and 6 sessions, and the share of translated speech converted
 *      (the rest fell back to the library voice: the converter's queue was full);
 *   3. a 60 s dubbing job (a man and a woman) with voice=clone and voice=auto: wall time and CPU.
 *
 *   npm run bench:clone
 */
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import path from "node:path";
import { encodeWav } from "../src/audio/wav.js";
import { createSession, RealtimeSocket } from "../src/cli/recording-socket.js";
import { findToneColorModel } from "../src/engines/openvoice/catalogue.js";
import { createOpenVoiceEngine } from "../src/engines/openvoice/index.js";
import { buildConversation } from "../test/support/conversations.js";
import { dubbingClient } from "../test/support/dubbing-client.js";
import { startServiceProcess } from "../test/support/service-process.js";
import { installStandInToneColor } from "../test/support/stand-in-models/install.js";
import { loadClip, percentile, sleep, type Clip } from "./realtime-load.js";

const API_KEY = "bench-key";
const RATE = 22_050;
const work = mkdtempSync(path.join(tmpdir(), "relay-bench-clone-"));
const modelsDir = path.join(work, "models");

console.log(
  `Machine: ${cpus()[0]?.model ?? "unknown CPU"} × ${cpus().length}, Node.js ${process.version}, ` +
    `${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC, load average ${loadavg()[0]!.toFixed(1)}\n`,
);
const dir = await installStandInToneColor(modelsDir, { size: "real" });

// ---------------------------------------------------------------- 1. the converter alone
const speechLike = (seconds: number) => ({
  samples: Float32Array.from(
    { length: Math.round(seconds * RATE) },
    (_, i) => 0.2 * Math.sin(i / 9) * Math.sin(i / 2000),
  ),
  sampleRate: RATE,
});
const engineRows = [
  "| threads | extract 10 s | sentence | first piece | whole sentence | real-time factor |",
  "| --- | --- | --- | --- | --- | --- |",
];
for (const threads of [1, 2]) {
  const engine = await createOpenVoiceEngine({ entry: findToneColorModel("tone-color")!, dir, threads });
  let started = performance.now();
  const color = await engine.toneColor(speechLike(10));
  const extractMs = performance.now() - started;
  // Warm-up.
  for await (const piece of engine.convert(speechLike(1), color)) void piece;
  for (const seconds of [1, 2.5, 5]) {
    started = performance.now();
    let first: number | undefined;
    for await (const piece of engine.convert(speechLike(seconds), color)) {
      void piece;
      first ??= performance.now() - started;
    }
    const whole = performance.now() - started;
    engineRows.push(
      `| ${threads} | ${ms(extractMs)} | ${seconds} s | ${ms(first!)} | ${ms(whole)} | ${(whole / 1000 / seconds).toFixed(2)} |`,
    );
  }
  await engine.close();
}
console.log(engineRows.join("\n") + "\n");

// ---------------------------------------------------------------- 2. live sessions
const service = await startServiceProcess("bench-clone", {
  API_KEYS: API_KEY,
  DATA_DIR: path.join(work, "data"),
  MODELS_DIR: modelsDir,
  RATE_LIMIT_PER_MINUTE: "10000",
  DUBBING_WORKERS: "1",
});
const librivox = readdirSync(
  path.join(
    process.env.SHARED_DIR ?? path.resolve(import.meta.dirname, "../../shared"),
    "data/speech/librivox-pocketsphinx",
  ),
)
  .filter((file) => file.startsWith("sense_and_sensibility"))
  .sort();
const clips = await Promise.all(librivox.map((file) => loadClip(`librivox-pocketsphinx/${file}`)));
const [warmUp, ...measured] = clips;

interface LiveRun {
  readonly firstAudio: number[];
  readonly missing: number;
  readonly convertedShare: number;
}

/** N sessions: a warm-up clip (the speaker's tone colour), then each measured clip in real time. */
async function live(sessions: number, voiceType: "clone" | "male"): Promise<LiveRun> {
  const firstAudio: number[] = [];
  let missing = 0;
  let [converted, total] = [0, 0];
  await Promise.all(
    Array.from({ length: sessions }, async (_, index) => {
      const params = { sourceLanguage: "en", targetLanguage: "es", voiceType };
      const socket = await RealtimeSocket.connect(
        (await createSession(service.baseUrl, API_KEY, params)).ws_url,
      );
      await socket.waitFor((m) => m.type === "ready");
      await sleep(index * 150);
      await utterance(socket, warmUp!);
      const from = socket.received.length;
      for (const clip of measured) {
        const latency = await utterance(socket, clip);
        if (latency === undefined) missing++;
        else firstAudio.push(latency);
      }
      const audio = socket.received.slice(from).flatMap((r) => (r.audio ? [r.audio] : []));
      const windows = sineWindows(audio);
      converted += windows.sine;
      total += windows.all;
      socket.close();
    }),
  );
  return { firstAudio, missing, convertedShare: total === 0 ? 0 : converted / total };
}

/** Streams a clip in real time, finalizes, and gives finalize → the first audio after its final translation. */
async function utterance(socket: RealtimeSocket, clip: Clip): Promise<number | undefined> {
  await socket.stream(clip.pcm, { chunkMs: 20, speed: 1 });
  const finalizeAt = performance.now();
  const wall = Date.now();
  socket.finalize();
  const final = await socket
    .waitFor(
      (m) =>
        m.type === "translated_transcript" && m.is_final === true && (m.timestamp as number) * 1000 >= wall,
      30_000,
    )
    .catch(() => undefined);
  await socket.settle(1500, 60_000);
  const finalAt = final ? socket.received.find((r) => r.message === final)?.at : undefined;
  if (finalAt === undefined) return undefined;
  const audio = socket.received.find((r) => r.audio && r.at >= finalAt);
  return audio ? audio.at - finalizeAt : undefined;
}

/** 50 ms windows of the output, and those that are the stand-in converter's sine (converted speech). */
function sineWindows(frames: readonly Float32Array[]): { sine: number; all: number } {
  const samples = Float32Array.from(frames.flatMap((frame) => [...frame]));
  const size = 1200;
  let [sine, all] = [0, 0];
  for (let start = 0; start + size <= samples.length; start += size) {
    let [energy, crossings] = [0, 0];
    for (let i = start; i < start + size; i++) {
      energy += samples[i]! ** 2;
      if (i > start && samples[i - 1]! < 0 !== samples[i]! < 0) crossings++;
    }
    if (energy / size < 1e-5) continue;
    all++;
    const w = (Math.PI * crossings) / size;
    let [s1, s2] = [0, 0];
    for (let i = start; i < start + size; i++) [s1, s2] = [samples[i]! + 2 * Math.cos(w) * s1 - s2, s1];
    const power = (s1 * s1 + s2 * s2 - 2 * Math.cos(w) * s1 * s2) / (size / 2);
    if (power / energy > 0.8) sine++;
  }
  return { sine, all };
}

const liveRows = [
  `| sessions | voice | utterances | finalize → first audio p50 | p90 | missing | speech converted |`,
  "| --- | --- | --- | --- | --- | --- | --- |",
];
for (const sessions of [1, 6]) {
  for (const voiceType of ["male", "clone"] as const) {
    const run = await live(sessions, voiceType);
    liveRows.push(
      `| ${sessions} | ${voiceType === "clone" ? "clone (own voice)" : "library (male)"} | ${run.firstAudio.length + run.missing} | ${ms(percentile(run.firstAudio, 50))} | ${ms(percentile(run.firstAudio, 90))} | ${run.missing} | ${voiceType === "clone" ? `${Math.round(100 * run.convertedShare)} %` : "–"} |`,
    );
    console.error(liveRows.at(-1));
  }
}
console.log(liveRows.join("\n") + "\n");

// ---------------------------------------------------------------- 3. a 60 s dubbing job
const conversation = await buildConversation("librivox", "lj", { maxTurns: 6 });
const seconds = Math.min(60, conversation.pcm.length / 16_000);
const input = path.join(work, "conversation.wav");
writeFileSync(input, encodeWav(conversation.pcm.subarray(0, Math.round(seconds * 16_000))));
const client = dubbingClient(service.baseUrl, API_KEY);
const dubRows = [
  `| ${seconds.toFixed(0)} s, a man and a woman | wall time | CPU (service and its hosts) |`,
  "| --- | --- | --- |",
];
for (const voice of ["auto", "clone"]) {
  const sourceUrl = await client.upload(input, "audio/wav");
  const cpuBefore = treeCpuSeconds(service.child.pid!);
  const started = performance.now();
  const created = await client.request("POST", "/api/dubbing/jobs", {
    source_url: sourceUrl,
    source_lang: "en",
    target_lang: "es",
    voice,
  });
  const job = await client.finished(created.body.job_id as string);
  if (job.status !== "completed") throw new Error(`dubbing failed: ${JSON.stringify(job)}`);
  dubRows.push(
    `| voice=${voice} | ${((performance.now() - started) / 1000).toFixed(1)} s | ${(treeCpuSeconds(service.child.pid!) - cpuBefore).toFixed(1)} s |`,
  );
}
console.log(dubRows.join("\n"));
service.child.kill("SIGTERM");
await service.exited;

function ms(value: number | null | undefined): string {
  return value === null || value === undefined ? "–" : `${Math.round(value).toLocaleString("en")} ms`;
}

/** CPU seconds of a process and every process under it (the service's engine programs and hosts). */
function treeCpuSeconds(root: number): number {
  const parents = new Map<number, number>();
  const cpu = new Map<number, number>();
  for (const name of readdirSync("/proc").filter((entry) => /^\d+$/u.test(entry))) {
    try {
      const fields = readFileSync(`/proc/${name}/stat`, "utf8").split(") ")[1]!.split(" ");
      parents.set(Number(name), Number(fields[1]));
      // The root's own time and its reaped children's (ffmpeg, Apertium's programs); the living by their own.
      const own = Number(fields[11]) + Number(fields[12]);
      const reaped = Number(name) === root ? Number(fields[13]) + Number(fields[14]) : 0;
      cpu.set(Number(name), (own + reaped) / 100);
    } catch {
      // ended meanwhile
    }
  }
  const under = (pid: number): boolean =>
    pid === root || (parents.has(pid) && pid !== 1 && under(parents.get(pid)!));
  return [...cpu].reduce((sum, [pid, seconds]) => sum + (under(pid) ? seconds : 0), 0);
}
