/** Per-clip audio handling of the dubbed track: silence trimming, time-stretching, fitting, fades. */
import { runFfmpeg } from "./ffmpeg.js";

/** About -50 dBFS: below it a TTS engine's leading/trailing samples are silence. */
const SILENCE_LEVEL = 0.003;

/**
 * Drops leading and trailing silence (keeping `marginSec` of it) so a clip's length is its speech:
 * TTS engines pad utterances, and that padding would otherwise count against the slot.
 */
export function trimSilence(samples: Float32Array, sampleRate: number, marginSec = 0.02): Float32Array {
  let first = 0;
  while (first < samples.length && Math.abs(samples[first]!) < SILENCE_LEVEL) first++;
  if (first === samples.length) return samples.subarray(0, 0);
  let last = samples.length - 1;
  while (last > first && Math.abs(samples[last]!) < SILENCE_LEVEL) last--;
  const margin = Math.round(marginSec * sampleRate);
  return samples.subarray(Math.max(0, first - margin), Math.min(samples.length, last + 1 + margin));
}

/**
 * Cuts a clip to at most `maxSamples` and applies linear fades: a short one at both ends (no clicks
 * at clip boundaries) and `fadeOutSamples` at the end of a trimmed clip. Returns a new array.
 */
export function shapeClip(
  samples: Float32Array,
  maxSamples: number,
  edgeFadeSamples: number,
  fadeOutSamples = 0,
): Float32Array {
  const out = samples.slice(0, Math.max(0, Math.min(samples.length, maxSamples)));
  const fadeIn = Math.min(edgeFadeSamples, out.length);
  for (let i = 0; i < fadeIn; i++) out[i]! *= i / fadeIn;
  const fadeOut = Math.min(Math.max(edgeFadeSamples, fadeOutSamples), out.length);
  for (let i = 0; i < fadeOut; i++) out[out.length - 1 - i]! *= i / fadeOut;
  return out;
}

/**
 * Changes a clip's tempo without changing its pitch (ffmpeg `atempo`, a WSOLA time-stretcher).
 * `tempo` > 1 shortens the clip. ffmpeg before 4.3 accepts 0.5..2, which covers every tempo used here.
 */
export async function changeTempo(
  samples: Float32Array,
  sampleRate: number,
  tempo: number,
  signal?: AbortSignal,
): Promise<Float32Array> {
  if (tempo === 1 || samples.length === 0) return samples;
  if (!(tempo >= 0.5 && tempo <= 2)) throw new Error(`tempo ${tempo} is outside 0.5..2`);
  const raw = ["-f", "f32le", "-ar", String(sampleRate), "-ac", "1"];
  const { stdout } = await runFfmpeg(
    [...raw, "-i", "pipe:0", "-af", `atempo=${tempo.toFixed(4)}`, ...raw, "pipe:1"],
    {
      timeoutMs: 60_000,
      stdin: new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength),
      ...(signal ? { signal } : {}),
    },
  );
  // Copied into an aligned buffer: the captured stdout may start at any byte offset.
  const aligned = new Uint8Array(stdout.length & ~3);
  aligned.set(stdout.subarray(0, aligned.length));
  return new Float32Array(aligned.buffer);
}
