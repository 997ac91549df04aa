import { describe, expect, it } from "vitest";
import { resample } from "../../src/audio/resampler.js";

function tone(frequency: number, rate: number, seconds: number): Float32Array {
  return Float32Array.from(
    { length: Math.round(rate * seconds) },
    (_, i) => 0.5 * Math.sin((2 * Math.PI * frequency * i) / rate),
  );
}

/** Amplitude of `frequency` in `samples` (single-bin DFT). */
function amplitudeAt(samples: Float32Array, frequency: number, rate: number): number {
  let re = 0;
  let im = 0;
  for (let i = 0; i < samples.length; i++) {
    re += samples[i]! * Math.cos((2 * Math.PI * frequency * i) / rate);
    im -= samples[i]! * Math.sin((2 * Math.PI * frequency * i) / rate);
  }
  return (2 * Math.hypot(re, im)) / samples.length;
}

describe("resample", () => {
  it("converts 22.05 kHz to 24 kHz with the right length and keeps an in-band tone", async () => {
    const input = tone(1000, 22_050, 1);
    const output = await resample(input, 22_050, 24_000);
    expect(Math.abs(output.length - 24_000)).toBeLessThan(50);
    expect(amplitudeAt(output.subarray(1000, 23_000), 1000, 24_000)).toBeCloseTo(0.5, 1);
  });

  it("band-limits: a tone above the new Nyquist frequency is removed, not aliased", async () => {
    // 10 kHz is representable at 24 kHz but not at 16 kHz (Nyquist 8 kHz); linear interpolation would alias it to 6 kHz.
    const output = await resample(tone(10_000, 24_000, 1), 24_000, 16_000);
    const body = output.subarray(500, 15_500);
    expect(amplitudeAt(body, 6000, 16_000)).toBeLessThan(0.01);
    const rms = Math.sqrt(body.reduce((sum, s) => sum + s * s, 0) / body.length);
    expect(rms).toBeLessThan(0.02);
  });

  it("independent calls do not share filter state", async () => {
    const input = tone(440, 16_000, 0.5);
    const first = await resample(input, 16_000, 24_000);
    await resample(tone(3000, 16_000, 0.5), 16_000, 24_000);
    const again = await resample(input, 16_000, 24_000);
    expect(Array.from(again)).toEqual(Array.from(first));
  });

  it("returns the input for equal rates and handles empty input", async () => {
    const input = tone(440, 16_000, 0.1);
    expect(await resample(input, 16_000, 16_000)).toBe(input);
    expect((await resample(new Float32Array(0), 16_000, 24_000)).length).toBe(0);
  });
});
