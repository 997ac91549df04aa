/**
 * Formant spacing ΔF of one analysis frame, from the peaks of its LPC envelope (see voice-features.ts):
 * the vocal-tract-length cue that separates men from women even when F0 does not.
 */
import { ANALYSIS_RATE } from "./signal.js";

/** LPC order 16 at 16 kHz models ~8 resonances; peaks are read only below 5 kHz (F1..F4 + margin). */
const LPC_ORDER = 16;
/** Samples of the frame `formantSpacing` reads. */
export const LPC_FRAME = 512;
const ENVELOPE_HZ = { from: 200, to: 5000, step: 25 };

const LPC_WINDOW = Float64Array.from(
  { length: LPC_FRAME },
  (_, i) => 0.54 - 0.46 * Math.cos((2 * Math.PI * i) / (LPC_FRAME - 1)),
);
const ENVELOPE_FREQUENCIES = Array.from(
  { length: Math.floor((ENVELOPE_HZ.to - ENVELOPE_HZ.from) / ENVELOPE_HZ.step) + 1 },
  (_, i) => ENVELOPE_HZ.from + i * ENVELOPE_HZ.step,
);
/** cos/sin of k·ω for every envelope frequency ω and lag k, so an envelope costs no trigonometry. */
const ENVELOPE_COS = ENVELOPE_FREQUENCIES.map((hz) =>
  Float64Array.from({ length: LPC_ORDER + 1 }, (_, k) => Math.cos((2 * Math.PI * hz * k) / ANALYSIS_RATE)),
);
const ENVELOPE_SIN = ENVELOPE_FREQUENCIES.map((hz) =>
  Float64Array.from({ length: LPC_ORDER + 1 }, (_, k) => Math.sin((2 * Math.PI * hz * k) / ANALYSIS_RATE)),
);

/**
 * ΔF of one frame: peaks of the LPC envelope (pre-emphasized, Hamming-windowed) taken as F1..F4 and
 * fitted to Fi = (2i−1)·ΔF/2 by least squares. Single frames misnumber formants now and then (F1 and
 * F2 merged in back vowels); the median over many frames absorbs that.
 */
export function formantSpacing(signal: Float32Array, start: number): number | undefined {
  const x = new Float64Array(LPC_FRAME);
  for (let i = 0; i < LPC_FRAME; i++) {
    const previous = start + i > 0 ? signal[start + i - 1]! : 0;
    x[i] = (signal[start + i]! - 0.97 * previous) * LPC_WINDOW[i]!;
  }
  const a = levinson(x, LPC_ORDER);
  if (!a) return undefined;
  const envelope = ENVELOPE_FREQUENCIES.map((_, j) => {
    const cos = ENVELOPE_COS[j]!;
    const sin = ENVELOPE_SIN[j]!;
    let re = 0;
    let im = 0;
    for (let k = 0; k <= LPC_ORDER; k++) {
      re += a[k]! * cos[k]!;
      im -= a[k]! * sin[k]!;
    }
    return -Math.log(re * re + im * im);
  });
  let numerator = 0;
  let denominator = 0;
  let found = 0;
  for (let j = 1; j + 1 < envelope.length && found < 4; j++) {
    const [before, here, after] = [envelope[j - 1]!, envelope[j]!, envelope[j + 1]!];
    if (!(here > before && here >= after)) continue;
    // Parabolic interpolation between grid points.
    const offset = (before - after) / (2 * (before - 2 * here + after));
    const hz = ENVELOPE_FREQUENCIES[j]! + offset * ENVELOPE_HZ.step;
    const order = (2 * found + 1) / 2;
    numerator += hz * order;
    denominator += order * order;
    found += 1;
  }
  return found >= 3 ? numerator / denominator : undefined;
}

/** LPC coefficients a[0..order] (a[0] = 1) by autocorrelation and Levinson–Durbin. */
function levinson(x: Float64Array, order: number): Float64Array | undefined {
  const r = new Float64Array(order + 1);
  for (let k = 0; k <= order; k++) {
    let sum = 0;
    for (let i = k; i < x.length; i++) sum += x[i]! * x[i - k]!;
    r[k] = sum;
  }
  if (!(r[0]! > 1e-10)) return undefined;
  const a = new Float64Array(order + 1);
  const previous = new Float64Array(order + 1);
  a[0] = 1;
  let error = r[0]! * (1 + 1e-9);
  for (let i = 1; i <= order; i++) {
    let acc = r[i]!;
    for (let j = 1; j < i; j++) acc += a[j]! * r[i - j]!;
    const k = -acc / error;
    previous.set(a);
    for (let j = 1; j < i; j++) a[j] = previous[j]! + k * previous[i - j]!;
    a[i] = k;
    error *= 1 - k * k;
    if (!(error > 0)) return undefined;
  }
  return a;
}
