/**
 * The embedded speaker engine: each voiceprint is a full-covariance Gaussian over MFCC frames
 * (mfcc.ts), kept as sufficient statistics so voiceprints pool exactly by adding them. The distance
 * is the generalised likelihood ratio of "one voice" against "two voices" (Gish et al. 1991, the
 * test behind BIC speaker segmentation), in units of 100 nats. On the test speech (4–8 s models
 * against 1–4 s stretches) one person's ratio stays near 5–11 whatever the lengths, while two
 * people's grows with the speech compared (10–16 at 1 s, 14–24 at 3 s), so one threshold serves
 * every length; per-frame normalizations do not (short stretches' covariances are biased).
 *
 * Hand-written because it is the product (speaker separation) and no maintained JavaScript
 * library offers it; it needs no model file and costs ~1 ms of CPU per second of speech.
 */
import type { SpeakerEngine, Voiceprint } from "../../core/contracts.js";
import { MFCC_COEFFICIENTS as D, MFCC_RATE, mfccFrames } from "./mfcc.js";

const FRAMES_PER_SECOND = 100;
/** Added to the covariance diagonal: keeps short stretches' determinants finite. */
const RIDGE = 1e-2;

interface GaussianVoiceprint extends Voiceprint {
  readonly frames: number;
  readonly sum: Float64Array;
  /** Upper triangle of Σ x xᵀ, row-major. */
  readonly products: Float64Array;
}

const TRIANGLE = (D * (D + 1)) / 2;

function fromFrames(frames: readonly Float64Array[]): GaussianVoiceprint {
  const sum = new Float64Array(D);
  const products = new Float64Array(TRIANGLE);
  for (const x of frames) {
    let t = 0;
    for (let i = 0; i < D; i++) {
      sum[i]! += x[i]!;
      for (let j = i; j < D; j++) products[t++]! += x[i]! * x[j]!;
    }
  }
  return { frames: frames.length, sum, products, speechSeconds: frames.length / FRAMES_PER_SECOND };
}

function pooled(a: GaussianVoiceprint, b: GaussianVoiceprint): GaussianVoiceprint {
  const frames = a.frames + b.frames;
  return {
    frames,
    sum: a.sum.map((value, i) => value + b.sum[i]!),
    products: a.products.map((value, i) => value + b.products[i]!),
    speechSeconds: frames / FRAMES_PER_SECOND,
  };
}

/** log |Σ| of the voiceprint's maximum-likelihood covariance, by Cholesky factorisation. */
function logDeterminant(print: GaussianVoiceprint): number {
  const n = Math.max(1, print.frames);
  const c = new Float64Array(D * D);
  let t = 0;
  for (let i = 0; i < D; i++) {
    for (let j = i; j < D; j++) {
      const value = print.products[t++]! / n - (print.sum[i]! / n) * (print.sum[j]! / n);
      c[i * D + j] = value;
      c[j * D + i] = value;
    }
    c[i * D + i]! += RIDGE;
  }
  let logDet = 0;
  for (let k = 0; k < D; k++) {
    let pivot = c[k * D + k]!;
    for (let m = 0; m < k; m++) pivot -= c[k * D + m]! ** 2;
    // The ridge keeps the matrix positive definite; rounding alone could not push a pivot this low.
    const root = Math.sqrt(Math.max(pivot, RIDGE));
    c[k * D + k] = root;
    logDet += 2 * Math.log(root);
    for (let i = k + 1; i < D; i++) {
      let value = c[i * D + k]!;
      for (let m = 0; m < k; m++) value -= c[i * D + m]! * c[k * D + m]!;
      c[i * D + k] = value / root;
    }
  }
  return logDet;
}

function asGaussian(print: Voiceprint): GaussianVoiceprint {
  if (!("products" in print)) throw new Error("the voiceprint was made by another speaker engine");
  return print as GaussianVoiceprint;
}

export function createMfccSpeakerEngine(): SpeakerEngine {
  return {
    info: { id: "mfcc-gaussian", version: "1" },
    capabilities: { sampleRate: MFCC_RATE, sameSpeakerBelow: 11, newSpeakerAbove: 14 },
    voiceprint: async (samples) => fromFrames(mfccFrames(samples)),
    merge: (a, b) => pooled(asGaussian(a), asGaussian(b)),
    distance(a, b) {
      const [x, y] = [asGaussian(a), asGaussian(b)];
      const shorter = Math.min(x.frames, y.frames);
      if (shorter === 0) return Infinity;
      const both = pooled(x, y);
      const ratio =
        both.frames * logDeterminant(both) - x.frames * logDeterminant(x) - y.frames * logDeterminant(y);
      return ratio / 2 / 100;
    },
    close: async () => undefined,
  };
}
