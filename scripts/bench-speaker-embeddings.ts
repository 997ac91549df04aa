/**
 * Speaker embedding cost (sherpa-onnx, src/engines/sherpa-onnx/speaker-embedding.ts) on a real-size stand-in
 * of CAM++ (test/support/stand-in-models/speaker-embedding.ts, `size: "real"`: 7.1 M parameters and
 * an estimated 0.47 G multiply-adds per second of audio, random weights), against the embedded MFCC
 * engine, on the 0.5 s blocks the speaker tracker feeds (and on 3 s stretches), from a LibriVox clip.
 *
 *   - time per second of speech: wall time of one voiceprint after another, over the speech;
 *   - CPU per second of speech: the service's and the host process's CPU, over the speech.
 *
 *   npm run bench:speaker-embeddings
 */
import { readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { int16ToFloat32 } from "../src/audio/pcm.js";
import { readWavAsPcm16 } from "../src/audio/wav.js";
import { createMfccSpeakerEngine } from "../src/engines/mfcc-speaker/index.js";
import { createSherpaSpeakerEngine } from "../src/engines/sherpa-onnx/speaker-embedding.js";
import type { SpeakerEngine } from "../src/core/contracts.js";
import { writeSpeakerEmbeddingStandIn } from "../test/support/stand-in-models/speaker-embedding.js";

const SHARED = process.env.SHARED_DIR ?? path.resolve(import.meta.dirname, "../../shared");
const CLIP = path.join(
  SHARED,
  "data/speech/librivox-pocketsphinx/sense_and_sensibility_01_austen_64kb-0870.wav",
);
const RATE = 16_000;

/** CPU seconds of this process and its children (the host process), from /proc. */
function cpuSeconds(): number {
  const own = process.cpuUsage();
  let total = (own.user + own.system) / 1e6;
  for (const pid of readdirSync("/proc").filter((name) => /^\d+$/u.test(name))) {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
      if (Number(fields[1]) === process.pid) total += (Number(fields[11]) + Number(fields[12])) / 100;
    } catch {
      // gone meanwhile
    }
  }
  return total;
}

async function bench(name: string, engine: SpeakerEngine, speech: Float32Array): Promise<void> {
  for (const seconds of [0.5, 3]) {
    const size = seconds * RATE;
    const blocks = Array.from({ length: Math.floor(speech.length / size) }, (_, i) =>
      speech.subarray(i * size, (i + 1) * size),
    );
    for (const block of blocks.slice(0, 3)) await engine.voiceprint(block); // warm
    const rounds = 5;
    const cpuBefore = cpuSeconds();
    const start = performance.now();
    for (let round = 0; round < rounds; round++) for (const block of blocks) await engine.voiceprint(block);
    const wall = (performance.now() - start) / 1000;
    const cpu = cpuSeconds() - cpuBefore;
    const audio = (rounds * blocks.length * size) / RATE;
    console.log(
      `| ${name} | ${seconds} s | ${((1000 * wall) / audio).toFixed(1)} | ${((1000 * cpu) / audio).toFixed(1)} |`,
    );
  }
}

const dir = await mkdtemp(path.join(tmpdir(), "relay-bench-speakers-"));
try {
  const speech = int16ToFloat32(await readWavAsPcm16(CLIP));
  const { model } = writeSpeakerEmbeddingStandIn({ dir, size: "real" });
  console.log("| engine | stretch | ms per second of speech (wall) | CPU ms per second of speech |");
  console.log("| --- | --- | --- | --- |");
  const neural = await createSherpaSpeakerEngine({ model });
  await bench("sherpa-onnx, real-size stand-in CAM++ (1 thread)", neural, speech);
  await neural.close();
  const mfcc = createMfccSpeakerEngine();
  await bench("MFCC (embedded)", mfcc, speech);
  await mfcc.close();
} finally {
  await rm(dir, { recursive: true, force: true });
}
