import { describe, expect, it } from "vitest";
import { analyzeVoice, measureVoice, summarizeVoice } from "../../src/voices/voice-features.js";
import { SpeakerProfiler } from "../../src/speakers/profiler.js";

const RATE = 16_000;

/** A glottal-like harmonic tone: harmonics 1..12 at 1/k amplitude, F0 given per sample. */
function harmonicTone(f0: (t: number) => number, seconds: number, rate = RATE, level = 0.3): Float32Array {
  const out = new Float32Array(Math.round(seconds * rate));
  let phase = 0;
  for (let i = 0; i < out.length; i++) {
    phase += (2 * Math.PI * f0(i / rate)) / rate;
    let sum = 0;
    for (let k = 1; k <= 12; k++) sum += Math.sin(k * phase) / k;
    out[i] = level * sum;
  }
  return out;
}

/** A pulse train at `f0` through two-pole resonators at `formants` (Hz): a steady synthetic vowel. */
function vowel(f0: number, formants: readonly number[], seconds: number): Float32Array {
  let signal = new Float32Array(Math.round(seconds * RATE));
  const period = RATE / f0;
  for (let t = 0; t < signal.length; t += period) signal[Math.floor(t)] = 1;
  for (const formant of formants) {
    const bandwidth = 80 + formant * 0.03;
    const r = Math.exp((-Math.PI * bandwidth) / RATE);
    const [a1, a2] = [2 * r * Math.cos((2 * Math.PI * formant) / RATE), -r * r];
    const out = new Float32Array(signal.length);
    for (let i = 0; i < signal.length; i++) {
      out[i] = signal[i]! + a1 * (out[i - 1] ?? 0) + a2 * (out[i - 2] ?? 0);
    }
    signal = out;
  }
  let peak = 0;
  for (const s of signal) peak = Math.max(peak, Math.abs(s));
  return signal.map((s) => (0.5 * s) / peak);
}

/** `count` syllable-like bursts (Hann-shaped 180 ms tones) with 70 ms near-silent gaps between them. */
function bursts(count: number, f0 = 140): Float32Array {
  const burst = 0.18 * RATE;
  const gap = 0.07 * RATE;
  const tone = harmonicTone(() => f0, (count * (burst + gap)) / RATE);
  for (let i = 0; i < tone.length; i++) {
    const position = i % (burst + gap);
    const envelope = position < burst ? Math.sin((Math.PI * position) / burst) ** 2 : 0;
    tone[i]! *= 0.03 + 0.97 * envelope;
  }
  return tone;
}

function noise(seconds: number, level: number): Float32Array {
  let seed = 12345;
  return Float32Array.from({ length: Math.round(seconds * RATE) }, () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return level * ((seed / 2 ** 31) * 2 - 1);
  });
}

const semitones = (a: number, b: number) => Math.abs(12 * Math.log2(a / b));

describe("measureVoice: F0", () => {
  it.each([70, 100, 150, 220, 330])("finds the median F0 of a %i Hz harmonic tone within 3 %", (f0) => {
    const features = measureVoice(
      harmonicTone(() => f0, 1.5),
      RATE,
    )!;
    expect(features).toBeDefined();
    expect(Math.abs(features.medianF0Hz - f0) / f0).toBeLessThan(0.03);
    expect(features.f0SpreadSemitones).toBeLessThan(0.3);
    expect(features.voicedSeconds).toBeGreaterThan(1.2);
  });

  it("measures other sample rates on the same scale", () => {
    for (const rate of [8_000, 22_050, 48_000]) {
      const features = measureVoice(
        harmonicTone(() => 180, 1.5, rate),
        rate,
      )!;
      expect(Math.abs(features.medianF0Hz - 180) / 180, `${rate} Hz`).toBeLessThan(0.03);
    }
  });

  it("is independent of level (also for quiet input)", () => {
    for (const level of [0.5, 0.003]) {
      const features = measureVoice(
        harmonicTone(() => 120, 1, RATE, level),
        RATE,
      )!;
      expect(Math.abs(features.medianF0Hz - 120) / 120, `level ${level}`).toBeLessThan(0.03);
    }
  });

  it("reports the spread of a gliding F0 in semitones", () => {
    // One octave up, uniformly in semitones over 2 s: quartiles 6 semitones apart → 6 / 1.349.
    const glide = measureVoice(
      harmonicTone((t) => 110 * 2 ** (t / 2), 2),
      RATE,
    )!;
    expect(glide.f0SpreadSemitones).toBeGreaterThan(3.9);
    expect(glide.f0SpreadSemitones).toBeLessThan(5);
    expect(semitones(glide.medianF0Hz, 110 * Math.SQRT2)).toBeLessThan(0.5);
  });

  it("gives no profile for silence, noise or too little voiced sound", () => {
    expect(measureVoice(new Float32Array(RATE), RATE)).toBeUndefined();
    expect(measureVoice(noise(1, 0.2), RATE)).toBeUndefined();
    expect(
      measureVoice(
        harmonicTone(() => 150, 0.2),
        RATE,
      ),
    ).toBeUndefined();
    expect(measureVoice(new Float32Array(100), RATE)).toBeUndefined();
  });
});

