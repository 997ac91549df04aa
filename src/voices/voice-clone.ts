/**
 * "Clone" voice matching (`voice_type=clone`, `voiceId=auto`): picks the library voice that sounds
 * most like a speaker and moves its pitch and rate toward theirs, as far as the configured TTS can.
 *
 * Every candidate voice is measured once, from what the TTS actually produces for a reference
 * sentence in the target language (voice-features.ts), so the same code serves eSpeak NG, SVOX Pico
 * or any later engine without per-engine tables. With a store (measurement-store.ts) the
 * measurements outlive the process: made once per engine version, read by every later process.
 *
 * Matching, in order:
 *   1. Gender family, decided by clear pitch. Adults speak at a median F0 of about 85–155 Hz (men)
 *      and 165–255 Hz (women) (Baken 2000, after Fitch & Holbrook 1970), so a median below 140 Hz
 *      is a man's: no adult woman speaks that low, while formant spacing, measured through
 *      whatever microphone and codec, can mislead (a FLEURS man at 101 Hz measures a woman's
 *      1395 Hz). A median above 190 Hz is a woman's, unless the formant spacing is no wider than the
 *      library's male voices': effort lifts a man's F0 into the women's range (JFK's inaugural
 *      address: 247 Hz) but does not shorten his vocal tract (983 Hz). Between 140 and 190 Hz, where
 *      the two ranges meet, and for that high man, the speaker goes to the nearer of the two gender
 *      centroids of the measured library voices, in (F0, formant spacing) semitones, each scaled by
 *      the library's own male–female gap, with F0 counting half. A speaker whose voice was already
 *      chosen keeps its family (speakers/voice-choice.ts).
 *   2. Nearest voice of that family by F0 and formant-spacing differences in semitones (equal
 *      weights: F0 will be corrected in step 3 but formants cannot be, so they must not count less),
 *      and F0 spread difference at half weight.
 *   3. Pitch: the voice's pitch setting moves by the F0 gap divided by the TTS's measured
 *      semitones-per-pitch-step slope (a pooled within-variant regression over the library).
 *   4. Rate: the speaker's articulation rate relative to the TTS's own at rate 1 in the speaker's
 *      language scales the voice's rate.
 */
import { setTimeout as delay } from "node:timers/promises";
import { resample } from "../audio/resampler.js";
import type { LanguageCode, TtsEngine, Voice, VoiceTimbre } from "../core/contracts.js";
import { defaultVoice, VOICES } from "./library.js";
import { measurementKey, type StoredMeasurement, type VoiceMeasurementStore } from "./measurement-store.js";
import { ANALYSIS_RATE } from "../audio/signal.js";
import { measureVoice, type VoiceFeatures } from "./voice-features.js";
import { REFERENCE_SENTENCES } from "./reference-sentences.js";

const PITCH_MIN = 0;
const PITCH_MAX = 99;
const RATE_MIN = 0.75;
const RATE_MAX = 1.4;
/** Rates are rounded to this step, so a profile that firms up does not flip between near-equal voices. */
const RATE_STEP = 0.05;
/** Median F0 below which a speaker is a man, and above which a woman (see the module comment). */
const MALE_BELOW_HZ = 140;
const FEMALE_ABOVE_HZ = 190;
/** Between them, F0 counts half as much as formant spacing in the gender decision. */
const GENDER_F0_WEIGHT = 0.5;
/** Within a family: semitones of F0 count 1, of formant spacing 1, of F0 spread 0.5. */
const WEIGHTS = { f0: 1, formants: 1, spread: 0.5 };
/** Pitch steps between the two measurements of a voice when the library alone cannot give a slope. */
const SECOND_PITCH_OFFSET = 25;
/** A plausible slope, semitones per pitch step (eSpeak NG 1.51: ≈ 0.16 measured; SVOX Pico: 0.15). */
const SLOPE_RANGE = { min: 0.03, max: 0.5 };
/** A failed preparation is retried by match() after this long. */
const RETRY_AFTER_MS = 60_000;

