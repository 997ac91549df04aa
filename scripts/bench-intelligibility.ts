/**
 * Intelligibility of sped-up speech (issue 50, docs/benchmarks.md "Intelligibility at the pace
 * relay chose"): relay's English speech at natural pace and at the faster rates pacing uses, heard by
 * a real recognizer, scored against the text relay meant to say.
 *
 *   npm run bench:intelligibility [-- --sentences 30]
 *
 * - Text: the first N (default 30) Spanish sentences of FLORES dev (../shared/data), translated into
 *   English by relay's Apertium engine: what an es→en session would speak.
 * - Voices: eSpeak NG (the library's default female and male voices) and the real Piper voice
 *   en_US-joe-medium imported from Piper's layout into relay's sherpa-onnx engine (the test fixture
 *   of scripts/setup-real-models.sh).
 * - Speeds: 1 (natural), 1.25, 1.5 (the default maximum), 1.6 (the highest a client may ask for),
 *   made exactly as pacing makes them (`fasterVoice`: the voice's own rate, through the engine's
 *   rate control).
 * - Heard by faster-whisper 1.2.1 with the real Whisper base (multilingual, told the language is
 *   English; greedy, as test/python/faster_whisper_transcribe.py decodes). WER as relay's model
 *   checks score it (check-metrics `wordErrorRate`: corpus-level, lower case, punctuation removed).
 *
 * The speech is made by the engines directly, not through a session: what pacing changes is the
 * voice's rate and nothing else, so the same sentences at each speed measure exactly that change.
 * Writes bench-results/intelligibility.json.
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { encodeWav } from "../src/audio/wav.js";
import type { TtsEngine, Voice } from "../src/core/contracts.js";
import { wordErrorRate } from "../src/engines/kit/models/check-metrics.js";
import { createApertiumEngine } from "../src/engines/apertium/index.js";
import { createEspeakEngine } from "../src/engines/espeak-ng/index.js";
import { neuralVoiceModels } from "../src/engines/sherpa-onnx/models.js";
import { importPiperVoice } from "../src/engines/sherpa-onnx/piper-import.js";
import { createSherpaTtsEngine } from "../src/engines/sherpa-onnx/tts.js";
import { fasterVoice, MAX_SPEEDUP_RANGE } from "../src/pipeline/pacing.js";
import { defaultVoice } from "../src/voices/library.js";
import { pythonEnvDir, pythonEnvProblem } from "../test/support/python-clients.js";
import { realModelDir, realModelsProblem } from "../test/support/real-models.js";
import { PROJECT_ROOT } from "../test/support/run-script.js";
import { SHARED } from "./realtime-load.js";

const run = promisify(execFile);
const SENTENCES = Number(
  process.argv.includes("--sentences") ? process.argv[process.argv.indexOf("--sentences") + 1] : 30,
);
const SPEEDS = [1, 1.25, 1.5, MAX_SPEEDUP_RANGE.max];
const PIPER = "piper-en_US-joe-medium";

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

const work = await mkdtemp(path.join(tmpdir(), "relay-intelligibility-"));
try {
  const spanish = readFileSync(path.join(SHARED, "data/text/flores-dev/es.txt"), "utf8")
    .split("\n")
    .filter((line) => line.trim() !== "")
    .slice(0, SENTENCES);
  const apertium = await createApertiumEngine();
  const meant: string[] = [];
  for (const text of spanish)
    meant.push(await apertium.translate({ text, from: "es", to: "en", previous: [] }));
  await apertium.close();

  const modelsDir = path.join(work, "models");
  await importPiperVoice(path.join(realModelDir(PIPER), "en_US-joe-medium.onnx"), modelsDir);
  const voices: { name: string; engine: TtsEngine; voice: Voice }[] = [];
  const espeak = await createEspeakEngine();
  const piper = await createSherpaTtsEngine({ models: neuralVoiceModels([PIPER], modelsDir) });
  voices.push(
    { name: "eSpeak NG, female", engine: espeak, voice: defaultVoice("female") },
    { name: "eSpeak NG, male", engine: espeak, voice: defaultVoice("male") },
    { name: "Piper en_US-joe-medium", engine: piper, voice: defaultVoice("male") },
  );

  interface Row {
    voice: string;
    speed: number;
    seconds: number;
    charactersPerSecond: number;
    wer: number;
    hypotheses: string[];
  }
  const rows: Row[] = [];
  await mkdir(path.join(work, "wav"));
  for (const [v, { name, engine, voice }] of voices.entries())
    for (const speed of SPEEDS) {
      const files: string[] = [];
      let seconds = 0;
      for (const [i, text] of meant.entries()) {
        const audio = await engine.synthesize({ text, language: "en", voice: fasterVoice(voice, speed) });
        seconds += audio.samples.length / audio.sampleRate;
        const file = path.join(work, "wav", `${v}-${speed}-${i}.wav`);
        await writeFile(file, encodeWav(toPcm16(audio.samples), audio.sampleRate));
        files.push(file);
      }
      const hypotheses = (await hear(files)).map((t) => t.text);
      const characters = meant.reduce((n, text) => n + text.length, 0);
      rows.push({
        voice: name,
        speed,
        seconds,
        charactersPerSecond: characters / seconds,
        wer: wordErrorRate(meant, hypotheses),
        hypotheses,
      });
      console.error(`${name} at ${speed}×: ${rows.at(-1)!.wer.toFixed(1)} %`);
    }
  await espeak.close();
  await piper.close();

  const lines = [
    `${meant.length} sentences (FLORES dev es 1–${meant.length} → Apertium en, ${meant.reduce((n, t) => n + t.split(/\s+/u).length, 0)} words); heard by faster-whisper 1.2.1, Whisper base (real weights), language en`,
    "",
    "| Voice | Speed | Speech (s) | Characters/s | WER | vs natural (points) |",
    "| --- | --- | --- | --- | --- | --- |",
  ];
  for (const row of rows) {
    const natural = rows.find((r) => r.voice === row.voice && r.speed === 1)!;
    lines.push(
      `| ${row.voice} | ${row.speed}× | ${row.seconds.toFixed(1)} | ${row.charactersPerSecond.toFixed(1)} | ${row.wer.toFixed(1)} % | ${row.speed === 1 ? "—" : (row.wer - natural.wer >= 0 ? "+" : "") + (row.wer - natural.wer).toFixed(1)} |`,
    );
  }
  console.log(lines.join("\n"));
  await mkdir(path.join(PROJECT_ROOT, "bench-results"), { recursive: true });
  await writeFile(
    path.join(PROJECT_ROOT, "bench-results/intelligibility.json"),
    JSON.stringify({ meant, rows }, null, 2),
  );
} finally {
  await rm(work, { recursive: true, force: true });
}
