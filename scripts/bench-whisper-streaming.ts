/**
 * whisper.cpp streaming capacity, part of `npm run bench:realtime`: sessions stream real speech in
 * real time into the whisper.cpp engine the way the live pipeline does (96 ms writes, a partial
 * hypothesis asked every 160 ms, `finish()` at the end of each utterance), on whisper.cpp's test
 * models (real tiny/base architecture, random weights: real compute, meaningless text).
 *
 * Measured in process, on the recognizer alone, because it is the bottleneck and because the test
 * models' empty transcripts would give a running service nothing to send back to time. Reported:
 * CPU seconds per audio second of one session, and the most sessions that keep up: utterances
 * finished in time (p90 of end of audio → final hypothesis ≤ 1.5 s) and interims still refreshed
 * (at least 0.5 partial decodes per second of each session's audio; 0.75 is the unloaded rate).
 *
 * The test models emit no tokens, so the decoder's share is missing here: with real speech add
 * about 3.4 ms (tiny) or 7.5 ms (base) per token on this machine, a few tokens per second of audio.
 */
import path from "node:path";
import { readWavAsPcm16 } from "../src/audio/wav.js";
import { createWhisperCppEngine, type WhisperCppEngine } from "../src/engines/whisper-cpp/index.js";

const SAMPLE_RATE = 16_000;
const WRITE_SAMPLES = 1_536;
const PARTIAL_EVERY_WRITES = 2;
const REAL_TIME_P90_MS = 1_500;
const MIN_PARTIALS_PER_AUDIO_SECOND = 0.5;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function p(values: number[], percentile: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((percentile / 100) * sorted.length) - 1)] ?? 0;
}

/** Streams each clip as one utterance, paced in real time; returns end-of-audio → final latencies. */
async function streamClips(engine: WhisperCppEngine, clips: readonly Int16Array[]): Promise<number[]> {
  const latencies: number[] = [];
  for (const clip of clips) {
    const stream = await engine.createStream({ language: "en" });
    const started = performance.now();
    let writes = 0;
    for (let offset = 0; offset < clip.length; offset += WRITE_SAMPLES) {
      await stream.write(clip.subarray(offset, offset + WRITE_SAMPLES));
      if (++writes % PARTIAL_EVERY_WRITES === 0) await stream.partial();
      const due = started + ((offset + WRITE_SAMPLES) / SAMPLE_RATE) * 1000;
      await sleep(Math.max(0, due - performance.now()));
    }
    const end = performance.now();
    await stream.finish();
    latencies.push(performance.now() - end);
  }
  return latencies;
}

function keepsUp(row: { p90Ms: number; partialsPerAudioSecond: number }): boolean {
  return row.p90Ms <= REAL_TIME_P90_MS && row.partialsPerAudioSecond >= MIN_PARTIALS_PER_AUDIO_SECOND;
}

interface CapacityRow {
  readonly model: string;
  readonly cpuSecondsPerAudioSecond: number;
  readonly sessions: { count: number; p50Ms: number; p90Ms: number; partialsPerAudioSecond: number }[];
  readonly maxRealTimeSessions: number;
}

/** Threads per decode × decodes at once: the default on 2 cores, and the other way to split them. */
const LAYOUTS = [
  { threads: 2, maxConcurrent: 1 },
  { threads: 1, maxConcurrent: 2 },
] as const;

async function measureModel(
  shared: string,
  size: string,
  layout: (typeof LAYOUTS)[number],
  clips: readonly Int16Array[],
): Promise<CapacityRow> {
  const engine = await createWhisperCppEngine({
    modelPath: path.resolve(shared, `models/whisper-cpp-test/for-tests-ggml-${size}.bin`),
    ...layout,
  });
  const audioSeconds = clips.reduce((sum, clip) => sum + clip.length / SAMPLE_RATE, 0);
  try {
    await streamClips(engine, clips.slice(0, 1)); // warm-up
    const cpuBefore = process.cpuUsage();
    await streamClips(engine, clips);
    const cpu = process.cpuUsage(cpuBefore);
    const cpuSecondsPerAudioSecond = (cpu.user + cpu.system) / 1e6 / audioSeconds;

    const sessions: CapacityRow["sessions"] = [];
    for (const count of [1, 2, 3, 4, 6, 8, 10, 12, 16]) {
      const partialsBefore = engine.stats().started.partial;
      const latencies = (
        await Promise.all(Array.from({ length: count }, () => streamClips(engine, clips)))
      ).flat();
      const partials = engine.stats().started.partial - partialsBefore;
      const row = {
        count,
        p50Ms: Math.round(p(latencies, 50)),
        p90Ms: Math.round(p(latencies, 90)),
        partialsPerAudioSecond: +(partials / (audioSeconds * count)).toFixed(2),
      };
      sessions.push(row);
      console.error(`whisper ${size} ${JSON.stringify(layout)}, ${count} sessions: ${JSON.stringify(row)}`);
      if (!keepsUp(row)) break;
    }
    const maxRealTimeSessions = Math.max(0, ...sessions.filter(keepsUp).map((s) => s.count));
    return {
      model: `${size} (${engine.binding.kind}, ${layout.threads} thread(s) × ${layout.maxConcurrent} decode(s))`,
      cpuSecondsPerAudioSecond,
      sessions,
      maxRealTimeSessions,
    };
  } finally {
    await engine.close();
  }
}

export async function benchWhisperStreaming(shared: string, clipNames: readonly string[]): Promise<string> {
  const clips = await Promise.all(
    clipNames.map((name) => readWavAsPcm16(path.join(shared, "data/speech", name))),
  );
  const rows: CapacityRow[] = [];
  for (const size of ["tiny", "base"])
    for (const layout of LAYOUTS) rows.push(await measureModel(shared, size, layout, clips));
  const audioSeconds = clips.reduce((sum, clip) => sum + clip.length / SAMPLE_RATE, 0);
  return [
    `whisper.cpp streaming (${clips.length} clips, ${audioSeconds.toFixed(1)} s per session, test models)`,
    "",
    "| model | CPU s per audio s (one session) | concurrent real-time sessions |",
    "| --- | --- | --- |",
    ...rows.map(
      (r) => `| ${r.model} | ${r.cpuSecondsPerAudioSecond.toFixed(3)} | ${r.maxRealTimeSessions} |`,
    ),
    "",
    "| model | sessions | end of audio → final p50 / p90 (ms) | partial decodes per audio s per session |",
    "| --- | --- | --- | --- |",
    ...rows.flatMap((r) =>
      r.sessions.map(
        (s) => `| ${r.model} | ${s.count} | ${s.p50Ms} / ${s.p90Ms} | ${s.partialsPerAudioSecond} |`,
      ),
    ),
  ].join("\n");
}
