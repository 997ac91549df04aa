/** Output speech is sent as standalone frames of about 80 ms (1920 samples at 24 kHz). */
export const OUTPUT_SAMPLE_RATE = 24_000;
export const OUTPUT_FRAME_SAMPLES = 1920;

/** Splits a clip into frames of `frameSamples`; the last frame carries the remainder, unpadded. */
export function frameAudio(samples: Float32Array, frameSamples = OUTPUT_FRAME_SAMPLES): Float32Array[] {
  const frames: Float32Array[] = [];
  for (let start = 0; start < samples.length; start += frameSamples) {
    frames.push(samples.slice(start, Math.min(samples.length, start + frameSamples)));
  }
  return frames;
}
