/**
 * Measured voice features of a speaker (or of a synthetic voice): median F0, F0 spread, formant
 * spacing and articulation rate. They drive `voice_type=clone` / `voiceId=auto` (voice-clone.ts).
 *
 * Analysis runs at 16 kHz (the service's input rate) on a 10 ms grid of 40 ms frames, and only on
 * sounding frames (pauses cost nothing). Measured cost: ~4.5 ms of CPU per second of speech.
 *   - F0: pitchfinder's YIN every other frame (20 ms hop) on a copy low-passed to 1 kHz and
 *     decimated to 4 kHz. YIN's cost is quadratic in the frame length, so this is 1/32 of full-rate
 *     YIN on every frame, with the same medians (±1 %) on the test speech. YIN rather than McLeod:
 *     McLeod's NSDF costs ~3× more and hard-codes an 80 Hz floor, too high for low male voices.
 *     pitchfinder's YIN integrates over half the largest power of two below the frame (160 → 64
 *     samples), so lags reach 63 Hz; frames are level-normalized first (see pitchAt).
 *   - formant spacing ΔF from LPC envelope peaks F1..F4 (Fi ≈ (2i−1)·ΔF/2, a uniform tube): the
 *     vocal-tract-length cue that separates men from women even when F0 does not (JFK, shouting at
 *     247 Hz, has ΔF ≈ 980 Hz; LJSpeech's reader, at 222 Hz, ≈ 1195 Hz).
 *   - syllable nuclei after de Jong & Wempe (2009, "Praat script to detect syllable nuclei"): peaks
 *     of the intensity contour (in the vowel band, see vowelBand) above a quantile of the sounding
 *     intensity, with a dip of at least 2 dB to their neighbors, and voiced. Articulation rate =
 *     nuclei per second of sounding time (pauses of 0.3 s or more excluded).
 */
import { YIN } from "pitchfinder";
import { formantSpacing, LPC_FRAME } from "../audio/formant-spacing.js";
import {
  ANALYSIS_RATE as RATE,
  PITCH_DECIMATION,
  pitchCopy,
  quantile,
  quantileSorted,
  toAnalysisRate,
  vowelBand,
} from "../audio/signal.js";

type PitchDetector = ReturnType<typeof YIN>;

export interface VoiceFeatures {
  /** Median fundamental frequency over voiced frames, Hz. */
  readonly medianF0Hz: number;
  /** F0 variability over voiced frames: standard deviation in semitones. */
  readonly f0SpreadSemitones: number;
  /** Syllable nuclei per second of sounding (non-pause) speech: the articulation rate. */
  readonly syllablesPerSecond: number;
  /** Seconds of voiced audio the figures rest on. */
  readonly voicedSeconds: number;
  /**
   * Median formant spacing ΔF over voiced frames, Hz (≈ speed of sound / twice the vocal-tract
   * length: about 1000 for men, 1150–1200 for women). Absent when no frame gave three formants.
   */
  readonly formantSpacingHz?: number;
}

/** Raw per-clip measurements, so several clips (utterances) can be pooled. */
export interface VoiceAnalysis {
  f0Hz: number[];
  syllables: number;
  soundingSeconds: number;
  voicedSeconds: number;
  /** Per-frame formant spacing estimates, Hz. */
  formantSpacingHz: number[];
}

/** 40 ms frames on a 10 ms hop: the intensity grid. */
const FRAME = 640;
const HOP = 160;
const HOP_SECONDS = HOP / RATE;
/** F0 is estimated on every F0_STEP-th frame, on a copy decimated by PITCH_DECIMATION. */
const PITCH_RATE = RATE / PITCH_DECIMATION;
const F0_STEP = 2;
const MIN_F0 = 60;
const MAX_F0 = 400;
/** YIN's aperiodicity threshold for F0 statistics: only clearly periodic frames count. */
const YIN_THRESHOLD = 0.2;
/** Lax YIN threshold for the voicing test of syllable nuclei (see detectVoicing). */
const VOICING_THRESHOLD = 0.5;
/** Sounding = within 25 dB of the clip's loud level (its 99th percentile), as in de Jong & Wempe. */
const SILENCE_BELOW_LOUD_DB = 25;
/** …and never quieter than −60 dBFS, so digital silence and hiss never count as speech. */
const ABSOLUTE_FLOOR_DB = -60;
/**
 * Nuclei must be louder than this quantile of the sounding frames. De Jong & Wempe use the median,
 * which finds 87 % of LJSpeech's and 77 % of LibriSpeech's transcript syllables but 108 % of eSpeak
 * NG's; the 0.3 quantile finds 101 %, 103 % and 108 %: what a speaker-vs-TTS rate ratio needs.
 */
const NUCLEUS_QUANTILE = 0.3;
/** A nucleus must stand out from the dips on both sides by this much. */
const MIN_DIP_DB = 2;
/** Silences at least this long are pauses and do not count as speaking time. */
const MIN_PAUSE_SECONDS = 0.3;
/** Fewer voiced seconds than this give no usable profile. */
const MIN_VOICED_SECONDS = 0.3;