interface Measurement {
  readonly voice: Voice;
  readonly features: VoiceFeatures;
}

interface Prepared {
  readonly measured: readonly Measurement[];
  /** Semitones per pitch step, or undefined when it could not be measured (no pitch change then). */
  readonly slope: number | undefined;
  /** The TTS's articulation rate at rate 1 in the source language (syllables per second). */
  readonly referenceRate: number;
  /** Gender centroids, undefined when the candidates do not cover both genders or sound alike. */
  readonly genders: GenderModel | undefined;
}

interface GenderModel {
  readonly centroids: Readonly<Record<Voice["gender"], { f0: number; formants: number | undefined }>>;
  readonly f0Gap: number;
  readonly formantGap: number | undefined;
}

export interface VoiceClonerOptions {
  readonly sourceLanguage: LanguageCode;
  readonly targetLanguage: LanguageCode;
  /** Candidate voices (default: the library); voices with a strong accent are never chosen. */
  readonly voices?: readonly Voice[];
  /** Where measurements persist across processes; without one they are made again per process. */
  readonly store?: VoiceMeasurementStore | undefined;
}

export class VoiceCloner {
  private readonly candidates: readonly Voice[];
  private preparing: Promise<void> | undefined;
  private prepared: Prepared | undefined;
  private failedAt = 0;
  private readonly memo = new Map<string, Voice>();
  /** Measurements read from the store, and those made by this run (written back at its end). */
  private stored = new Map<string, StoredMeasurement>();
  private readonly fresh = new Map<string, StoredMeasurement>();

  constructor(
    private readonly tts: TtsEngine,
    private readonly options: VoiceClonerOptions,
  ) {
    this.candidates = (options.voices ?? VOICES).filter((voice) => !voice.strongAccent);
  }

  /**
   * Measures the candidate library voices once (synthesizing a short reference sentence per voice
   * with `tts` in the target language). Safe to call many times; concurrent calls share one run.
   * Syntheses run one at a time so a live service keeps its TTS capacity, and the event loop is
   * yielded between steps (eSpeak NG, 64 voices: ~5 s on 2 cores, in slices of ≤ ~50 ms).
   */
  prepare(): Promise<void> {
    if (this.prepared) return Promise.resolve();
    this.preparing ??= this.measureLibrary().then(
      (prepared) => {
        this.prepared = prepared;
      },
      (error: unknown) => {
        this.preparing = undefined;
        this.failedAt = Date.now();
        throw error;
      },
    );
    return this.preparing;
  }

  /**
   * Synchronous so matching never delays speech: undefined until prepare() has finished (and then it
   * starts preparing if not started). Otherwise the nearest library voice of `gender` (by default the
   * speaker's, see the module comment), with pitch and rate adjusted toward the speaker.
   */
  match(speaker: VoiceFeatures, gender?: Voice["gender"]): Voice | undefined {
    const prepared = this.prepared;
    if (!prepared) {
      if (!this.preparing && Date.now() - this.failedAt >= RETRY_AFTER_MS) {
        this.prepare().catch(() => undefined);
      }
      return undefined;
    }
    const nearest = nearestVoice(speaker, prepared, gender ?? genderOf(speaker, prepared.genders));
    if (!nearest) return undefined;
    const { voice, features } = nearest;
    const f0Gap = semitones(speaker.medianF0Hz) - semitones(features.medianF0Hz);
    const pitch =
      prepared.slope === undefined
        ? voice.timbre.pitch
        : clamp(Math.round(voice.timbre.pitch + f0Gap / prepared.slope), PITCH_MIN, PITCH_MAX);
    const ratio =
      speaker.syllablesPerSecond > 0 && prepared.referenceRate > 0
        ? speaker.syllablesPerSecond / prepared.referenceRate
        : 1;
    const rate = clamp(Math.round((voice.timbre.rate * ratio) / RATE_STEP) * RATE_STEP, RATE_MIN, RATE_MAX);
    return this.adjusted(voice, pitch, Number(rate.toFixed(2)));
  }

