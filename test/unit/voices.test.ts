import { describe, expect, it } from "vitest";
import type { Voice } from "../../src/core/contracts.js";
import { accentLocale, defaultVoice, findVoice, listVoices, VOICES } from "../../src/voices/library.js";
import { levelSpeech } from "../../src/audio/loudness.js";

/** Variant files that differ only slightly (same pitch line, small formant/tone changes). */
const NEAR_IDENTICAL_VARIANTS: readonly (readonly string[])[] = [
  ["steph", "steph2", "steph3"],
  ["Henrique", "Hugo"],
  ["michel", "Diogo"],
];

function family(variant: string): string {
  return NEAR_IDENTICAL_VARIANTS.find((group) => group.includes(variant))?.[0] ?? variant;
}

/** 1 ≈ the smallest difference we count as audible: 8 pitch steps, 20 range steps or 8 % rate. */
function timbreDistance(a: Voice, b: Voice): number {
  return (
    Math.abs(a.timbre.pitch - b.timbre.pitch) / 8 +
    Math.abs(a.timbre.pitchRange - b.timbre.pitchRange) / 20 +
    Math.abs(a.timbre.rate - b.timbre.rate) / 0.08
  );
}

describe("voice library", () => {
  it("has exactly 70 voices with ids 1..70 in order", () => {
    expect(VOICES).toHaveLength(70);
    expect(VOICES.map((v) => v.id)).toEqual(Array.from({ length: 70 }, (_, i) => i + 1));
  });

  it("gives every voice a distinct, non-empty human name", () => {
    const names = VOICES.map((v) => v.name);
    expect(new Set(names).size).toBe(70);
    for (const name of names) expect(name).toMatch(/^\p{Lu}\p{Ll}+$/u);
  });

  it("has both genders, about half each", () => {
    const female = listVoices("female");
    const male = listVoices("male");
    expect(female.length + male.length).toBe(70);
    expect(female.length).toBeGreaterThanOrEqual(30);
    expect(male.length).toBeGreaterThanOrEqual(30);
    expect(female.every((v) => v.gender === "female")).toBe(true);
    expect(male.every((v) => v.gender === "male")).toBe(true);
    expect(listVoices()).toBe(VOICES);
  });

  it("keeps timbre parameters within eSpeak NG's ranges", () => {
    for (const { timbre } of VOICES) {
      expect(timbre.variant).toMatch(/^[A-Za-z0-9]+$/);
      expect(timbre.pitch).toBeGreaterThanOrEqual(0);
      expect(timbre.pitch).toBeLessThanOrEqual(99);
      expect(timbre.pitchRange).toBeGreaterThanOrEqual(0);
      expect(timbre.pitchRange).toBeLessThanOrEqual(99);
      expect(timbre.rate).toBeGreaterThanOrEqual(0.8);
      expect(timbre.rate).toBeLessThanOrEqual(1.2);
    }
  });

  it("uses only eSpeak NG variants whose own gender matches the voice", () => {
    // Gender lines of Debian espeak-ng 1.51's voices/!v files (checked by the eSpeak integration test).
    const femaleVariants = /^(f[1-5]|Alicia|Andrea|Annie|anika|aunty|belinda|linda|steph[23]?|grandma)$/;
    for (const voice of VOICES) {
      expect(femaleVariants.test(voice.timbre.variant), `${voice.name} uses ${voice.timbre.variant}`).toBe(
        voice.gender === "female",
      );
    }
  });

  it("has no two voices that sound identical", () => {
    const keys = VOICES.map(
      (v) =>
        `${v.timbre.variant}/${v.timbre.pitch}/${v.timbre.pitchRange}/${v.timbre.rate}/${JSON.stringify(v.timbre.accentLocales)}`,
    );
    expect(new Set(keys).size).toBe(70);
    for (const a of VOICES) {
      for (const b of VOICES) {
        if (a.id >= b.id || family(a.timbre.variant) !== family(b.timbre.variant)) continue;
        expect(timbreDistance(a, b), `voices ${a.id} ${a.name} and ${b.id} ${b.name}`).toBeGreaterThanOrEqual(
          1,
        );
      }
    }
  });

  it("flags 3-5 strongly accented voices, each with accent locales, and only those", () => {
    const accented = VOICES.filter((v) => v.strongAccent);
    expect(accented.length).toBeGreaterThanOrEqual(3);
    expect(accented.length).toBeLessThanOrEqual(5);
    for (const voice of VOICES) {
      const locales = voice.timbre.accentLocales;
      if (voice.strongAccent) {
        expect(Object.keys(locales ?? {}).length).toBeGreaterThan(0);
        for (const [language, locale] of Object.entries(locales!)) {
          expect(language).toMatch(/^[a-z]{2}$/);
          // The accent is a regional form of the same language (en → en-gb-scotland, pt → pt).
          expect(locale.split("-")[0]).toBe(language);
          expect(accentLocale(voice, language)).toBe(locale);
        }
      } else {
        expect(locales).toBeUndefined();
        expect(accentLocale(voice, "en")).toBeUndefined();
      }
    }
    expect(new Set(accented.map((v) => v.gender)).size).toBe(2);
  });

  it("finds voices by id", () => {
    expect(findVoice(1)?.id).toBe(1);
    expect(findVoice(70)?.id).toBe(70);
    expect(findVoice(0)).toBeUndefined();
    expect(findVoice(71)).toBeUndefined();
    expect(findVoice(1.5)).toBeUndefined();
  });

  it("chooses non-accented default voices of the requested gender", () => {
    for (const gender of ["female", "male"] as const) {
      const voice = defaultVoice(gender);
      expect(voice.gender).toBe(gender);
      expect(voice.strongAccent).toBe(false);
      expect(voice.timbre.accentLocales).toBeUndefined();
    }
  });

  it("is immutable", () => {
    expect(Object.isFrozen(VOICES)).toBe(true);
    expect(Object.isFrozen(VOICES[0])).toBe(true);
  });
});

describe("levelSpeech", () => {
  it("brings quiet and loud speech to the same level without clipping", () => {
    const tone = (amplitude: number): Float32Array =>
      Float32Array.from({ length: 16_000 }, (_, i) => amplitude * Math.sin((2 * Math.PI * 200 * i) / 16_000));
    const rms = (s: Float32Array): number => Math.sqrt(s.reduce((sum, x) => sum + x * x, 0) / s.length);
    const quiet = levelSpeech(tone(0.01));
    const loud = levelSpeech(tone(0.9));
    expect(rms(quiet)).toBeCloseTo(0.1, 3);
    expect(rms(loud)).toBeCloseTo(0.1, 3);
    expect(Math.max(...quiet.map(Math.abs))).toBeLessThanOrEqual(0.95);
  });

  it("leaves silence untouched", () => {
    const silence = new Float32Array(1000);
    expect(levelSpeech(silence)).toEqual(new Float32Array(1000));
    const hiss = Float32Array.from({ length: 1000 }, (_, i) => (i % 2 ? 0.001 : -0.001));
    expect(levelSpeech(hiss.slice())).toEqual(hiss);
  });
});
