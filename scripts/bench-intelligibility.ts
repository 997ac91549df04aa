/**
 * Intelligibility of sped-up speech (issue 50, docs/benchmarks.md "Intelligibility at the pace
 * relay chose"): relay's English speech at natural pace and at the faster rates pacing uses, heard by
 * a real recognizer, scored against the text relay meant to say.
 *
 *   npm run bench:intelligibility [-- --sentences 30] [-- --part engines|sessions]
 *
 * - Text: the first N (default 30) Spanish sentences of FLORES dev (../shared/data), translated into
 *   English by relay's Apertium engine: what an es→en session would speak.
 * - Voices: eSpeak NG (the library's default female and male voices) and the real Piper voice
 *   en_US-joe-medium imported from Piper's layout into relay's sherpa-onnx engine (the test fixture
 *   of scripts/setup-real-models.sh).
 * - Speeds: 1 (natural), 1.15 (the default maximum), 1.25, 1.5, 1.6 (the highest a client may ask
 *   for), made exactly as pacing makes them (`fasterVoice`: the voice's own rate, through the engine's
 *   rate control).
 * - Heard by faster-whisper 1.2.1 with the real Whisper base (multilingual, told the language is
 *   English; greedy, as test/python/faster_whisper_transcribe.py decodes). WER as relay's model
 *   checks score it (check-metrics `wordErrorRate`: corpus-level, lower case, punctuation removed).
 *
 * Two parts (`--part engines|sessions`; both by default):
 * - engines: the speech is made by the engines directly, not through a session: what pacing changes
 *   is the voice's rate and nothing else, so the same sentences at each speed measure exactly that
 *   change, at every speed pacing may use.
 * - sessions: the pace relay chose. The five FLEURS dev Spanish clips joined into one 48.5 s turn
 *   are streamed in real time to live es→en sessions (recognition by relay's whisper.cpp engine on
 *   the same real base, converted to ggml; Apertium; the session's default English voice: eSpeak NG,
 *   or the Piper voice once it is installed), once with `pace=natural` and once with the default
 *   (catch-up). Everything the session spoke is heard as one recording and scored against every
 *   translated final it sent (the last final of each segment, in order): what it meant to say.
 *   The speeds it chose are read from `relay_speech_seconds_total{speed}`.
 * Writes bench-results/intelligibility.json.
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { copyFile, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { cpus, loadavg, tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { concatFloat32, concatPcm } from "../src/audio/pcm.js";
import { encodeWav, readWavAsPcm16 } from "../src/audio/wav.js";
import { createSession, RealtimeSocket } from "../src/cli/recording-socket.js";
import type { TtsEngine, Voice } from "../src/core/contracts.js";
import { wordErrorRate } from "../src/engines/kit/models/check-metrics.js";
import { createApertiumEngine } from "../src/engines/apertium/index.js";
import { createEspeakEngine } from "../src/engines/espeak-ng/index.js";
import { neuralVoiceModels } from "../src/engines/sherpa-onnx/models.js";
import { importPiperVoice } from "../src/engines/sherpa-onnx/piper-import.js";
import { createSherpaTtsEngine } from "../src/engines/sherpa-onnx/tts.js";
import { OUTPUT_SAMPLE_RATE } from "../src/pipeline/framer.js";
import { fasterVoice, MAX_SPEEDUP_RANGE } from "../src/pipeline/pacing.js";
import { defaultVoice } from "../src/voices/library.js";
import { pythonEnvDir, pythonEnvProblem } from "../test/support/python-clients.js";
import { realModelDir, realModelsProblem } from "../test/support/real-models.js";
import { PROJECT_ROOT } from "../test/support/run-script.js";
import { startServiceProcess } from "../test/support/service-process.js";
import { speechBySpeed, speedsChosen } from "../test/support/speech-metrics.js";
import { flagValue, SHARED } from "./realtime-load.js";

const run = promisify(execFile);
const SENTENCES = Number(flagValue("--sentences") ?? 30);
const SPEEDS = [1, 1.15, 1.25, 1.5, MAX_SPEEDUP_RANGE.max];
const PART = flagValue("--part");
const PIPER = "piper-en_US-joe-medium";
const API_KEY = "bench-key";

const problem = realModelsProblem() ?? pythonEnvProblem("models");
if (problem) {
  console.error(`bench:intelligibility needs the real models and the models Python environment: ${problem}`);
  process.exit(1);
}

/** 16-bit PCM of float samples in [-1, 1]. */
const toPcm16 = (samples: Float32Array) =>
  Int16Array.from(samples, (s) => Math.round(Math.max(-1, Math.min(1, s)) * 32767));

interface Transcript {
  readonly file: string;
  readonly text: string;
}

async function hear(files: readonly string[]): Promise<Transcript[]> {
  const { stdout } = await run(
    path.join(pythonEnvDir("models"), "bin", "python"),
    [
      path.join(PROJECT_ROOT, "test/python/faster_whisper_transcribe.py"),
      realModelDir("whisper-base"),
      "en",
      ...files,
    ],
    { maxBuffer: 64 * 1024 * 1024 },
  );
  return JSON.parse(stdout) as Transcript[];
}

