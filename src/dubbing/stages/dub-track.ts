/**
 * The "fitting" stage: the dubbed track, a raw float32 mono file at `DUB_SAMPLE_RATE` as long as the
 * input, with each clip time-stretched into its slot and written at its place (silence elsewhere).
 * Separate because it owns the track file while clips are written into it concurrently.
 */
import { open, readFile, rm, type FileHandle } from "node:fs/promises";
import { float32ToBytes } from "../../audio/pcm.js";
import { changeTempo, shapeClip } from "../media/clips.js";
import { mapLimit } from "./concurrency.js";
import { DUB_SAMPLE_RATE, type StoredClip } from "./synthesis.js";
import { fitTimeline, type ClipPlacement } from "./timeline.js";
import type { DubSegment } from "./translation.js";

/** Fade at both ends of every clip (5 ms) so no clip starts or stops with a click. */
const EDGE_FADE_SEC = 0.005;

/** Peak a clip may reach after the gain (headroom for the ducked original underneath). */
const CLIP_PEAK = 0.9;

/**
 * Writes the track to `dubPath`; returns where each segment's clip plays (parallel to `segments`,
 * null where nothing was voiced). `gain` applies to every clip (see `dubGain`).
 */
export async function buildDubTrack(job: {
  segments: readonly DubSegment[];
  clips: readonly (StoredClip | null)[];
  gain: number;
  durationSec: number;
  dubPath: string;
  concurrency: number;
  onProgress: (fraction: number) => void;
  signal?: AbortSignal;
}): Promise<(ClipPlacement | null)[]> {
  const { segments, clips, signal } = job;
  const voiced = segments.flatMap((segment, i) => {
    const clip = clips[i];
    return clip ? [{ index: i, segment, clip }] : [];
  });
  // Slots run to the next segment's start, voiced or not: a clip never covers another segment's speech.
  const placements = fitTimeline(
    segments.map((segment, i) => ({
      startSec: segment.startSec,
      endSec: segment.endSec,
      clipSec: (clips[i]?.samples ?? 0) / DUB_SAMPLE_RATE,
    })),
    job.durationSec,
  );
  const totalDubSamples = Math.ceil(job.durationSec * DUB_SAMPLE_RATE);
  const timeline: (ClipPlacement | null)[] = segments.map(() => null);
  const dubTrack = await open(job.dubPath, "w+");
  try {
    // Extending the file fills it with zeros (sparse where supported): silence wherever no clip is written.
    await dubTrack.truncate(totalDubSamples * 4);
    let fitted = 0;
    await mapLimit(
      voiced,
      job.concurrency,
      async ({ index, clip }) => {
        timeline[index] = await placeClip(
          clip,
          placements[index]!,
          job.gain,
          dubTrack,
          totalDubSamples,
          signal,
        );
        job.onProgress(++fitted / voiced.length);
      },
      signal,
    );
  } finally {
    await dubTrack.close();
  }
  return timeline;
}

/** Time-stretches a clip as planned and writes it at its place in the dubbed track. */
async function placeClip(
  clip: StoredClip,
  placement: ClipPlacement,
  gain: number,
  dubTrack: FileHandle,
  totalDubSamples: number,
  signal: AbortSignal | undefined,
): Promise<ClipPlacement | null> {
  const bytes = await readFile(clip.path);
  const samples = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length >> 2).slice();
  const clipGain = clip.peak > 0 ? Math.min(gain, CLIP_PEAK / clip.peak) : gain;
  for (let i = 0; i < samples.length; i++) samples[i]! *= clipGain;
  const stretched = await changeTempo(samples, DUB_SAMPLE_RATE, placement.tempo, signal);
  const startSample = Math.round(placement.startSec * DUB_SAMPLE_RATE);
  // Floor at the slot's end and round at the next start: two clips can never share a sample.
  const lastAllowed = Math.min(totalDubSamples, Math.floor(placement.slotEndSec * DUB_SAMPLE_RATE));
  const maxSamples = Math.min(Math.round(placement.durationSec * DUB_SAMPLE_RATE), lastAllowed - startSample);
  const shaped = shapeClip(
    stretched,
    maxSamples,
    Math.round(EDGE_FADE_SEC * DUB_SAMPLE_RATE),
    Math.round(placement.fadeOutSec * DUB_SAMPLE_RATE),
  );
  if (shaped.length === 0) return null;
  // The track is raw float32 little-endian (Float32Array's layout on the little-endian hosts Node runs on).
  const out = float32ToBytes(shaped);
  await dubTrack.write(out, 0, out.length, startSample * 4);
  await rm(clip.path, { force: true });
  return { ...placement, durationSec: shaped.length / DUB_SAMPLE_RATE };
}
