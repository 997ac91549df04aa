import { describe, expect, it } from "vitest";
import { AutomaticGain, MAX_GAIN_DB, TARGET_LEVEL_DBFS } from "../../src/audio/level.js";

const RATE = 16_000;
/** 10 ms, the stage's control block. */
const BLOCK = 160;

/** Deterministic uniform numbers in [0, 1) (mulberry32), so every run hears the same noise. */
function uniform(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** White Gaussian noise with the given RMS level. */
function noise(seconds: number, rmsDbfs: number, seed = 1): Float64Array {
  const next = uniform(seed);
  const rms = 32_768 * 10 ** (rmsDbfs / 20);
  return Float64Array.from(
    { length: seconds * RATE },
    () => rms * Math.sqrt(-2 * Math.log(1 - next())) * Math.cos(2 * Math.PI * next()),
  );
}

/**
 * Speech-like sound peaking at `peakDbfs`: syllables (180 ms raised-cosine bursts of a 140 Hz
 * harmonic complex) 70 ms apart, with a 400 ms pause after every fourth.
 */
function speech(seconds: number, peakDbfs: number): Float64Array {
  const out = new Float64Array(seconds * RATE);
  const syllable = 0.18 * RATE;
  let start = 0;
  for (let n = 0; start + syllable <= out.length; n++) {
    for (let i = 0; i < syllable; i++) {
      const t = (start + i) / RATE;
      let voice = 0;
      for (let k = 1; k <= 12; k++) voice += Math.sin(2 * Math.PI * 140 * k * t) / k;
      out[start + i] = voice * Math.sin((Math.PI * i) / syllable) ** 2;
    }
    start += syllable + (n % 4 === 3 ? 0.4 : 0.07) * RATE;
  }
  const peak = out.reduce((max, s) => Math.max(max, Math.abs(s)), 0);
  const scale = (32_767 * 10 ** (peakDbfs / 20)) / peak;
  return out.map((s) => s * scale);
}

/** Sums signals (the longest sets the length) as PCM16, clamped: beyond full scale it clips. */
function pcm(...signals: Float64Array[]): Int16Array {
  const length = Math.max(...signals.map((s) => s.length));
  return Int16Array.from({ length }, (_, i) => {
    const sum = signals.reduce((total, s) => total + (s[i] ?? 0), 0);
    return Math.max(-32_768, Math.min(32_767, Math.round(sum)));
  });
}

/** `signal` starting `seconds` later. */
function delayed(signal: Float64Array, seconds: number): Float64Array {
  const out = new Float64Array(Math.round(seconds * RATE) + signal.length);
  out.set(signal, out.length - signal.length);
  return out;
}

function concat(...parts: Int16Array[]): Int16Array {
  const out = new Int16Array(parts.reduce((sum, p) => sum + p.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

const level = (samples: Int16Array): number =>
  10 * Math.log10(samples.reduce((sum, s) => sum + s * s, 0) / samples.length / 32_768 ** 2);

/** The gain (dB) of each 10 ms block: output level over input level (undefined where the input is silent). */
function blockGains(input: Int16Array, output: Int16Array): (number | undefined)[] {
  const gains: (number | undefined)[] = [];
  for (let start = 0; start + BLOCK <= input.length; start += BLOCK) {
    const x = input.subarray(start, start + BLOCK);
    gains.push(x.some((s) => s !== 0) ? level(output.subarray(start, start + BLOCK)) - level(x) : undefined);
  }
  return gains;
}

/** Levels (dBFS) of the 10 ms blocks, loudest first. */
function blockLevels(samples: Int16Array): number[] {
  const levels: number[] = [];
  for (let start = 0; start + BLOCK <= samples.length; start += BLOCK)
    levels.push(level(samples.subarray(start, start + BLOCK)));
  return levels.sort((a, b) => b - a);
}

/** Every sample scaled by a factor of at least 1 and never past the limiter's -1 dBFS unless already there: no clipping, no wrap-around. */
function expectUnclipped(input: Int16Array, output: Int16Array): void {
  const ceiling = Math.ceil(32_767 * 10 ** (-1 / 20));
  for (let i = 0; i < input.length; i++) {
    const x = input[i]!;
    const y = output[i]!;
    if (
      Math.sign(y) !== Math.sign(x) ||
      Math.abs(y) < Math.abs(x) ||
      Math.abs(y) > Math.max(Math.abs(x), ceiling)
    )
      expect.fail(`sample ${i}: ${x} became ${y}`);
  }
}

/** Index of the first sample where the two differ, -1 when they are equal. */
const firstDifference = (a: Int16Array, b: Int16Array): number =>
  a.length === b.length ? a.findIndex((s, i) => s !== b[i]) : Math.min(a.length, b.length);
const seconds = (s: number): number => Math.round(s * RATE);
const zeros = (s: number): Int16Array => new Int16Array(seconds(s));
/** The level the loudest tenth of the 10 ms blocks reach: the level of the syllables. */
const speechLevel = (samples: Int16Array): number => {
  const levels = blockLevels(samples);
  return levels[Math.floor(levels.length / 10)]!;
};
const gainAt = (gains: (number | undefined)[], s: number): number => gains[Math.round((s * RATE) / BLOCK)]!;

describe("AutomaticGain", () => {
  it("brings quiet speech (peaks at -50 dBFS) up to the target level within a fraction of a second", () => {
    const input = pcm(speech(4, -50));
    const output = new AutomaticGain().process(input);
    // The first syllable starts at 0 ms and peaks at 90 ms.
    expect(gainAt(blockGains(input, output), 0.25)).toBeGreaterThan(30);
    expect(speechLevel(input.subarray(seconds(1)))).toBeLessThan(TARGET_LEVEL_DBFS - 35);
    expect(Math.abs(speechLevel(output.subarray(seconds(1))) - TARGET_LEVEL_DBFS)).toBeLessThan(2);
  });

  it(`never gains more than the +${MAX_GAIN_DB} dB ceiling, however quiet the speech`, () => {
    const input = pcm(speech(4, -65));
    const gains = blockGains(input, new AutomaticGain().process(input)).filter((g) => g !== undefined);
    expect(Math.max(...gains)).toBeLessThanOrEqual(MAX_GAIN_DB + 0.01);
    expect(gains.at(-1)).toBeGreaterThan(MAX_GAIN_DB - 0.5);
  });

  it("passes steady noise exactly as it is, at any level", () => {
    for (const rmsDbfs of [-80, -60, -40]) {
      const input = concat(zeros(0.5), pcm(noise(10, rmsDbfs)));
      expect(firstDifference(new AutomaticGain().process(input), input)).toBe(-1);
    }
  });

  it("never raises the gain on the noise floor: after a syllable it holds the gain it had", () => {
    // One quiet syllable at 1 s over -85 dBFS noise, then the noise alone for 5 s.
    const input = pcm(noise(6.2, -85), delayed(speech(0.2, -50), 1));
    const gains = blockGains(input, new AutomaticGain().process(input)) as number[];
    const afterSyllable = gainAt(gains, 1.2);
    // Still well short of where the speech was taking it (about +36 dB, see above)...
    expect(afterSyllable).toBeGreaterThan(20);
    expect(afterSyllable).toBeLessThan(32);
    // ...and the noise does not take it any further.
    expect(Math.max(...gains.slice(120))).toBeLessThan(afterSyllable + 0.05);
  });

  it("keeps digital silence zero, and the gain does not move across it", () => {
    const syllable = pcm(speech(0.2, -50));
    const probe = pcm(noise(0.5, -85));
    const output = new AutomaticGain().process(concat(syllable, zeros(3), probe));
    expect(output.subarray(syllable.length, syllable.length + seconds(3)).every((s) => s === 0)).toBe(true);
    // The probe right after the syllable, and after 3 s of silence: the same gain.
    const direct = new AutomaticGain().process(concat(syllable, probe)).subarray(syllable.length);
    const afterSilence = output.subarray(syllable.length + seconds(3));
    const gainOf = (out: Int16Array) => level(out.subarray(0, BLOCK)) - level(probe.subarray(0, BLOCK));
    expect(gainOf(direct)).toBeGreaterThan(20);
    expect(Math.abs(gainOf(afterSilence) - gainOf(direct))).toBeLessThan(0.05);
    expect(new AutomaticGain().process(zeros(2)).every((s) => s === 0)).toBe(true);
  });

  it("never clips, and passes loud speech (0 dBFS peaks, or clipped already) unchanged after its first syllable", () => {
    for (const peakDbfs of [0, 2]) {
      const input = pcm(speech(4, peakDbfs));
      const output = new AutomaticGain().process(input);
      expectUnclipped(input, output);
      const changedAt = output.findLastIndex((s, i) => s !== input[i]);
      // Only the rise of the first syllable (60 ms measured), before its level is known, is touched.
      expect(changedAt).toBeLessThan(seconds(0.1));
      expect(Math.abs(level(output) - level(input))).toBeLessThan(0.05);
    }
  });

  it("a loud voice after a quiet one: the limiter holds the boosted gain back, then the gain returns to 0 dB", () => {
    const input = concat(pcm(speech(3, -50)), pcm(speech(3, 0)));
    const output = new AutomaticGain().process(input);
    expectUnclipped(input, output);
    const changedAt = output.findLastIndex((s, i) => s !== input[i]);
    // Within 100 ms of the loud voice's onset (60 ms measured).
    expect(changedAt).toBeLessThan(seconds(3.1));
  });

  it("gives the same output for any chunking", () => {
    const input = concat(
      pcm(speech(2, -50), noise(2, -85)),
      zeros(0.5),
      pcm(speech(1, 0)),
      pcm(noise(1, -60)),
    );
    const whole = new AutomaticGain().process(input);
    const next = uniform(7);
    for (const size of [1, 7, 160, 333, 512, 4096, 0]) {
      const gain = new AutomaticGain();
      const parts: Int16Array[] = [];
      for (let offset = 0; offset < input.length;) {
        // size 0: random chunk sizes of up to 1000 samples
        const take = size || 1 + Math.floor(next() * 1000);
        parts.push(gain.process(input.subarray(offset, offset + take)));
        offset += take;
      }
      expect(firstDifference(concat(...parts), whole), `chunks of ${size || "random size"}`).toBe(-1);
    }
  });

  it("moves the gain smoothly: never more than 0.06 dB from one sample to the next (no clicks)", () => {
    // Rising from 0 dB, then falling 6 dB when the voice gets louder; peaks stay below the limiter.
    const input = concat(pcm(speech(2, -30)), pcm(speech(2, -24)));
    const output = new AutomaticGain().process(input);
    let previous: { index: number; db: number; error: number } | undefined;
    let low = Infinity;
    let high = -Infinity;
    for (let i = 0; i < input.length; i++) {
      const x = Math.abs(input[i]!);
      if (x < 300) continue;
      const db = 20 * Math.log10(Math.abs(output[i]!) / x);
      // Rounding the output moves it by up to half a step.
      const error = 20 * Math.log10(1 + 0.5 / Math.abs(output[i]!));
      low = Math.min(low, db);
      high = Math.max(high, db);
      if (previous && i - previous.index <= 16) {
        const allowed = 0.06 * (i - previous.index) + error + previous.error;
        if (Math.abs(db - previous.db) > allowed)
          expect.fail(`the gain jumps ${db - previous.db} dB at sample ${i}`);
      }
      previous = { index: i, db, error };
    }
    expect(high - low).toBeGreaterThan(10);
  });
});