describe("measureVoice: formant spacing", () => {
  it("recovers the spacing of a uniform-tube vowel and scales with the formants", () => {
    // A 17.5 cm tube has resonances at 500, 1500, 2500, 3500 Hz: ΔF = 1000 Hz.
    const male = measureVoice(vowel(110, [500, 1500, 2500, 3500], 1), RATE)!;
    const female = measureVoice(vowel(210, [600, 1800, 3000, 4200], 1), RATE)!;
    expect(male.formantSpacingHz).toBeGreaterThan(930);
    expect(male.formantSpacingHz).toBeLessThan(1070);
    expect(female.formantSpacingHz).toBeGreaterThan(1110);
    expect(female.formantSpacingHz).toBeLessThan(1290);
  });
});

describe("measureVoice: syllable nuclei", () => {
  it.each([4, 9, 15])("counts %i syllable-like bursts", (count) => {
    const analysis = analyzeVoice(bursts(count), RATE);
    expect(Math.abs(analysis.syllables - count)).toBeLessThanOrEqual(1);
    // 0.25 s per burst, the 70 ms gaps being too short to count as pauses.
    const features = summarizeVoice([analysis])!;
    expect(features.syllablesPerSecond).toBeGreaterThan(3.6);
    expect(features.syllablesPerSecond).toBeLessThan(4.4);
  });

  it("does not count unvoiced bursts", () => {
    const signal = bursts(6);
    const hiss = noise(signal.length / RATE, 0.3);
    // Six voiced bursts, then six equally loud noise bursts with the same envelope.
    const both = new Float32Array(signal.length * 2);
    both.set(signal);
    for (let i = 0; i < signal.length; i++) both[signal.length + i] = (hiss[i]! * signal[i]!) / 0.3;
    expect(Math.abs(analyzeVoice(both, RATE).syllables - 6)).toBeLessThanOrEqual(1);
  });

  it("excludes pauses of 0.3 s and more from the speaking time", () => {
    const speech = bursts(5);
    const withPause = new Float32Array(speech.length * 2 + RATE);
    withPause.set(speech);
    withPause.set(speech, speech.length + RATE);
    const analysis = analyzeVoice(withPause, RATE);
    expect(analysis.soundingSeconds).toBeGreaterThan(2.2);
    expect(analysis.soundingSeconds).toBeLessThan(2.7);
  });
});

describe("summarizeVoice", () => {
  it("pools clips: two halves give the figures of the whole", () => {
    const signal = harmonicTone((t) => 100 * 2 ** (t / 3), 3);
    const whole = measureVoice(signal, RATE)!;
    const pooled = summarizeVoice([
      analyzeVoice(signal.subarray(0, signal.length / 2), RATE),
      analyzeVoice(signal.subarray(signal.length / 2), RATE),
    ])!;
    expect(semitones(pooled.medianF0Hz, whole.medianF0Hz)).toBeLessThan(0.2);
    expect(Math.abs(pooled.f0SpreadSemitones - whole.f0SpreadSemitones)).toBeLessThan(0.2);
    expect(Math.abs(pooled.voicedSeconds - whole.voicedSeconds)).toBeLessThan(0.1);
    expect(summarizeVoice([])).toBeUndefined();
  });
});

describe("SpeakerProfiler (synthetic)", () => {
  const pcm = (samples: Float32Array) => Int16Array.from(samples, (s) => Math.round(s * 32767));

  it("waits for 0.5 s of voiced sound, then profiles, then locks at 4 s and stops changing", () => {
    const profiler = new SpeakerProfiler();
    profiler.observe(pcm(harmonicTone(() => 150, 0.3)));
    expect(profiler.profile).toBeUndefined();
    profiler.observe(pcm(new Float32Array(0.4 * RATE)));
    expect(profiler.profile).toBeUndefined();
    profiler.observe(pcm(harmonicTone(() => 150, 0.4)));
    const first = profiler.profile!;
    expect(first.voicedSeconds).toBeGreaterThanOrEqual(0.5);
    expect(Math.abs(first.medianF0Hz - 150)).toBeLessThan(4.5);
    expect(profiler.locked).toBe(false);

    // Streamed in 20 ms pieces, as a live session delivers audio.
    const more = pcm(harmonicTone(() => 200, 5));
    for (let i = 0; i < more.length && !profiler.locked; i += 320)
      profiler.observe(more.subarray(i, i + 320));
    expect(profiler.locked).toBe(true);
    const locked = profiler.profile!;
    expect(locked.voicedSeconds).toBeGreaterThanOrEqual(4);
    expect(locked.medianF0Hz).toBeGreaterThan(180);
    profiler.observe(pcm(harmonicTone(() => 90, 3)));
    expect(profiler.profile).toBe(locked);
  });
});
