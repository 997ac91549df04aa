/**
 * The linear magnitude spectrogram OpenVoice's tone colour models take (its
 * `mel_processing.spectrogram_torch`, myshell-ai/OpenVoice at 74a1d147): the waveform reflect-padded
 * by (n_fft − hop) / 2 on each side, frames of n_fft samples every hop with no further centring, a
 * periodic Hann window of win_length, one-sided FFT, magnitude sqrt(re² + im² + 1e-6). No mel, no
 * log, no normalisation. Frames: ⌊(L + 2·pad − n_fft) / hop⌋ + 1, which is ⌊L / hop⌋ for the
 * model's settings.
 */
import FFT from "fft.js";

export interface SpectrogramSettings {
  /** FFT size (OpenVoice's `filter_length`, 1024): n_fft / 2 + 1 bins. */
  readonly nFft: number;
  readonly hop: number;
  /** Window length (`win_length`); the window is centred in the frame when shorter than nFft. */
  readonly win: number;
}

export interface Spectrogram {
  /** Frame-major: frame t's bins at [t·bins, (t+1)·bins). */
  readonly data: Float32Array;
  readonly frames: number;
  readonly bins: number;
}

/** The index of `i` reflected into [0, length) without repeating the edge sample (torch's "reflect"). */
function reflect(i: number, length: number): number {
  if (length === 1) return 0;
  const period = 2 * (length - 1);
  const m = ((i % period) + period) % period;
  return m < length ? m : period - m;
}

export function linearSpectrogram(samples: Float32Array, settings: SpectrogramSettings): Spectrogram {
  const { nFft, hop, win } = settings;
  const bins = nFft / 2 + 1;
  const pad = Math.floor((nFft - hop) / 2);
  const frames = Math.max(0, Math.floor((samples.length + 2 * pad - nFft) / hop) + 1);
  const data = new Float32Array(frames * bins);
  if (samples.length === 0) return { data, frames: 0, bins };
  // torch.hann_window is periodic: 0.5 − 0.5·cos(2πn/N).
  const window = new Float64Array(nFft);
  const offset = Math.floor((nFft - win) / 2);
  for (let n = 0; n < win; n++) window[offset + n] = 0.5 - 0.5 * Math.cos((2 * Math.PI * n) / win);
  const fft = new FFT(nFft);
  const input = new Array<number>(nFft);
  const output = fft.createComplexArray() as number[];
  for (let t = 0; t < frames; t++) {
    const start = t * hop - pad;
    for (let n = 0; n < nFft; n++) input[n] = samples[reflect(start + n, samples.length)]! * window[n]!;
    fft.realTransform(output, input);
    for (let k = 0; k < bins; k++) {
      const re = output[2 * k]!;
      const im = output[2 * k + 1]!;
      data[t * bins + k] = Math.sqrt(re * re + im * im + 1e-6);
    }
  }
  return { data, frames, bins };
}
