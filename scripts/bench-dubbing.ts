/**
 * Dubbing throughput: a ~2-minute input built from real utterances in ../shared/data/speech (LibriVox,
 * LJSpeech and other English clips joined with short pauses over a quiet 220 Hz bed), as H.264 video
 * (copied by the dubber), MPEG-4 Part 2 video (re-encoded to H.264) and WAV (audio only, MP3 out).
 * Each is dubbed en → es by `dubMedia` with the configured engines; the H.264 input also goes once
 * through the HTTP API and an in-process worker with the `relay dub` client code (upload, job, polls,
 * download). Wall time per stage comes from progress transitions. Prints a Markdown table and writes
 * JSON to bench-results/dubbing.json.
 *
 *   npm run bench:dubbing [-- --seconds 120]
 *
 * `--first-jobs` measures instead what a fresh process pays for its first jobs: a new process with
 * a new DATA_DIR dubs the H.264 input (at least 19 s by default) twice with `voice=auto`, with no voice
 * measurements at hand (cold), then again in another new process whose DATA_DIR holds the voice
 * measurements the earlier process stored. Prints a Markdown table, writes
 * bench-results/dubbing-first-jobs.json.
 *
 *   npm run bench:dubbing -- --first-jobs [--seconds 19]
 *
 * Engines follow the same environment variables as the service (ASR_ENGINES, TTS_ENGINES, …).
 */