  private adjusted(voice: Voice, pitch: number, rate: number): Voice {
    const key = `${voice.id}:${pitch}:${rate}`;
    let result = this.memo.get(key);
    if (!result) {
      const timbre: VoiceTimbre = Object.freeze({ ...voice.timbre, pitch, rate });
      result = Object.freeze({ ...voice, timbre });
      this.memo.set(key, result);
    }
    return result;
  }

  private async measureLibrary(): Promise<Prepared> {
    const { store } = this.options;
    // An unreadable store only means measuring again.
    if (store) this.stored = await store.read(this.tts.info).catch(() => new Map());
    const prepared = await this.measureCandidates();
    if (store && this.fresh.size > 0) {
      // Nor does a failed write cost more than measuring again in the next process.
      await store.write(this.tts.info, this.fresh).catch(() => undefined);
      this.fresh.clear();
    }
    return prepared;
  }

  private async measureCandidates(): Promise<Prepared> {
    const { sourceLanguage, targetLanguage } = this.options;
    const measured: Measurement[] = [];
    for (const voice of this.candidates) {
      const features = await this.measure(voice, targetLanguage);
      if (features) measured.push({ voice, features });
    }
    if (measured.length === 0) {
      throw new Error(
        `voice cloning: ${this.tts.info.id} produced no measurable speech in ${targetLanguage}`,
      );
    }

    const points = measured.map(({ voice, features }) => ({ timbre: voice.timbre, features }));
    let slope = fitPitchSlope(points);
    if (slope === undefined) {
      // Too few voices share a variant: measure each lone variant at a second pitch as well.
      const variants = new Map<string, Set<number>>();
      for (const { timbre } of points) {
        variants.set(timbre.variant, (variants.get(timbre.variant) ?? new Set()).add(timbre.pitch));
      }
      for (const { voice } of measured) {
        if (variants.get(voice.timbre.variant)!.size > 1) continue;
        const { pitch } = voice.timbre;
        const timbre = {
          ...voice.timbre,
          pitch: pitch < 50 ? pitch + SECOND_PITCH_OFFSET : pitch - SECOND_PITCH_OFFSET,
        };
        const features = await this.measure({ ...voice, timbre }, targetLanguage);
        if (features) points.push({ timbre, features });
      }
      slope = fitPitchSlope(points);
    }

    // The TTS's own articulation rate at rate 1, in the speaker's language when it speaks it.
    const rateLanguage = this.tts.capabilities.languages.includes(sourceLanguage)
      ? sourceLanguage
      : targetLanguage;
    const base = defaultVoice("male");
    const reference = await this.measure({ ...base, timbre: { ...base.timbre, rate: 1 } }, rateLanguage);
    const referenceRate =
      reference && reference.syllablesPerSecond > 0
        ? reference.syllablesPerSecond
        : median(measured.map(({ voice, features }) => features.syllablesPerSecond / voice.timbre.rate));

    return { measured, slope, referenceRate, genders: genderModel(measured) };
  }

  /** Features of `voice` reading the reference sentence, or undefined when it cannot be synthesized. */
  private async measure(voice: Voice, language: LanguageCode): Promise<VoiceFeatures | undefined> {
    const key = measurementKey(voice.timbre, language);
    const known = this.stored.get(key);
    if (known !== undefined) return known ?? undefined;
    const text = REFERENCE_SENTENCES[language] ?? REFERENCE_SENTENCES.en!;
    let features: VoiceFeatures | undefined;
    try {
      // Decoding, resampling and analysis each hold the event loop for ~20-35 ms: timers and I/O of
      // live sessions get a turn between them (a setImmediate would not let timers through).
      const audio = await this.tts.synthesize({ text, language, voice });
      await delay(0);
      // Band-limited (not the analysis's own interpolation): formants are compared across sources.
      const samples = await resample(audio.samples, audio.sampleRate, ANALYSIS_RATE);
      await delay(0);
      features = measureVoice(samples, ANALYSIS_RATE);
    } catch {
      // A voice the engine cannot render (e.g. a variant missing from this installation) is skipped,
      // and not stored: the failure may pass (a remote engine that was down).
      return undefined;
    }
    this.fresh.set(key, features ?? null);
    return features;
  }
}

