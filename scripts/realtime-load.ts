/**
 * Real-time load for the benchmarks: real utterances from ../shared/data/speech, streamed in real
 * time by N concurrent sessions (scripts/bench-realtime.ts against one process, scripts/bench-fleet.ts
 * against a fleet behind nginx).
 */
import path from "node:path";
import { readWavAsPcm16 } from "../src/audio/wav.js";
import { createSession, RealtimeSocket } from "../src/cli/recording-socket.js";

export const SHARED = process.env.SHARED_DIR ?? path.resolve(import.meta.dirname, "../../shared");

/** The value after a command-line flag of a benchmark script; undefined without the flag. */
export function flagValue(flag: string): string | undefined {
  const index = process.argv.indexOf(flag);
  return index < 0 ? undefined : process.argv[index + 1];
}

export const CLIPS = [
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

export interface Clip {
  readonly name: string;
  readonly pcm: Int16Array;
  /** Sample index where speech starts (first 20 ms frame above 10 % of the loudest frame). */
  readonly onset: number;
}

/**
 * Where a recording's speech is, in samples: from its first to the end of its last 20 ms frame louder
 * than 10 % of its loudest.
 */
export function speechSpan(pcm: Int16Array): { readonly start: number; readonly end: number } {
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
  return { start: first * frame, end: Math.min(pcm.length, (last + 1) * frame) };
}

/** Loads a clip and trims trailing silence so that `finalize`, not the VAD, ends the segment. */
export async function loadClip(name: string): Promise<Clip> {
  const pcm = await readWavAsPcm16(path.join(SHARED, "data/speech", name));
  const { start, end } = speechSpan(pcm);
  // Keep 100 ms after the last loud frame.
  return { name, pcm: pcm.subarray(0, Math.min(pcm.length, end + 1600)), onset: start };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export function percentile(values: (number | null)[], p: number): number | null {
  const sorted = values.filter((v): v is number => v !== null).sort((a, b) => a - b);
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** N sessions stream every clip back to back in real time; real-time means finals keep up. */
export async function measureConcurrency(
  baseUrl: string,
  apiKey: string,
  clips: Clip[],
  sessions: number,
  /** Further session parameters (a `context`, say). */
  params: Record<string, string> = {},
) {
  const errors: string[] = [];
  const finalLatencies: number[] = [];
  const lost: number[] = [];
  await Promise.all(
    Array.from({ length: sessions }, async (_, index) => {
      const socket = await RealtimeSocket.connect((await createSession(baseUrl, apiKey, params)).ws_url);
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
