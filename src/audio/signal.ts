/**
 * Signal helpers of the voice analysis (voice-features.ts): the 16 kHz analysis rate and conversion
 * to it, the vowel band of the intensity contour, the 4 kHz copy F0 is read from, and quantiles.
 */

/** The rate every analysis runs at (the service's input rate). */
export const ANALYSIS_RATE = 16_000;
/** The F0 copy is decimated by this factor (16 kHz → 4 kHz). */
export const PITCH_DECIMATION = 4;

/** RBJ band-pass biquad (0 dB peak) at 800 Hz, Q 0.7: roughly the 0.4–1.6 kHz F1/F2 region. */
const VOWEL_BAND = (() => {
  const w0 = (2 * Math.PI * 800) / ANALYSIS_RATE;
  const alpha = Math.sin(w0) / (2 * 0.7);
  const a0 = 1 + alpha;
  return { b0: alpha / a0, b2: -alpha / a0, a1: (-2 * Math.cos(w0)) / a0, a2: (1 - alpha) / a0 };
})();

/**
 * The intensity contour is taken in the vowel band: vowels are loud there while nasals, voiced
 * consonants and low-frequency hum are not, so the dips between syllables deepen. Against the full
 * band it makes natural speech and eSpeak NG count alike (LJSpeech 101 % of transcript syllables
 * instead of 110 %) and halves the scatter of LibriVox clips' rates (±0.4 instead of ±0.8 syl/s).
 */
export function vowelBand(signal: Float32Array): Float32Array {
  const { b0, b2, a1, a2 } = VOWEL_BAND;
  const out = new Float32Array(signal.length);
  let [x1, x2, y1, y2] = [0, 0, 0, 0];
  for (let i = 0; i < signal.length; i++) {
    const x = signal[i]!;
    const y = b0 * x + b2 * x2 - a1 * y1 - a2 * y2;
    [x2, x1, y2, y1] = [x1, x, y1, y];
    out[i] = y;
  }
  return out;
}

// ---------------------------------------------------------------- resampling

/** Low-pass for the F0 copy: 63-tap Hamming-windowed sinc, −6 dB at 1 kHz, ~50 dB down at 2 kHz. */
const PITCH_TAPS = (() => {
  const length = 63;
  const cutoff = 1000 / ANALYSIS_RATE;
  const taps = Array.from({ length }, (_, i) => {
    const n = i - (length - 1) / 2;
    const sinc = n === 0 ? 2 * cutoff : Math.sin(2 * Math.PI * cutoff * n) / (Math.PI * n);
    return sinc * (0.54 - 0.46 * Math.cos((2 * Math.PI * i) / (length - 1)));
  });
  const sum = taps.reduce((a, b) => a + b, 0);
  return Float64Array.from(taps, (tap) => tap / sum);
})();

/** 16 kHz → 4 kHz, band-limited to ~1 kHz: F0 and its first harmonics, nothing YIN could mistake. */
export function pitchCopy(signal: Float32Array): Float32Array {
  const out = new Float32Array(Math.floor(signal.length / PITCH_DECIMATION));
  const half = (PITCH_TAPS.length - 1) / 2;
  for (let o = 0; o < out.length; o++) {
    const center = o * PITCH_DECIMATION;
    let sum = 0;
    for (let t = 0; t < PITCH_TAPS.length; t++) {
      const i = center + t - half;
      if (i >= 0 && i < signal.length) sum += PITCH_TAPS[t]! * signal[i]!;
    }
    out[o] = sum;
  }
  return out;
}

/**
 * Other rates to 16 kHz: a box average over the decimation step against gross aliasing, then linear
 * interpolation. Enough for F0 and intensity; formant spacing can differ from a band-limited
 * resampler's by up to ~1 semitone on some voices (interpolation dulls 4–5 kHz), so callers that
 * compare formants across sources (the voice cloner) resample with src/audio/resampler.ts first.
 */
export function toAnalysisRate(samples: Float32Array, sampleRate: number): Float32Array {
  if (sampleRate === ANALYSIS_RATE) return samples;
  const step = sampleRate / ANALYSIS_RATE;
  const width = Math.max(1, Math.round(step));
  const out = new Float32Array(Math.floor(samples.length / step));
  for (let i = 0; i < out.length; i++) {
    const position = i * step;
    const base = Math.floor(position);
    const fraction = position - base;
    let sum = 0;
    for (let k = 0; k < width; k++) {
      const a = samples[Math.min(samples.length - 1, base + k)]!;
      const b = samples[Math.min(samples.length - 1, base + k + 1)]!;
      sum += a + (b - a) * fraction;
    }
    out[i] = sum / width;
  }
  return out;
}

export function quantile(values: number[], q: number): number {
  return quantileSorted(
    values.sort((a, b) => a - b),
    q,
  );
}

/** Linear-interpolated quantile of ascending `sorted` (0 for an empty list). */
export function quantileSorted(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return 0;
  const position = (sorted.length - 1) * q;
  const low = Math.floor(position);
  const high = Math.min(sorted.length - 1, low + 1);
  return sorted[low]! + (sorted[high]! - sorted[low]!) * (position - low);
}