const cloners = new WeakMap<TtsEngine, Map<string, VoiceCloner>>();

/**
 * One shared cloner per (tts engine, source, target), so the library is measured once per process,
 * and with a `store` once per engine version (the store of the first call for the pair is kept).
 */
export function voiceClonerFor(
  tts: TtsEngine,
  sourceLanguage: LanguageCode,
  targetLanguage: LanguageCode,
  store?: VoiceMeasurementStore,
): VoiceCloner {
  let byPair = cloners.get(tts);
  if (!byPair) {
    byPair = new Map();
    cloners.set(tts, byPair);
  }
  const key = `${sourceLanguage}>${targetLanguage}`;
  let cloner = byPair.get(key);
  if (!cloner) {
    cloner = new VoiceCloner(tts, { sourceLanguage, targetLanguage, store });
    byPair.set(key, cloner);
  }
  return cloner;
}

// ---------------------------------------------------------------- matching

/** The speaker's gender family (see the module comment). */
function genderOf(speaker: VoiceFeatures, model: GenderModel | undefined): Voice["gender"] | undefined {
  if (speaker.medianF0Hz < MALE_BELOW_HZ) return "male";
  if (!model) return speaker.medianF0Hz > FEMALE_ABOVE_HZ ? "female" : undefined;
  const maleSpacing = model.centroids.male.formants;
  const maleTract =
    speaker.formantSpacingHz !== undefined &&
    maleSpacing !== undefined &&
    semitones(speaker.formantSpacingHz) <= maleSpacing;
  if (speaker.medianF0Hz > FEMALE_ABOVE_HZ && !maleTract) return "female";
  return nearestGender(speaker, model);
}

/** The nearest measured voice of `gender` (of any gender when undefined or none was measured). */
function nearestVoice(
  speaker: VoiceFeatures,
  prepared: Prepared,
  gender: Voice["gender"] | undefined,
): Measurement | undefined {
  const own = prepared.measured.filter(({ voice }) => voice.gender === gender);
  const pool = own.length > 0 ? own : prepared.measured;
  let best: Measurement | undefined;
  let bestDistance = Infinity;
  for (const candidate of pool) {
    const { features } = candidate;
    const f0 = semitones(speaker.medianF0Hz) - semitones(features.medianF0Hz);
    const spread = speaker.f0SpreadSemitones - features.f0SpreadSemitones;
    const formants =
      speaker.formantSpacingHz !== undefined && features.formantSpacingHz !== undefined
        ? semitones(speaker.formantSpacingHz) - semitones(features.formantSpacingHz)
        : 0;
    const distance =
      (WEIGHTS.f0 * f0) ** 2 + (WEIGHTS.formants * formants) ** 2 + (WEIGHTS.spread * spread) ** 2;
    if (distance < bestDistance) [best, bestDistance] = [candidate, distance];
  }
  return best;
}

function nearestGender(speaker: VoiceFeatures, model: GenderModel): Voice["gender"] {
  const distance = (gender: Voice["gender"]): number => {
    const centroid = model.centroids[gender];
    const f0 = (GENDER_F0_WEIGHT * (semitones(speaker.medianF0Hz) - centroid.f0)) / model.f0Gap;
    const formants =
      speaker.formantSpacingHz !== undefined && centroid.formants !== undefined && model.formantGap
        ? (semitones(speaker.formantSpacingHz) - centroid.formants) / model.formantGap
        : 0;
    return f0 ** 2 + formants ** 2;
  };
  return distance("female") <= distance("male") ? "female" : "male";
}