import { execFile } from "node:child_process";
import { cp, mkdir, mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import { cpus, tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { createJob, downloadTo, uploadFile, waitForJob, type JobStatus } from "../src/cli/dub.js";
import { loadConfig } from "../src/config.js";
import { DUB_STAGES, dubMedia, probe, runFfmpeg, type DubStage } from "../src/dubbing/index.js";
import { EngineRegistry } from "../src/engines/routing/registry.js";
import { API_KEY, startServer } from "../test/support/server.js";

const SHARED = process.env.SHARED_DIR ?? path.resolve(import.meta.dirname, "../../shared");
const SPEECH = path.join(SHARED, "data/speech");
const secondsFlag = process.argv.indexOf("--seconds");
const FIRST_JOBS = process.argv.includes("--first-jobs");
/** A child of `--first-jobs`: dubs `<input>` twice with `<data dir>`, prints the wall times as JSON. */
const childFlag = process.argv.indexOf("--first-jobs-child");
const TARGET_INPUT_SEC = secondsFlag > 0 ? Number(process.argv[secondsFlag + 1]) : FIRST_JOBS ? 19 : 120;
/** The goal this benchmark checks: processing time per minute of input. */
const TARGET_SEC_PER_MIN = 30;
const PAUSE_SEC = 0.6;
const LEAD_SEC = 1;
const SOURCE_LANG = "en";
const TARGET_LANG = "es";
/** Polls of the HTTP run: fine enough to see most stage changes (the CLI itself polls every second). */
const POLL_MS = 200;
/** Settings the service reads for its engines: passed on to the HTTP run's server too. */
const ENGINE_ENV = [
  "ASR_ENGINES",
  "MT_ENGINES",
  "TTS_ENGINES",
  "SILERO_VAD_MODEL",
  "POCKETSPHINX_MODEL_DIR",
  "POCKETSPHINX_MAX_DECODERS",
  "POCKETSPHINX_SETTINGS",
  "APERTIUM_MODES_DIR",
  "TRANSLATION_PIVOT_LANGUAGE",
  "ESPEAK_NG_BIN",
  "SVOX_PICO_DIR",
];

/** The engine settings set in the environment (both runs use the same engines). */
function engineEnv(): Record<string, string> {
  return Object.fromEntries(
    ENGINE_ENV.flatMap((key) => (process.env[key] !== undefined ? [[key, process.env[key]!]] : [])),
  );
}

/** Transfer phases of the HTTP run (client upload, queue, worker download, result upload, client download). */
const TRANSFER = "transfer";
type Phase = DubStage | typeof TRANSFER;

interface Input {
  readonly name: string;
  readonly path: string;
  readonly durationSec: number;
  readonly bytes: number;
}

interface Run {
  readonly input: string;
  readonly via: "dubMedia" | "HTTP API + worker";
  readonly durationSec: number;
  readonly totalSec: number;
  readonly secPerInputMin: number;
  /** Wall seconds per stage (and `transfer` for the HTTP run). */
  readonly stageSec: Partial<Record<Phase, number>>;
  readonly segments?: number;
  /** HTTP run only: the transfer phases one by one. */
  readonly transferSec?: Record<string, number>;
}

const ffmpeg = (args: string[], timeoutMs = 600_000) => runFfmpeg(args, { timeoutMs });
const log = (line: string) => process.stderr.write(`${line}\n`);
const round = (value: number, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits;

/** English utterances, alternating sources so speakers and recording conditions vary along the input. */
function clipList(): string[] {
  const librivox = [
    "goforward",
    ...["0870", "0880", "0890", "0920", "0930"].map((n) => `sense_and_sensibility_01_austen_64kb-${n}`),
  ].map((name) => `librivox-pocketsphinx/${name}.wav`);
  const ljspeech = Array.from(
    { length: 32 },
    (_, i) => `ljspeech/wavs/LJ001-${String(i + 1).padStart(4, "0")}.wav`,
  );
  const misc = ["misc/jfk.wav", "misc/librispeech-1995-1837-0001.wav"];
  const order: string[] = [];
  for (let i = 0; i < ljspeech.length; i++) {
    for (const list of [librivox, ljspeech, misc]) if (list[i]) order.push(list[i]!);
  }
  return order;
}

async function buildInputs(dir: string): Promise<Input[]> {
  const chosen: string[] = [];
  let speechSec = LEAD_SEC;
  for (const clip of clipList()) {
    if (speechSec >= TARGET_INPUT_SEC) break;
    chosen.push(path.join(SPEECH, clip));
    speechSec += (await probe(path.join(SPEECH, clip))).durationSec + PAUSE_SEC;
  }
  const durationSec = Math.round(speechSec * 100) / 100;
  log(`building a ${durationSec.toFixed(1)} s input from ${chosen.length} utterances…`);

  // Speech: lead-in silence, each clip followed by a pause; under it a quiet 220 Hz tone (the "music").
  const wav = path.join(dir, "speech.wav");
  const filters = [
    `anullsrc=r=48000:cl=mono,atrim=duration=${LEAD_SEC}[lead]`,
    ...chosen.map(
      (_, i) =>
        `[${i}:a]aresample=48000,aformat=sample_fmts=fltp:channel_layouts=mono,apad=pad_dur=${PAUSE_SEC}[c${i}]`,
    ),
    `[lead]${chosen.map((_, i) => `[c${i}]`).join("")}concat=n=${chosen.length + 1}:v=0:a=1[speech]`,
    `sine=frequency=220:sample_rate=48000:duration=${durationSec},volume=0.05[tone]`,
    "[speech][tone]amix=inputs=2:duration=first:normalize=0,aformat=channel_layouts=stereo[aout]",
  ];
  await ffmpeg([
    ...chosen.flatMap((clip) => ["-i", clip]),
    "-filter_complex",
    filters.join(";"),
    "-map",
    "[aout]",
    "-c:a",
    "pcm_s16le",
    wav,
  ]);

  const video = async (name: string, codec: string[]) => {
    const output = path.join(dir, name);
    await ffmpeg([
      "-f",
      "lavfi",
      "-i",
      `testsrc=size=1280x720:rate=25:duration=${durationSec}`,
      "-i",
      wav,
      "-map",
      "0:v",
      "-map",
      "1:a",
      ...codec,
      "-pix_fmt",
      "yuv420p",
      "-c:a",
      "aac",
      "-b:a",
      "128k",
      "-shortest",
      output,
    ]);
    return output;
  };
  log("encoding the H.264 and MPEG-4 Part 2 versions (1280x720, 25 fps)…");
  const h264 = await video("input-h264.mp4", ["-c:v", "libx264", "-preset", "veryfast", "-crf", "23"]);
  const mpeg4 = await video("input-mpeg4.mp4", ["-c:v", "mpeg4", "-q:v", "5"]);
  const describe = async (name: string, file: string): Promise<Input> => ({
    name,
    path: file,
    durationSec: (await probe(file)).durationSec,
    bytes: (await stat(file)).size,
  });
  return [
    await describe("H.264 720p MP4 (video copied)", h264),
    await describe("MPEG-4 Part 2 720p MP4 (video re-encoded)", mpeg4),
    await describe("WAV 48 kHz stereo (audio only)", wav),
  ];
}

/** Seconds between successive first appearances of each phase; the last runs to `endAt`. */
function durationsOf(
  firstSeen: readonly { phase: string; at: number }[],
  endAt: number,
): Record<string, number> {
  const result: Record<string, number> = {};
  firstSeen.forEach(({ phase, at }, i) => {
    const next = firstSeen[i + 1]?.at ?? endAt;
    result[phase] = (result[phase] ?? 0) + (next - at) / 1000;
  });
  return result;
}

async function runDirect(registry: EngineRegistry, input: Input, outputDir: string): Promise<Run> {
  const seen: { phase: string; at: number }[] = [];
  const started = performance.now();
  const result = await dubMedia({
    inputPath: input.path,
    outputDir,
    registry,
    sourceLang: SOURCE_LANG,
    targetLang: TARGET_LANG,
    outputName: path.parse(input.path).name,
    onProgress: (stage) => {
      if (seen.at(-1)?.phase !== stage) seen.push({ phase: stage, at: performance.now() });
    },
  });
  const ended = performance.now();
  const totalSec = (ended - started) / 1000;
  return {
    input: input.name,
    via: "dubMedia",
    durationSec: input.durationSec,
    totalSec: round(totalSec),
    secPerInputMin: round(totalSec / (input.durationSec / 60)),
    stageSec: roundAll(durationsOf(seen, ended)),
    segments: result.segments.length,
  };
}

/** Upload, job, polls and download through the real HTTP API, with the `relay dub` client functions. */
async function runHttp(input: Input, warmUp: string, outputDir: string): Promise<Run> {
  const server = await startServer({ DUBBING_WORKERS: "1", RATE_LIMIT_PER_MINUTE: "1000", ...engineEnv() });
  try {
    const connection = { server: server.baseUrl, apiKey: API_KEY };
    // The server has its own engines: warmed up like the direct runs' before anything is measured.
    const warm = await createJob(connection, {
      sourceUrl: (await uploadFile(connection, warmUp)).sourceUrl,
      targetLang: TARGET_LANG,
      sourceLang: SOURCE_LANG,
    });
    await waitForJob(connection, warm.job_id, { intervalMs: POLL_MS, maxIntervalMs: POLL_MS });

    const seen: { phase: string; at: number }[] = [];
    const mark = (phase: string) => {
      if (seen.at(-1)?.phase !== phase) seen.push({ phase, at: performance.now() });
    };
    const started = performance.now();
    mark("client upload");
    const { sourceUrl } = await uploadFile(connection, input.path);
    mark("pending");
    const created = await createJob(connection, {
      sourceUrl,
      targetLang: TARGET_LANG,
      sourceLang: SOURCE_LANG,
    });
    const job: JobStatus = await waitForJob(connection, created.job_id, {
      intervalMs: POLL_MS,
      maxIntervalMs: POLL_MS,
      onUpdate: (update) => {
        if (update.status === "completed") return;
        mark(update.progress?.stage ?? update.status);
      },
    });
    if (job.status !== "completed" || !job.output_url)
      throw new Error(`job ${job.job_id} ${job.status}: ${job.error}`);
    mark("client download");
    await downloadTo(job.output_url, path.join(outputDir, "http-output.mp4"));
    const ended = performance.now();
    const phases = durationsOf(seen, ended);
    const dubStages = new Set<string>(DUB_STAGES.map((s) => s.stage));
    const stageSec: Partial<Record<Phase, number>> = {};
    const transferSec: Record<string, number> = {};
    for (const [phase, sec] of Object.entries(phases)) {
      if (dubStages.has(phase)) stageSec[phase as DubStage] = sec;
      else transferSec[phase] = sec;
    }
    stageSec[TRANSFER] = Object.values(transferSec).reduce((a, b) => a + b, 0);
    const totalSec = (ended - started) / 1000;
    return {
      input: input.name,
      via: "HTTP API + worker",
      durationSec: input.durationSec,
      totalSec: round(totalSec),
      secPerInputMin: round(totalSec / (input.durationSec / 60)),
      stageSec: roundAll(stageSec),
      transferSec: roundAll(transferSec),
    };
  } finally {
    await server.close();
  }
}

function roundAll<T extends Partial<Record<string, number>>>(values: T): T {
  return Object.fromEntries(Object.entries(values).map(([k, v]) => [k, round(v ?? 0)])) as T;
}

function table(runs: readonly Run[]): string {
  const phases: Phase[] = [...DUB_STAGES.map((s) => s.stage), TRANSFER];
  const header = ["input", "via", "duration", "total s", "s per input min", "target", ...phases];
  const percent = (part: number | undefined, whole: number) =>
    part === undefined ? "—" : `${((100 * part) / whole).toFixed(0)} %`;
  const rows = runs.map((run) => [
    run.input,
    run.via,
    `${run.durationSec.toFixed(1)} s`,
    run.totalSec.toFixed(1),
    run.secPerInputMin.toFixed(1),
    run.secPerInputMin <= TARGET_SEC_PER_MIN ? "met" : "missed",
    ...phases.map((phase) => percent(run.stageSec[phase], run.totalSec)),
  ]);
  rows.push([
    "`DUB_STAGES` weights (reference)",
    "",
    "",
    "",
    "",
    "",
    ...DUB_STAGES.map((s) => `${(100 * s.weight).toFixed(0)} %`),
    "—",
  ]);
  return [header, header.map(() => "---"), ...rows].map((row) => `| ${row.join(" | ")} |`).join("\n");
}

/** Throughput: every input through `dubMedia` on warm engines, and the H.264 one through the HTTP API. */
async function benchThroughput(inputs: readonly Input[], work: string): Promise<void> {
  const registry = await EngineRegistry.create(
    loadConfig({
      ...engineEnv(),
      LOG_LEVEL: "silent",
    }).engines,
  );
  const runs: Run[] = [];
  // Engines load lazily: a short job first so the first measured input does not pay for it.
  const warmUp = path.join(work, "warm-up.wav");
  await ffmpeg(["-i", inputs.at(-1)!.path, "-t", "8", "-c:a", "pcm_s16le", warmUp]);
  try {
    log("warm-up job…");
    await dubMedia({
      inputPath: warmUp,
      outputDir: work,
      registry,
      sourceLang: SOURCE_LANG,
      targetLang: TARGET_LANG,
      outputName: "warm-up",
    });
    for (const input of inputs) {
      log(`dubMedia: ${input.name}…`);
      runs.push(await runDirect(registry, input, work));
      log(`  ${runs.at(-1)!.totalSec} s`);
    }
  } finally {
    await registry.close();
  }
  log(`HTTP API + worker: ${inputs[0]!.name}…`);
  runs.push(await runHttp(inputs[0]!, warmUp, work));
  log(`  ${runs.at(-1)!.totalSec} s`);

  const machine = { cpus: cpus().length, model: cpus()[0]?.model, node: process.version };
  console.log(
    `\nDubbing ${SOURCE_LANG} → ${TARGET_LANG}, ${machine.cpus} × ${machine.model}, Node ${machine.node}`,
  );
  console.log(`Target: ≤ ${TARGET_SEC_PER_MIN} s of processing per minute of input.`);
  console.log(
    `Stage columns: share of the run's wall time. HTTP run: from ${POLL_MS} ms polls, so a stage shorter ` +
      "than a poll (—) counts towards the one before it; transfer = client upload, queue, the worker's " +
      "source download and result upload, client download.\n",
  );
  console.log(table(runs));
  const http = runs.find((run) => run.transferSec);
  if (http?.transferSec) {
    console.log(
      `\nHTTP transfer phases (s): ${Object.entries(http.transferSec)
        .map(([phase, sec]) => `${phase} ${sec}`)
        .join(", ")}`,
    );
  }
  await mkdir("bench-results", { recursive: true });
  await writeFile(
    "bench-results/dubbing.json",
    JSON.stringify(
      {
        date: new Date().toISOString(),
        machine,
        languages: { from: SOURCE_LANG, to: TARGET_LANG },
        targetSecPerInputMin: TARGET_SEC_PER_MIN,
        inputs: inputs.map(({ name, durationSec, bytes }) => ({ name, durationSec, bytes })),
        runs,
      },
      null,
      2,
    ),
  );
  console.log("\nwrote bench-results/dubbing.json");
}

/** Wall seconds of a process's first and second job. */
interface FirstJobs {
  readonly firstSec: number;
  readonly secondSec: number;
}

/**
 * In a `--first-jobs` child: the engines are built and warmed as the service builds them before it
 * takes work, then `input` is dubbed twice (voice "auto") and the two wall times are printed.
 */
async function firstJobsChild(input: string, dataDir: string): Promise<void> {
  const registry = await EngineRegistry.create(
    loadConfig({ ...engineEnv(), DATA_DIR: dataDir, LOG_LEVEL: "silent" }).engines,
  );
  try {
    await registry.warmUp();
    const job = async (outputName: string) => {
      const started = performance.now();
      const outputDir = path.join(dataDir, "out");
      await dubMedia({
        inputPath: input,
        outputDir,
        registry,
        sourceLang: SOURCE_LANG,
        targetLang: TARGET_LANG,
        voice: "auto",
        outputName,
      });
      return round((performance.now() - started) / 1000);
    };
    const result: FirstJobs = { firstSec: await job("first"), secondSec: await job("second") };
    console.log(JSON.stringify(result));
  } finally {
    await registry.close();
  }
}

/**
 * Runs a `--first-jobs` child: a new process of this script on `dataDir`, with the models of this
 * one (so the same engines serve) and the voice measurements of `dataDir` only.
 */
async function freshProcess(input: string, dataDir: string): Promise<FirstJobs> {
  const env: NodeJS.ProcessEnv = { ...process.env, MODELS_DIR: loadConfig(process.env).engines.modelsDir };
  delete env.VOICE_MEASUREMENTS_DIR;
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [...process.execArgv, process.argv[1]!, "--first-jobs-child", input, dataDir],
    { env, maxBuffer: 1 << 20, timeout: 900_000 },
  );
  const result = JSON.parse(stdout.trim().split("\n").at(-1)!) as FirstJobs;
  log(`  ${result.firstSec} s, ${result.secondSec} s`);
  return result;
}

/**
 * What a fresh process pays for its first dubbing jobs: cold (a new DATA_DIR, no voice
 * measurements), then with the measurements an earlier process stored in its DATA_DIR.
 */
async function benchFirstJobs(input: Input, work: string): Promise<void> {
  const cold = path.join(work, "data-cold");
  log(`fresh process, fresh DATA_DIR (cold): ${input.name} twice…`);
  const coldRun = await freshProcess(input.path, cold);
  // A new DATA_DIR again, holding only the measurements the earlier process stored.
  const persisted = path.join(work, "data-persisted");
  const measurements = (dataDir: string) => path.join(dataDir, "voice-measurements");
  await cp(measurements(cold), measurements(persisted), { recursive: true });
  log(`fresh process, voice measurements stored by the earlier one: ${input.name} twice…`);
  const persistedRun = await freshProcess(input.path, persisted);
  const machine = { cpus: cpus().length, model: cpus()[0]?.model, node: process.version };
  console.log(
    `\nFirst jobs of a fresh process: ${input.name}, ${input.durationSec.toFixed(1)} s, ` +
      `${SOURCE_LANG} → ${TARGET_LANG}, voice auto; ${machine.cpus} × ${machine.model}, Node ${machine.node}\n`,
  );
  const row = (label: string, { firstSec, secondSec }: FirstJobs) =>
    `| ${label} | ${firstSec.toFixed(1)} | ${secondSec.toFixed(1)} | ${(firstSec / secondSec).toFixed(2)} |`;
  const header = "| voice measurements at start | first job s | second job s | first / second |";
  console.log(`${header}\n| --- | --- | --- | --- |`);
  console.log(row("none (cold: measured during the first job)", coldRun));
  console.log(row("stored in DATA_DIR by an earlier process", persistedRun));
  const result = {
    date: new Date().toISOString(),
    machine,
    input: { name: input.name, durationSec: input.durationSec },
    cold: coldRun,
    persisted: persistedRun,
  };
  await mkdir("bench-results", { recursive: true });
  await writeFile("bench-results/dubbing-first-jobs.json", JSON.stringify(result, null, 2));
  console.log("\nwrote bench-results/dubbing-first-jobs.json");
}

if (childFlag > 0) {
  await firstJobsChild(process.argv[childFlag + 1]!, process.argv[childFlag + 2]!);
} else {
  const work = await mkdtemp(path.join(tmpdir(), "bench-dubbing-"));
  try {
    const inputs = await buildInputs(work);
    if (FIRST_JOBS) await benchFirstJobs(inputs[0]!, work);
    else await benchThroughput(inputs, work);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}
