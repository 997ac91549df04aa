/**
 * The voice library: 70 named voices. A voice is a timbre (eSpeak NG variant + pitch, pitch range
 * and rate), not a language — every voice speaks every voice-output language, and each TTS engine
 * renders the timbre as closely as it can.
 *
 * Variants are real files of Debian's espeak-ng 1.51 (`espeak-ng-data/voices/!v`), chosen only
 * among those whose own `gender` line matches the voice's gender. Novelty variants (robots, echo,
 * whisper, croak, "anxious") are left out. Where several voices share a variant they differ by at
 * least ~8 pitch steps (≈ 1.5 semitones), a clearly different pitch range or ≥ 8 % rate, so no two
 * voices sound identical (`test/unit/voices.test.ts` enforces this).
 */
import type { LanguageCode, Voice, VoiceTimbre } from "../core/contracts.js";

export type VoiceGender = Voice["gender"];

/** [name, variant, pitch 0..99, pitch range 0..99, rate factor, accent locales] */
type Row = readonly [string, string, number, number, number, Readonly<Record<LanguageCode, string>>?];

// Female voices, ids 1..35. Row 1 is the default female voice.
const FEMALE: readonly Row[] = [
  ["Emma", "f3", 50, 50, 1.0],
  ["Sofia", "f2", 48, 55, 1.0],
  ["Olivia", "f5", 45, 50, 0.97],
  ["Chloe", "f1", 52, 60, 1.03],
  ["Hannah", "f4", 50, 45, 1.0],
  ["Amelia", "Andrea", 42, 50, 0.95],
  ["Julia", "belinda", 45, 55, 1.0],
  ["Laura", "linda", 48, 45, 1.04],
  ["Maya", "anika", 40, 60, 1.0],
  ["Nadia", "Alicia", 42, 50, 0.96],
  ["Priya", "Annie", 50, 40, 1.05],
  ["Rosa", "aunty", 55, 55, 0.98],
  ["Sara", "steph", 55, 55, 1.0],
  ["Tessa", "steph2", 45, 50, 0.94],
  ["Valentina", "steph3", 47, 72, 1.08],
  ["Margaret", "grandma", 48, 45, 0.9],
  ["Yuki", "f3", 62, 40, 1.08],
  ["Zoe", "f2", 60, 65, 1.1],
  ["Alice", "f5", 58, 45, 1.06],
  ["Beatriz", "f1", 40, 45, 0.93],
  ["Clara", "f4", 60, 60, 0.95],
  ["Daniela", "Andrea", 55, 40, 1.07],
  ["Elena", "belinda", 56, 65, 0.92],
  ["Fatima", "linda", 38, 55, 0.96],
  ["Grace", "anika", 52, 45, 1.08],
  ["Helena", "Alicia", 55, 65, 1.05],
  ["Ingrid", "Annie", 40, 55, 0.92],
  ["Lena", "aunty", 44, 40, 1.06],
  ["Mei", "steph", 40, 45, 0.95],
  ["Noor", "steph2", 58, 65, 1.08],
  ["Paula", "f3", 38, 65, 0.92],
  ["Lucia", "f2", 38, 40, 0.94],
  ["Camille", "f5", 66, 55, 1.0],
  ["Isla", "f4", 42, 55, 0.97, { en: "en-gb-scotland" }],
  ["Joana", "f1", 60, 55, 1.0, { pt: "pt" }],
];

// Male voices, ids 36..70. Row 1 is the default male voice.
const MALE: readonly Row[] = [
  ["Liam", "m3", 50, 50, 1.0],
  ["Noah", "m1", 48, 55, 1.0],
  ["Lucas", "m2", 50, 45, 0.97],
  ["Daniel", "m4", 52, 50, 1.03],
  ["David", "m5", 50, 60, 1.0],
  ["Ethan", "m6", 47, 50, 0.96],
  ["Felix", "m7", 55, 55, 1.04],
  ["Gabriel", "m8", 52, 45, 0.98],
  ["Ivan", "Andy", 45, 50, 0.95],
  ["James", "Denis", 50, 55, 1.02],
  ["Karim", "Marco", 42, 45, 0.96],
  ["Leo", "antonio", 50, 60, 1.05],
  ["Nikolai", "sandro", 45, 40, 0.94],
  ["Omar", "Diogo", 48, 55, 1.0],
  ["Pablo", "Henrique", 50, 50, 1.03],
  ["Rafael", "Hugo", 42, 60, 0.95],
  ["Samuel", "Lee", 52, 55, 1.0],
  ["Thomas", "michel", 56, 45, 1.06],
  ["William", "miguel", 46, 50, 0.97],
  ["Adrian", "travis", 50, 55, 1.02],
  ["Benjamin", "victor", 48, 50, 1.0],
  ["Carlos", "Storm", 50, 60, 0.98],
  ["Elias", "m3", 40, 60, 0.92],
  ["Finn", "m1", 60, 45, 1.08],
  ["George", "m2", 40, 60, 1.06],
  ["Hassan", "m4", 40, 40, 0.94],
  ["Kenji", "m5", 60, 45, 1.08],
  ["Martin", "m6", 58, 65, 1.06],
  ["Oscar", "m7", 42, 40, 0.93],
  ["Peter", "m8", 40, 60, 1.07],
  ["Arjun", "Andy", 56, 60, 1.07],
  ["Stefan", "Denis", 40, 40, 0.93],
  ["Winston", "Marco", 52, 60, 1.02, { en: "en-029" }],
  ["Mateo", "antonio", 40, 45, 0.95, { es: "es-419" }],
  ["Nigel", "sandro", 55, 60, 1.04, { en: "en-gb-x-gbcwmd" }],
];

function build(rows: readonly Row[], gender: VoiceGender, firstId: number): Voice[] {
  return rows.map(([name, variant, pitch, pitchRange, rate, accentLocales], index) => {
    const timbre: VoiceTimbre = accentLocales
      ? { variant, pitch, pitchRange, rate, accentLocales }
      : { variant, pitch, pitchRange, rate };
    return Object.freeze({
      id: firstId + index,
      name,
      gender,
      strongAccent: accentLocales !== undefined,
      timbre,
    });
  });
}

/** All 70 voices, ordered by id (1..70). */
export const VOICES: readonly Voice[] = Object.freeze([
  ...build(FEMALE, "female", 1),
  ...build(MALE, "male", 1 + FEMALE.length),
]);

const BY_ID = new Map(VOICES.map((voice) => [voice.id, voice]));

export function findVoice(id: number): Voice | undefined {
  return BY_ID.get(id);
}

/** The voice a request names by id (a number, or its decimal digits), if it exists. */
export function voiceById(value: string | number): Voice | undefined {
  const id = typeof value === "number" ? value : /^\d+$/u.test(value) ? Number(value) : Number.NaN;
  return Number.isSafeInteger(id) ? findVoice(id) : undefined;
}

/** The voice chosen when a client names only a gender: the first non-accented voice of that gender. */
export function defaultVoice(gender: VoiceGender): Voice {
  const voice = VOICES.find((v) => v.gender === gender && !v.strongAccent);
  if (!voice) throw new Error(`voice library has no non-accented ${gender} voice`);
  return voice;
}

export function listVoices(gender?: VoiceGender): readonly Voice[] {
  return gender ? VOICES.filter((v) => v.gender === gender) : VOICES;
}

/**
 * The regional locale a voice speaks `language` with, or undefined for the language's default.
 * Engines fall back to their default locale when they cannot speak the returned one.
 */
export function accentLocale(voice: Voice, language: LanguageCode): string | undefined {
  return voice.timbre.accentLocales?.[language];
}