interface Row {
  readonly part: "engines" | "sessions";
  readonly voice: string;
  /** engines: the rate asked for; sessions: the session's pace. */
  readonly speed: number | "natural" | "catch-up";
  /** sessions: the speeds relay chose, mean weighted by seconds spoken, and the fastest. */
  readonly chose?: { readonly mean: number; readonly fastest: number };
  readonly seconds: number;
  readonly words: number;
  readonly charactersPerSecond: number;
  readonly wer: number;
  readonly meant: readonly string[];
  readonly hypotheses: readonly string[];
}

const words = (texts: readonly string[]) =>
  texts.reduce((n, t) => n + t.split(/\s+/u).filter(Boolean).length, 0);
const characters = (texts: readonly string[]) => texts.reduce((n, text) => n + text.length, 0);

/** Every speed pacing may use, on the same sentences, spoken by the engines directly. */
async function engineRows(work: string, modelsDir: string): Promise<Row[]> {
  const spanish = readFileSync(path.join(SHARED, "data/text/flores-dev/es.txt"), "utf8")
    .split("\n")
    .filter((line) => line.trim() !== "")
    .slice(0, SENTENCES);
  const apertium = await createApertiumEngine();
  const meant: string[] = [];
  for (const text of spanish)
    meant.push(await apertium.translate({ text, from: "es", to: "en", previous: [] }));
  await apertium.close();

  const espeak = await createEspeakEngine();
  const piper = await createSherpaTtsEngine({ models: neuralVoiceModels([PIPER], modelsDir) });
  const voices: { name: string; engine: TtsEngine; voice: Voice }[] = [
    { name: "eSpeak NG, female", engine: espeak, voice: defaultVoice("female") },
    { name: "eSpeak NG, male", engine: espeak, voice: defaultVoice("male") },
    { name: "Piper en_US-joe-medium", engine: piper, voice: defaultVoice("male") },
  ];
  const rows: Row[] = [];
  for (const [v, { name, engine, voice }] of voices.entries())
    for (const speed of SPEEDS) {
      const files: string[] = [];
      let seconds = 0;
      for (const [i, text] of meant.entries()) {
        const audio = await engine.synthesize({ text, language: "en", voice: fasterVoice(voice, speed) });
        seconds += audio.samples.length / audio.sampleRate;
        const file = path.join(work, `${v}-${speed}-${i}.wav`);
        await writeFile(file, encodeWav(toPcm16(audio.samples), audio.sampleRate));
        files.push(file);
      }
      const hypotheses = (await hear(files)).map((t) => t.text);
      rows.push({
        part: "engines",
        voice: name,
        speed,
        seconds,
        words: words(meant),
        charactersPerSecond: characters(meant) / seconds,
        wer: wordErrorRate(meant, hypotheses),
        meant,
        hypotheses,
      });
      console.error(`${name} at ${speed}×: ${rows.at(-1)!.wer.toFixed(1)} %`);
    }
  await espeak.close();
  await piper.close();
  return rows;
}

/** The FLEURS dev Spanish clips, joined in order into one turn. */
async function spanishTurn(): Promise<Int16Array> {
  const parts = await Promise.all(
    ["005", "006", "007", "008", "009"].map((n) =>
      readWavAsPcm16(path.join(SHARED, `data/speech/fleurs-dev/fleurs-es-${n}.wav`)),
    ),
  );
  return concatPcm(parts);
}

/** One es→en session over the turn: all it spoke, and every segment's last translated final. */
async function speakTurn(baseUrl: string, pcm: Int16Array, pace: string) {
  const params = { sourceLanguage: "es", targetLanguage: "en", pace };
  const socket = await RealtimeSocket.connect((await createSession(baseUrl, API_KEY, params)).ws_url);
  await socket.waitFor((m) => m.type === "ready");
  await socket.stream(pcm, { chunkMs: 20, speed: 1 });
  socket.finalize();
  await socket.waitFor((m) => m.type === "finalized", 600_000);
  socket.close();
  const finals = new Map<unknown, string>();
  for (const m of socket.messages)
    if (m.type === "translated_transcript" && m.is_final === true)
      finals.set(m.correlation_id, String(m.text));
  const audio = concatFloat32(socket.audioFrames);
  return { meant: [...finals.values()].filter((t) => t.trim() !== ""), audio };
}