/** Intensity = Hann-weighted mean square of each frame (weights sum to 1): a smooth contour. */
const INTENSITY_WINDOW = (() => {
  const hann = Float64Array.from(
    { length: FRAME },
    (_, i) => 0.5 - 0.5 * Math.cos((2 * Math.PI * (i + 0.5)) / FRAME),
  );
  const sum = hann.reduce((a, b) => a + b, 0);
  return hann.map((w) => w / sum);
})();

const detectPitch = YIN({ sampleRate: PITCH_RATE, threshold: YIN_THRESHOLD });
/**
 * Voicing test for syllable nuclei only: YIN with a lax threshold. Fast speech (eSpeak m3 at rate
 * 1.5) leaves half its vowel frames above the strict threshold, while fricatives and bursts still
 * show no in-range periodicity, so "any in-range periodicity" separates them.
 */
const detectVoicing = YIN({ sampleRate: PITCH_RATE, threshold: VOICING_THRESHOLD });
const PITCH_FRAME = FRAME / PITCH_DECIMATION;
const pitchFrame = new Float32Array(PITCH_FRAME);

/**
 * F0 (Hz) of frame f of the 4 kHz copy, or undefined when unvoiced or outside 60–400 Hz.
 *
 * The frame is scaled to unit RMS first: pitchfinder's YIN overwrites d(1) with the constant 1
 * before its cumulative-mean normalization, so on quiet frames (below about −30 dBFS) the raw d(2)
 * is tiny next to that 1 and passes the threshold, reporting lag 2 (a 2 kHz "pitch").
 */
function pitchAt(detector: PitchDetector, low: Float32Array, f: number): number | undefined {
  const start = (f * HOP) / PITCH_DECIMATION;
  if (start + PITCH_FRAME > low.length) return undefined;
  let energy = 0;
  for (let i = 0; i < PITCH_FRAME; i++) energy += low[start + i]! * low[start + i]!;
  if (!(energy > 0)) return undefined;
  const gain = Math.sqrt(PITCH_FRAME / energy);
  for (let i = 0; i < PITCH_FRAME; i++) pitchFrame[i] = low[start + i]! * gain;
  const hz = detector(pitchFrame);
  return hz !== null && hz >= MIN_F0 && hz <= MAX_F0 ? hz : undefined;
}

/** Voiced at frame f: a strict F0 within one F0 step, else a lax one within ±10 ms. */
function isVoicedAt(f: number, voiced: Uint8Array, low: Float32Array): boolean {
  for (let g = f - F0_STEP; g <= f + F0_STEP; g++) if (voiced[g]) return true;
  for (let g = Math.max(0, f - 1); g <= f + 1; g++) {
    if (pitchAt(detectVoicing, low, g) !== undefined) return true;
  }
  return false;
}

interface PitchTrack {
  /** Intensity (vowel band) of every frame, dB. */
  readonly db: Float64Array;
  /** Frames quieter than this are not sounding. */
  readonly silence: number;
  /** The 4 kHz copy F0 is read from. */
  readonly low: Float32Array;
  /** 1 at the frames that gave an F0. */
  readonly voiced: Uint8Array;
  /** F0 of those frames, in frame order, Hz. */
  readonly f0Hz: number[];
}

/** F0 of the sounding frames of a 16 kHz signal, and the intensity contour it was gated by. */
function trackPitch(signal: Float32Array): PitchTrack {
  const frames = signal.length >= FRAME ? Math.floor((signal.length - FRAME) / HOP) + 1 : 0;
  const band = vowelBand(signal);
  const db = new Float64Array(frames);
  for (let f = 0; f < frames; f++) {
    let energy = 0;
    for (let i = 0, start = f * HOP; i < FRAME; i++) {
      energy += INTENSITY_WINDOW[i]! * band[start + i]! * band[start + i]!;
    }
    db[f] = 10 * Math.log10(energy + 1e-12);
  }
  const voiced = new Uint8Array(frames);
  const f0Hz: number[] = [];
  if (frames === 0) return { db, silence: 0, low: new Float32Array(0), voiced, f0Hz };
  const silence = Math.max(ABSOLUTE_FLOOR_DB, quantile([...db], 0.99) - SILENCE_BELOW_LOUD_DB);
  const low = pitchCopy(signal);
  // YIN runs only on sounding frames: pauses cost nothing, and quiet noise cannot fake a pitch.
  for (let f = 0; f < frames; f += F0_STEP) {
    if (db[f]! < silence) continue;
    const hz = pitchAt(detectPitch, low, f);
    if (hz === undefined) continue;
    voiced[f] = 1;
    f0Hz.push(hz);
  }
  return { db, silence, low, voiced, f0Hz };
}

/** Voiced speech each F0 of `voicedPitches` stands for. */
export const PITCH_STEP_SECONDS = F0_STEP * HOP_SECONDS;

