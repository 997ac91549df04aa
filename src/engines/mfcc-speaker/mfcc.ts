/**
 * Mel-frequency cepstral coefficients of speech at 16 kHz: the short-time spectral envelope that
 * carries a voice's vocal-tract shape. 25 ms Hamming frames on a 10 ms hop, pre-emphasis 0.97,
 * 512-point FFT, 40 triangular mel filters over 60–7600 Hz, log energies, DCT-II; c1..c20 are kept
 * (c0 is loudness, which says more about the microphone distance than about the person).
 *
 * Only frames within 30 dB of the stretch's loudest (and above −60 dBFS) count: pauses and breath
 * inside a VAD segment would otherwise make every voice look alike.
 */
import FFT from "fft.js";

export const MFCC_RATE = 16_000;
export const MFCC_COEFFICIENTS = 20;
const FRAME = 400;
const HOP = 160;
const FFT_SIZE = 512;
const MEL_FILTERS = 40;
const LOWEST_HZ = 60;
const HIGHEST_HZ = 7600;
const FRAME_RANGE_DB = 30;
const FRAME_FLOOR_DB = -60;

const HAMMING = Float64Array.from(
  { length: FRAME },
  (_, i) => 0.54 - 0.46 * Math.cos((2 * Math.PI * i) / (FRAME - 1)),
);
const toMel = (hz: number): number => 2595 * Math.log10(1 + hz / 700);
const fromMel = (mel: number): number => 700 * (10 ** (mel / 2595) - 1);

/** Each filter as (first FFT bin, weights): triangles between neighbouring mel-spaced centres. */
const FILTERS = (() => {
  const low = toMel(LOWEST_HZ);
  const high = toMel(HIGHEST_HZ);
  const edges = Array.from(
    { length: MEL_FILTERS + 2 },
    (_, i) => (fromMel(low + ((high - low) * i) / (MEL_FILTERS + 1)) * FFT_SIZE) / MFCC_RATE,
  );
  return Array.from({ length: MEL_FILTERS }, (_, m) => {
    const [left, centre, right] = [edges[m]!, edges[m + 1]!, edges[m + 2]!];
    const first = Math.ceil(left);
    const weights = Float64Array.from({ length: Math.floor(right) - first + 1 }, (_, i) => {
      const bin = first + i;
      return bin <= centre ? (bin - left) / (centre - left) : (right - bin) / (right - centre);
    });
    return { first, weights };
  });
})();

const DCT = Array.from({ length: MFCC_COEFFICIENTS }, (_, k) =>
  Float64Array.from({ length: MEL_FILTERS }, (_, m) =>
    Math.cos((Math.PI * (k + 1) * (m + 0.5)) / MEL_FILTERS),
  ),
);

const fft = new FFT(FFT_SIZE);
const frameInput = new Array<number>(FFT_SIZE).fill(0);
const spectrum = fft.createComplexArray() as number[];
const melEnergies = new Float64Array(MEL_FILTERS);

/** The coefficients of every loud-enough frame of `samples` (16 kHz, [-1, 1]). */
export function mfccFrames(samples: Float32Array): Float64Array[] {
  const count = samples.length >= FRAME ? Math.floor((samples.length - FRAME) / HOP) + 1 : 0;
  const frames: Float64Array[] = [];
  const levels: number[] = [];
  for (let f = 0; f < count; f++) {
    const start = f * HOP;
    let energy = 0;
    for (let i = 0; i < FRAME; i++) {
      const sample = samples[start + i]!;
      energy += sample * sample;
      const previous = start + i > 0 ? samples[start + i - 1]! : 0;
      frameInput[i] = (sample - 0.97 * previous) * HAMMING[i]!;
    }
    fft.realTransform(spectrum, frameInput);
    for (let m = 0; m < MEL_FILTERS; m++) {
      const { first, weights } = FILTERS[m]!;
      let sum = 0;
      for (let i = 0; i < weights.length; i++) {
        const bin = first + i;
        sum += weights[i]! * (spectrum[2 * bin]! ** 2 + spectrum[2 * bin + 1]! ** 2);
      }
      melEnergies[m] = Math.log(sum + 1e-10);
    }
    const coefficients = new Float64Array(MFCC_COEFFICIENTS);
    for (let k = 0; k < MFCC_COEFFICIENTS; k++) {
      const row = DCT[k]!;
      let sum = 0;
      for (let m = 0; m < MEL_FILTERS; m++) sum += row[m]! * melEnergies[m]!;
      coefficients[k] = sum;
    }
    frames.push(coefficients);
    levels.push(10 * Math.log10(energy / FRAME + 1e-12));
  }
  const loudest = Math.max(...levels);
  const floor = Math.max(FRAME_FLOOR_DB, loudest - FRAME_RANGE_DB);
  return frames.filter((_, f) => levels[f]! >= floor);
}
