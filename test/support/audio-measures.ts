import type { SynthesizedAudio } from "../../src/core/contracts.js";

/** Measurements the TTS tests make on synthesized speech. */

export function rms(samples: Float32Array): number {
  let sum = 0;
  for (const s of samples) sum += s * s;
  return Math.sqrt(sum / Math.max(1, samples.length));
}

/** Median F0 (Hz) over voiced 40 ms frames, by plain autocorrelation in the 60-400 Hz band. */
export function medianPitch({ samples, sampleRate }: SynthesizedAudio): number {
  const frame = Math.round(0.04 * sampleRate);
  const hop = Math.round(0.01 * sampleRate);
  const minLag = Math.floor(sampleRate / 400);
  const maxLag = Math.ceil(sampleRate / 60);
  const pitches: number[] = [];
  for (let start = 0; start + frame + maxLag < samples.length; start += hop) {
    const window = samples.subarray(start, start + frame);
    if (rms(window) < 0.05) continue;
    const correlate = (lag: number): number => {
      let sum = 0;
      for (let i = 0; i < frame; i++) sum += samples[start + i]! * samples[start + i + lag]!;
      return sum;
    };
    const energy = correlate(0);
    let bestLag = 0;
    let best = 0;
    for (let lag = minLag; lag <= maxLag; lag++) {
      const c = correlate(lag);
      if (c > best) [best, bestLag] = [c, lag];
    }
    if (bestLag > 0 && best > 0.4 * energy) pitches.push(sampleRate / bestLag);
  }
  pitches.sort((a, b) => a - b);
  return pitches[Math.floor(pitches.length / 2)] ?? 0;
}

export const seconds = (audio: SynthesizedAudio): number => audio.samples.length / audio.sampleRate;