/**
 * F0 (Hz) of the clip's voiced frames, one per PITCH_STEP_SECONDS of voiced speech: the pitch part
 * of analyzeVoice alone, for the speaker tracker.
 */
export function voicedPitches(samples: Float32Array, sampleRate: number): number[] {
  return trackPitch(toAnalysisRate(samples, sampleRate)).f0Hz;
}

/** Measures one clip (mono samples in [-1, 1], any sample rate). */
export function analyzeVoice(samples: Float32Array, sampleRate: number): VoiceAnalysis {
  const signal = toAnalysisRate(samples, sampleRate);
  const { db, silence, low, voiced, f0Hz } = trackPitch(signal);
  const result: VoiceAnalysis = {
    f0Hz,
    syllables: 0,
    soundingSeconds: 0,
    voicedSeconds: 0,
    formantSpacingHz: [],
  };
  // A clip without one voiced frame holds no speech: its noise must not dilute a pooled rate.
  if (f0Hz.length === 0) return result;
  // LPC, like YIN, runs only on the voiced frames.
  for (let f = 0; f < voiced.length; f++) {
    if (!voiced[f]) continue;
    const spacing = formantSpacing(signal, f * HOP + (FRAME - LPC_FRAME) / 2);
    if (spacing !== undefined) result.formantSpacingHz.push(spacing);
  }
  result.soundingSeconds = soundingSeconds(db, silence);
  result.voicedSeconds = f0Hz.length * PITCH_STEP_SECONDS;
  result.syllables = countNuclei(db, voiced, low, silence);
  return result;
}

/** Pools clips into one profile; undefined when they hold less than 0.3 s of voiced speech. */
export function summarizeVoice(parts: readonly VoiceAnalysis[]): VoiceFeatures | undefined {
  const f0 = parts.flatMap((part) => part.f0Hz);
  const voicedSeconds = parts.reduce((sum, part) => sum + part.voicedSeconds, 0);
  const sounding = parts.reduce((sum, part) => sum + part.soundingSeconds, 0);
  const syllables = parts.reduce((sum, part) => sum + part.syllables, 0);
  if (voicedSeconds < MIN_VOICED_SECONDS || f0.length === 0) return undefined;
  f0.sort((a, b) => a - b);
  // Spread from the interquartile range (IQR / 1.349 = SD for normal data): a plain SD would be
  // dominated by the few octave errors any pitch tracker makes.
  const iqr = quantileSorted(f0, 0.75) / quantileSorted(f0, 0.25);
  const spacing = parts.flatMap((part) => part.formantSpacingHz);
  const features = {
    medianF0Hz: quantileSorted(f0, 0.5),
    f0SpreadSemitones: (12 * Math.log2(iqr)) / 1.349,
    syllablesPerSecond: sounding > 0 ? syllables / sounding : 0,
    voicedSeconds,
  };
  return spacing.length > 0 ? { ...features, formantSpacingHz: quantile(spacing, 0.5) } : features;
}

export function measureVoice(samples: Float32Array, sampleRate: number): VoiceFeatures | undefined {
  return summarizeVoice([analyzeVoice(samples, sampleRate)]);
}

/** Silence runs of 0.3 s or more are pauses; everything from the first to the last sound else counts. */
function soundingSeconds(db: Float64Array, silence: number): number {
  let sounding = 0;
  let gap = 0;
  let started = false;
  for (const level of db) {
    if (level >= silence) {
      if (started && gap * HOP_SECONDS < MIN_PAUSE_SECONDS) sounding += gap;
      sounding += 1;
      gap = 0;
      started = true;
    } else {
      gap += 1;
    }
  }
  return sounding * HOP_SECONDS;
}

/**
 * Syllable nuclei: local intensity maxima above the NUCLEUS_QUANTILE of sounding intensity.
 * Neighbouring maxima without a 2 dB dip between them are one nucleus (the louder one stands for
 * both); a nucleus counts only when voiced (isVoicedAt), which drops fricative and burst peaks.
 */
function countNuclei(db: Float64Array, voiced: Uint8Array, low: Float32Array, silence: number): number {
  const threshold = Math.max(
    silence,
    quantile(
      [...db].filter((level) => level >= silence),
      NUCLEUS_QUANTILE,
    ),
  );
  const peaks: number[] = [];
  for (let f = 1; f + 1 < db.length; f++) {
    if (db[f]! >= threshold && db[f]! > db[f - 1]! && db[f]! >= db[f + 1]!) peaks.push(f);
  }
  const nuclei: number[] = [];
  let current = peaks[0];
  for (const next of peaks.slice(1)) {
    if (current === undefined) break;
    let dip = Infinity;
    for (let f = current; f <= next; f++) dip = Math.min(dip, db[f]!);
    if (db[current]! - dip >= MIN_DIP_DB && db[next]! - dip >= MIN_DIP_DB) {
      nuclei.push(current);
      current = next;
    } else if (db[next]! > db[current]!) {
      current = next;
    }
  }
  if (current !== undefined) nuclei.push(current);
  return nuclei.filter((f) => isVoicedAt(f, voiced, low)).length;
}
