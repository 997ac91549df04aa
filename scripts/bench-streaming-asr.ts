/**
 * Streaming recognition cost (sherpa-onnx, src/engines/sherpa-onnx/recognizer.ts) on a real-size
 * stand-in of `streaming-zipformer-en` (test/support/stand-in-models/streaming-transducer.ts,
 * `size: "real"`: the 2023-06-26 model's state sizes and about its 64 M encoder weights, random
 * and in fp32 where the real encoder is int8 — so this is an estimate of the real cost, likely a
 * high one), with the stand-in punctuation model.
 *
 *   - CPU per audio second: the host process's CPU time while one stream is fed a LibriVox clip as
 *     fast as it decodes, over the clip's length;
 *   - sessions that keep up: N streams, each fed 160 ms of audio every 160 ms (real time); the lag of
 *     a write is from when its audio was due to when its result came back. N keeps up when the p90
 *     lag stays under 500 ms and the last writes lag no more than the first.
 *
 *   npm run bench:streaming-asr
 */
import { readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { readWavAsPcm16 } from "../src/audio/wav.js";
import { createSherpaRecognizer } from "../src/engines/sherpa-onnx/recognizer.js";
import type { AsrEngine } from "../src/core/contracts.js";
import { recognizerFiles } from "../src/engines/sherpa-onnx/models.js";
import { installStandInRecognizer } from "../test/support/stand-in-models/install.js";

const SHARED = process.env.SHARED_DIR ?? path.resolve(import.meta.dirname, "../../shared");
const CLIP = path.join(
  SHARED,
  "data/speech/librivox-pocketsphinx/sense_and_sensibility_01_austen_64kb-0870.wav",
);
const PIECE = 2_560; // 160 ms
const SECONDS = 20;

/** CPU seconds of this process's children (the host process), from /proc. */
function childrenCpuSeconds(): number {
  const ticks = 100; // USER_HZ on Linux
  let total = 0;
  for (const pid of readdirSync("/proc").filter((name) => /^\d+$/u.test(name))) {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
      if (Number(fields[1]) === process.pid) total += (Number(fields[11]) + Number(fields[12])) / ticks;
    } catch {
      // gone meanwhile
    }
  }
  return total;
}

const percentile = (values: number[], p: number) =>
  [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor((p / 100) * values.length))]!;

async function cpuPerAudioSecond(engine: AsrEngine, speech: Int16Array): Promise<number> {
  const before = childrenCpuSeconds();
  const stream = await engine.createStream({ language: "en" });
  for (let i = 0; i < speech.length; i += PIECE) await stream.write(speech.subarray(i, i + PIECE));
  await stream.finish();
  return (childrenCpuSeconds() - before) / (speech.length / 16_000);
}

/** Lags (ms) of every write of N real-time streams over SECONDS of audio. */
async function realTime(
  engine: AsrEngine,
  speech: Int16Array,
  n: number,
): Promise<{ lags: number[]; first: number[]; last: number[] }> {
  const lags: number[] = [];
  const first: number[] = [];
  const last: number[] = [];
  const start = performance.now();
  await Promise.all(
    Array.from({ length: n }, async (_, s) => {
      await sleep(s * 13); // sessions do not start in the same millisecond
      const stream = await engine.createStream({ language: "en" });
      const pieces = Math.floor((SECONDS * 16_000) / PIECE);
      for (let p = 0; p < pieces; p++) {
        const due = start + s * 13 + (p + 1) * 160;
        const wait = due - performance.now();
        if (wait > 0) await sleep(wait);
        const offset = (p * PIECE) % (speech.length - PIECE);
        await stream.write(speech.subarray(offset, offset + PIECE));
        const lag = performance.now() - due;
        lags.push(lag);
        if (p < 10) first.push(lag);
        if (p >= pieces - 10) last.push(lag);
      }
      await stream.finish();
    }),
  );
  return { lags, first, last };
}

const models = await mkdtemp(path.join(tmpdir(), "relay-bench-streaming-"));
try {
  await installStandInRecognizer(models, { punctuation: true, size: "real" });
  const engine = await createSherpaRecognizer({ ...recognizerFiles(undefined, undefined, models) });
  const speech = await readWavAsPcm16(CLIP);
  await cpuPerAudioSecond(engine, speech); // warm
  const cpu = (await cpuPerAudioSecond(engine, speech)).toFixed(3);
  console.log(`CPU per audio second (1 stream, 1 thread): ${cpu} s\n`);
  console.log(
    "| streams | write lag p50 (ms) | p90 (ms) | first 10 writes p50 | last 10 writes p50 | keeps up |",
  );
  console.log("| --- | --- | --- | --- | --- | --- |");
  for (const n of [1, 8, 16, 24, 32, 40]) {
    const { lags, first, last } = await realTime(engine, speech, n);
    const keeps = percentile(lags, 90) < 500 && percentile(last, 50) <= percentile(first, 50) + 100;
    console.log(
      `| ${n} | ${percentile(lags, 50).toFixed(0)} | ${percentile(lags, 90).toFixed(0)} | ${percentile(first, 50).toFixed(0)} | ${percentile(last, 50).toFixed(0)} | ${keeps ? "yes" : "no"} |`,
    );
    if (!keeps) break;
  }
  await engine.close();
} finally {
  await rm(models, { recursive: true, force: true });
}
