/**
 * Neural speech cost (sherpa-onnx TTS, src/engines/sherpa-onnx/) on a real-size stand-in Piper
 * voice: `size: "real"` in test/support/stand-in-models/vits.ts has Piper medium's layout (about
 * 15 M parameters, 2.7 G multiply-adds per second of audio) with random weights, so the compute is
 * real and the sound is not. Compared with eSpeak NG on the same sentences.
 *
 *   - real-time factor: synthesis time over the audio's duration, one request at a time;
 *   - first audio: from the request to its first sentence's audio (what a listener waits for), for a
 *     three-sentence answer;
 *   - N at once: N requests of the same answer together (the engine runs 2 at a time, the rest wait),
 *     first-audio p50/p90 over them.
 *
 *   npm run bench:tts
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { createEspeakEngine } from "../src/engines/espeak-ng/index.js";
import { createSherpaTtsEngine } from "../src/engines/sherpa-onnx/tts.js";
import type { TtsEngine } from "../src/core/contracts.js";
import { neuralVoiceModels } from "../src/engines/sherpa-onnx/models.js";
import { defaultVoice } from "../src/voices/library.js";
import { installStandInVoice } from "../test/support/stand-in-models/install.js";

const ANSWER =
  "Good morning, and thank you all for coming. Today we will talk about our plans for the year. " +
  "Then we will take your questions.";
const ROUNDS = 5;

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
};

/** Milliseconds to the first chunk and to the end, and the audio's seconds. */
async function timed(engine: TtsEngine): Promise<{ first: number; total: number; audio: number }> {
  const start = performance.now();
  let first = 0;
  let audio = 0;
  for await (const chunk of engine.synthesizeStream
    ? engine.synthesizeStream({ text: ANSWER, language: "en", voice: defaultVoice("female") })
    : [await engine.synthesize({ text: ANSWER, language: "en", voice: defaultVoice("female") })]) {
    first ||= performance.now() - start;
    audio += chunk.samples.length / chunk.sampleRate;
  }
  return { first, total: performance.now() - start, audio };
}

async function bench(name: string, engine: TtsEngine): Promise<void> {
  await timed(engine); // warm
  const runs = [];
  for (let i = 0; i < ROUNDS; i++) runs.push(await timed(engine));
  const rtf = runs.reduce((s, r) => s + r.total, 0) / 1000 / runs.reduce((s, r) => s + r.audio, 0);
  const firsts = runs.map((r) => r.first);
  console.log(
    `| ${name} | 1 | ${rtf.toFixed(3)} | ${percentile(firsts, 50).toFixed(0)} | ${percentile(firsts, 90).toFixed(0)} |`,
  );
  for (const n of [4, 8]) {
    const together = await Promise.all(Array.from({ length: n }, () => timed(engine)));
    const f = together.map((r) => r.first);
    console.log(
      `| ${name} | ${n} at once | | ${percentile(f, 50).toFixed(0)} | ${percentile(f, 90).toFixed(0)} |`,
    );
  }
}

const models = await mkdtemp(path.join(tmpdir(), "relay-bench-tts-"));
try {
  await installStandInVoice(models, "piper-en_US-libritts_r-medium", { size: "real", speakers: 1 });
  console.log("| engine | requests | real-time factor | first audio p50 (ms) | first audio p90 (ms) |");
  console.log("| --- | --- | --- | --- | --- |");
  const neural = await createSherpaTtsEngine({ models: neuralVoiceModels(undefined, models) });
  await bench("sherpa-onnx, real-size stand-in Piper medium (1 thread)", neural);
  await neural.close();
  const espeak = await createEspeakEngine();
  await bench("eSpeak NG", espeak);
  await espeak.close();
} finally {
  await rm(models, { recursive: true, force: true });
}