/** Per-gender medians of the measured candidates, in semitones, and the gaps between them. */
function genderModel(measured: readonly Measurement[]): GenderModel | undefined {
  const centroid = (gender: Voice["gender"]) => {
    const own = measured.filter(({ voice }) => voice.gender === gender).map(({ features }) => features);
    if (own.length === 0) return undefined;
    const spacing = own.flatMap((f) =>
      f.formantSpacingHz === undefined ? [] : [semitones(f.formantSpacingHz)],
    );
    return {
      f0: median(own.map((f) => semitones(f.medianF0Hz))),
      formants: spacing.length > 0 ? median(spacing) : undefined,
    };
  };
  const female = centroid("female");
  const male = centroid("male");
  if (!female || !male) return undefined;
  const f0Gap = Math.abs(female.f0 - male.f0);
  const formantGap =
    female.formants !== undefined && male.formants !== undefined
      ? Math.abs(female.formants - male.formants)
      : undefined;
  // Centroids that do not differ carry no gender information (e.g. one Pico speaker for all voices).
  if (f0Gap < 1 && !(formantGap && formantGap >= 0.5)) return undefined;
  return {
    centroids: { female, male },
    f0Gap: Math.max(f0Gap, 1),
    formantGap: formantGap !== undefined && formantGap >= 0.5 ? formantGap : undefined,
  };
}

// ---------------------------------------------------------------- pitch slope

interface PitchPoint {
  readonly timbre: VoiceTimbre;
  readonly features: VoiceFeatures;
}

/**
 * Semitones of median F0 per pitch step: least squares over voices grouped by variant (each group
 * centered on its own means, so variants' different base pitches cancel). Pitch range lifts the
 * median F0 a little too (≈ 0.05 st per step on eSpeak NG, against 0.16 for pitch), so it is a
 * second regressor whenever it varies independently of pitch. Undefined when the data are too thin
 * or the slope implausible.
 */
function fitPitchSlope(points: readonly PitchPoint[]): number | undefined {
  const groups = new Map<string, PitchPoint[]>();
  for (const point of points) {
    groups.set(point.timbre.variant, [...(groups.get(point.timbre.variant) ?? []), point]);
  }
  let [spp, spr, srr, spy, sry, freedom] = [0, 0, 0, 0, 0, 0];
  for (const group of groups.values()) {
    if (group.length < 2) continue;
    const mean = (value: (p: PitchPoint) => number) =>
      group.reduce((sum, p) => sum + value(p), 0) / group.length;
    const p0 = mean((p) => p.timbre.pitch);
    const r0 = mean((p) => p.timbre.pitchRange);
    const y0 = mean((p) => semitones(p.features.medianF0Hz));
    for (const p of group) {
      const [x, r, y] = [
        p.timbre.pitch - p0,
        p.timbre.pitchRange - r0,
        semitones(p.features.medianF0Hz) - y0,
      ];
      [spp, spr, srr, spy, sry] = [spp + x * x, spr + x * r, srr + r * r, spy + x * y, sry + r * y];
    }
    freedom += group.length - 1;
  }
  // At least three within-variant comparisons and ~10 pitch steps of spread among them.
  if (freedom < 3 || spp < 100) return undefined;
  const determinant = spp * srr - spr * spr;
  const slope = determinant > 0.2 * spp * srr ? (spy * srr - sry * spr) / determinant : spy / spp;
  return slope >= SLOPE_RANGE.min && slope <= SLOPE_RANGE.max ? slope : undefined;
}

function semitones(hz: number): number {
  return 12 * Math.log2(hz / 100);
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length / 2;
  return sorted.length % 2 ? sorted[Math.floor(middle)]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

function clamp(value: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, value));
}