/** Live es→en sessions, natural pace and the pace relay chose, with each English voice. */
async function sessionRows(work: string, modelsDir: string): Promise<Row[]> {
  const pcm = await spanishTurn();
  // eSpeak NG speaks English while no neural English voice is installed; the Piper voice once it is.
  const espeakModels = path.join(work, "models-espeak");
  await mkdir(espeakModels);
  const converted = path.join(work, "ggml-base.bin");
  await run(path.join(pythonEnvDir("models"), "bin/python"), [
    path.join(PROJECT_ROOT, "scripts/convert-whisper-ct2-to-ggml.py"),
    realModelDir("whisper-base"),
    converted,
  ]);
  for (const dir of [espeakModels, modelsDir]) await copyFile(converted, path.join(dir, "ggml-base.bin"));
  const rows: Row[] = [];
  for (const [voice, dir] of [
    ["eSpeak NG (default voice)", espeakModels],
    ["Piper en_US-joe-medium", modelsDir],
  ] as const) {
    const service = await startServiceProcess("bench-intelligibility", {
      API_KEYS: API_KEY,
      DATA_DIR: path.join(work, "data"),
      MODELS_DIR: dir,
    });
    try {
      console.error(`healthz: ${await (await fetch(`${service.baseUrl}/healthz`)).text()}`);
      for (const pace of ["natural", "catch-up"] as const) {
        const before = await speechBySpeed(service.baseUrl);
        const { meant, audio } = await speakTurn(service.baseUrl, pcm, pace);
        const chose = speedsChosen(before, await speechBySpeed(service.baseUrl));
        const file = path.join(work, `session-${rows.length}.wav`);
        await writeFile(file, encodeWav(toPcm16(audio), OUTPUT_SAMPLE_RATE));
        const hypotheses = (await hear([file])).map((t) => t.text);
        const seconds = audio.length / OUTPUT_SAMPLE_RATE;
        rows.push({
          part: "sessions",
          voice,
          speed: pace,
          chose,
          seconds,
          words: words(meant),
          charactersPerSecond: characters(meant) / seconds,
          // One recording against all it meant: corpus WER over the joined text.
          wer: wordErrorRate([meant.join(" ")], hypotheses),
          meant,
          hypotheses,
        });
        console.error(`${voice}, ${pace}: ${rows.at(-1)!.wer.toFixed(1)} % (chose ${JSON.stringify(chose)})`);
      }
    } finally {
      service.child.kill("SIGTERM");
      await service.exited;
    }
  }
  return rows;
}

const signed = (points: number) => `${points >= 0 ? "+" : ""}${points.toFixed(1)}`;

function table(rows: readonly Row[]): string[] {
  const engines = rows.filter((r) => r.part === "engines");
  const sessions = rows.filter((r) => r.part === "sessions");
  const lines: string[] = [];
  if (engines.length) {
    lines.push(
      `Engines: ${SENTENCES} sentences (FLORES dev es 1–${SENTENCES} → Apertium en, ${engines[0]!.words} words); heard by faster-whisper 1.2.1, Whisper base (real weights), language en`,
      "",
      "| Voice | Speed | Speech (s) | Characters/s | WER | vs natural (points) |",
      "| --- | --- | --- | --- | --- | --- |",
      ...engines.map((row) => {
        const natural = engines.find((r) => r.voice === row.voice && r.speed === 1)!;
        return `| ${row.voice} | ${row.speed}× | ${row.seconds.toFixed(1)} | ${row.charactersPerSecond.toFixed(1)} | ${row.wer.toFixed(1)} % | ${row.speed === 1 ? "—" : signed(row.wer - natural.wer)} |`;
      }),
      "",
    );
  }
  if (sessions.length)
    lines.push(
      "Sessions: FLEURS dev es 005–009 as one 48.5 s turn, es→en, whisper.cpp base → Apertium; heard as above",
      "",
      "| Voice | pace | Speeds chosen (mean / fastest) | Speech (s) | Words meant | WER | vs natural (points) |",
      "| --- | --- | --- | --- | --- | --- | --- |",
      ...sessions.map((row) => {
        const natural = sessions.find((r) => r.voice === row.voice && r.speed === "natural")!;
        return `| ${row.voice} | ${row.speed} | ${row.chose!.mean.toFixed(2)} / ${row.chose!.fastest.toFixed(2)} | ${row.seconds.toFixed(1)} | ${row.words} | ${row.wer.toFixed(1)} % | ${row.speed === "natural" ? "—" : signed(row.wer - natural.wer)} |`;
      }),
    );
  return lines;
}

const work = await mkdtemp(path.join(tmpdir(), "relay-intelligibility-"));
try {
  const loadBefore = loadavg()[0]!.toFixed(2);
  const modelsDir = path.join(work, "models");
  await importPiperVoice(path.join(realModelDir(PIPER), "en_US-joe-medium.onnx"), modelsDir);
  const rows = [
    ...(PART === undefined || PART === "engines" ? await engineRows(work, modelsDir) : []),
    ...(PART === undefined || PART === "sessions" ? await sessionRows(work, modelsDir) : []),
  ];
  console.log(
    [
      `Machine: ${cpus()[0]?.model} × ${cpus().length}, load average ${loadBefore} before, ${loadavg()[0]!.toFixed(2)} after`,
      "",
      ...table(rows),
    ].join("\n"),
  );
  await mkdir(path.join(PROJECT_ROOT, "bench-results"), { recursive: true });
  await writeFile(
    path.join(PROJECT_ROOT, "bench-results/intelligibility.json"),
    JSON.stringify(rows, null, 2),
  );
} finally {
  await rm(work, { recursive: true, force: true });
}
