import { existsSync, readdirSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { resample } from "../../src/audio/resampler.js";
import { readWavAsPcm16 } from "../../src/audio/wav.js";
import { createEspeakEngine } from "../../src/engines/espeak-ng/index.js";
import type { SynthesisRequest, TtsEngine, Voice } from "../../src/core/contracts.js";
import { findVoice, VOICES } from "../../src/voices/library.js";
import { VoiceMeasurementStore } from "../../src/voices/measurement-store.js";
import { REFERENCE_SENTENCES } from "../../src/voices/reference-sentences.js";
import { voiceClonerFor, VoiceCloner } from "../../src/voices/voice-clone.js";
import {
  analyzeVoice,
  measureVoice,
  summarizeVoice,
  type VoiceFeatures,
} from "../../src/voices/voice-features.js";
import { SpeakerProfiler } from "../../src/speakers/profiler.js";
import { clipsOf, SPEAKERS, type SpeakerName } from "../support/conversations.js";
import { sharedMissing, sharedPath } from "../support/shared.js";

const ESPEAK = "/usr/bin/espeak-ng";
const noEspeak = !existsSync(ESPEAK);
const noSpeech =
  sharedMissing("data", "speech", "ljspeech", "wavs") || sharedMissing("data", "speech", "misc");

const ENGLISH = [
  "The weather is lovely today, so we are going for a walk in the park.",
  "She told me that the meeting had been moved to Thursday afternoon at four.",
];
/** Not the cloner's own reference sentence: checks must hold for other text too. */
const SPANISH = "El tren sale de la estación a las ocho de la mañana y llega a la ciudad al mediodía.";

const semitones = (a: number, b: number): number => Math.abs(12 * Math.log2(a / b));
const toFloat = (pcm: Int16Array): Float32Array => Float32Array.from(pcm, (s) => s / 32768);
const withTimbre = (voice: Voice, change: Partial<Voice["timbre"]>): Voice => ({
  ...voice,
  timbre: { ...voice.timbre, ...change },
});

/** Features of `texts` spoken by `voice`, pooled over the texts. */
async function speak(
  engine: TtsEngine,
  voice: Voice,
  texts: readonly string[],
  language = "en",
): Promise<VoiceFeatures> {
  const parts = [];
  for (const text of texts) {
    const audio = await engine.synthesize({ text, language, voice });
    parts.push(analyzeVoice(await resample(audio.samples, audio.sampleRate, 16_000), 16_000));
  }
  return summarizeVoice(parts)!;
}

/** A TTS engine that records its requests. */
function counting(engine: TtsEngine): TtsEngine & { readonly requests: SynthesisRequest[] } {
  const requests: SynthesisRequest[] = [];
  return {
    info: engine.info,
    capabilities: engine.capabilities,
    requests,
    synthesize: (request) => {
      requests.push(request);
      return engine.synthesize(request);
    },
    close: () => Promise.resolve(),
  };
}

describe.skipIf(noEspeak)("voice features of eSpeak NG speech", () => {
  let engine: TtsEngine;
  beforeAll(async () => {
    engine = await createEspeakEngine({});
  });
  afterAll(async () => {
    await engine?.close();
  });

  it.each([1, 36])("measures rate 1.5 as clearly faster than rate 1.0 (voice %i)", async (id) => {
    const voice = findVoice(id)!;
    const normal = await speak(engine, withTimbre(voice, { rate: 1 }), ENGLISH);
    const fast = await speak(engine, withTimbre(voice, { rate: 1.5 }), ENGLISH);
    expect(normal.syllablesPerSecond).toBeGreaterThan(3.5);
    expect(normal.syllablesPerSecond).toBeLessThan(7);
    expect(fast.syllablesPerSecond / normal.syllablesPerSecond).toBeGreaterThan(1.2);
  });

  it.each([1, 36])("measures pitch 80 as clearly higher than pitch 20 (voice %i)", async (id) => {
    const voice = findVoice(id)!;
    const low = await speak(engine, withTimbre(voice, { pitch: 20 }), ENGLISH.slice(0, 1));
    const high = await speak(engine, withTimbre(voice, { pitch: 80 }), ENGLISH.slice(0, 1));
    expect(high.medianF0Hz / low.medianF0Hz).toBeGreaterThan(1.4);
  });

  it("measures female variants with wider formant spacing than male ones", async () => {
    const female = await speak(engine, findVoice(1)!, ENGLISH);
    const male = await speak(engine, findVoice(36)!, ENGLISH);
    expect(female.medianF0Hz).toBeGreaterThan(male.medianF0Hz * 1.6);
    expect(semitones(female.formantSpacingHz!, male.formantSpacingHz!)).toBeGreaterThan(1.5);
    expect(female.formantSpacingHz!).toBeGreaterThan(male.formantSpacingHz!);
  });
});

describe.skipIf(noEspeak || noSpeech)("clone voice matching (real eSpeak NG, real speech)", () => {
  let engine: TtsEngine;
  let cloner: VoiceCloner;
  let lj: VoiceFeatures;
  let jfk: VoiceFeatures;
  let measurementsDir: string;

  beforeAll(async () => {
    engine = await createEspeakEngine({});
    measurementsDir = await mkdtemp(path.join(tmpdir(), "voice-measurements-"));
    cloner = voiceClonerFor(engine, "en", "es", new VoiceMeasurementStore(measurementsDir));
    const started = performance.now();
    await cloner.prepare();
    console.info(
      `VoiceCloner.prepare() for the library, en → es: ${Math.round(performance.now() - started)} ms`,
    );

    const wavs = sharedPath("data", "speech", "ljspeech", "wavs");
    const files = readdirSync(wavs)
      .filter((f) => f.endsWith(".wav"))
      .sort()
      .slice(0, 12);
    const parts = [];
    for (const file of files)
      parts.push(analyzeVoice(toFloat(await readWavAsPcm16(path.join(wavs, file))), 16_000));
    lj = summarizeVoice(parts)!;
    jfk = measureVoice(
      toFloat(await readWavAsPcm16(sharedPath("data", "speech", "misc", "jfk.wav"))),
      16_000,
    )!;
    console.info(
      `LJSpeech: F0 ${lj.medianF0Hz.toFixed(0)} Hz, ΔF ${lj.formantSpacingHz?.toFixed(0)} Hz; ` +
        `JFK: F0 ${jfk.medianF0Hz.toFixed(0)} Hz, ΔF ${jfk.formantSpacingHz?.toFixed(0)} Hz`,
    );
  });
  afterAll(async () => {
    await engine?.close();
    if (measurementsDir) await rm(measurementsDir, { recursive: true, force: true });
  });

  /** Median F0 of `voice` reading a Spanish sentence. */
  const spanishF0 = async (voice: Voice) => (await speak(engine, voice, [SPANISH], "es")).medianF0Hz;

  it("measures the speakers' pitch where a woman and a (shouting) man put it", () => {
    expect(lj.medianF0Hz).toBeGreaterThan(190);
    expect(lj.medianF0Hz).toBeLessThan(260);
    // JFK's inaugural address: a man at a woman's F0, with a man's vocal tract.
    expect(jfk.medianF0Hz).toBeGreaterThan(200);
    expect(jfk.formantSpacingHz!).toBeLessThan(lj.formantSpacingHz! * 0.9);
  });

  it("gives the LJSpeech reader a female voice pitched toward her", async () => {
    const voice = cloner.match(lj)!;
    const library = findVoice(voice.id)!;
    expect(voice.gender).toBe("female");
    expect(voice.strongAccent).toBe(false);
    expect(voice.name).toBe(library.name);
    const adjusted = await spanishF0(voice);
    const unadjusted = await spanishF0(library);
    expect(semitones(adjusted, lj.medianF0Hz)).toBeLessThan(1);
    expect(semitones(adjusted, lj.medianF0Hz)).toBeLessThan(semitones(unadjusted, lj.medianF0Hz));
  });

  it("gives JFK a male voice, raised toward his pitch", async () => {
    const voice = cloner.match(jfk)!;
    const library = findVoice(voice.id)!;
    expect(voice.gender).toBe("male");
    expect(voice.timbre.pitch).toBeGreaterThan(library.timbre.pitch);
    expect(await spanishF0(voice)).toBeGreaterThan((await spanishF0(library)) * 1.2);
  });

  // FLEURS's men measure a woman's formant spacing (up to 1395 Hz) at a man's pitch (100–118 Hz).
  it.skipIf(sharedMissing("data", "speech", "fleurs-dev"))(
    "gives every man of the test speech a male voice and every woman a female one",
    async () => {
      for (const person of Object.keys(SPEAKERS) as SpeakerName[]) {
        const clips = await clipsOf(person);
        const profile = summarizeVoice(clips.map((clip) => analyzeVoice(toFloat(clip), 16_000)))!;
        expect(cloner.match(profile)!.gender, person).toBe(SPEAKERS[person].gender);
      }
    },
  );

  it("follows the speaker's articulation rate", async () => {
    // Speakers whose rate is known: eSpeak NG's own default male voice at rate 0.8 and 1.25.
    const texts = [REFERENCE_SENTENCES.en!, ...ENGLISH];
    const factors = [];
    for (const rate of [0.8, 1.25]) {
      const speaker = await speak(engine, withTimbre(findVoice(36)!, { rate }), texts);
      const voice = cloner.match(speaker)!;
      const factor = voice.timbre.rate / findVoice(voice.id)!.timbre.rate;
      expect(Math.abs(factor - rate), `rate ${rate}`).toBeLessThan(0.15);
      factors.push(factor);
    }
    expect(factors[1]! / factors[0]!).toBeGreaterThan(1.3);
  });

  it("returns the same voice object for the same adjustments and never an accented voice", () => {
    expect(cloner.match({ ...lj })).toBe(cloner.match(lj));
    for (let f0 = 70; f0 <= 320; f0 *= 1.12) {
      for (const formantSpacingHz of [900, 1000, 1100, 1200, 1300]) {
        const voice = cloner.match({ ...lj, medianF0Hz: f0, formantSpacingHz })!;
        expect(voice.strongAccent).toBe(false);
        expect(VOICES.find((v) => v.id === voice.id)?.strongAccent).toBe(false);
        expect(voice.timbre.pitch).toBeGreaterThanOrEqual(0);
        expect(voice.timbre.pitch).toBeLessThanOrEqual(99);
        expect(Number.isInteger(voice.timbre.pitch)).toBe(true);
        expect(voice.timbre.rate).toBeGreaterThanOrEqual(0.75);
        expect(voice.timbre.rate).toBeLessThanOrEqual(1.4);
      }
    }
  });

  it("keeps its measurements for the next process: a cloner on the same directory synthesizes nothing", async () => {
    const tts = counting(engine);
    const store = new VoiceMeasurementStore(measurementsDir);
    const next = new VoiceCloner(tts, { sourceLanguage: "en", targetLanguage: "es", store });
    await next.prepare();
    expect(tts.requests).toHaveLength(0);
    for (const speaker of [lj, jfk]) expect(next.match(speaker)).toEqual(cloner.match(speaker));
  });

  it("shares one cloner per engine and language pair", () => {
    expect(voiceClonerFor(engine, "en", "es")).toBe(cloner);
    expect(voiceClonerFor(engine, "es", "en")).not.toBe(cloner);
  });

  it("answers undefined until prepared, starts preparing, and runs one preparation for concurrent calls", async () => {
    // Three f3 and two m3 voices: enough same-variant pairs for the pitch slope; Isla is accented.
    const voices = [1, 17, 31, 36, 58, 34].map((id) => findVoice(id)!);
    const tts = counting(engine);
    const small = new VoiceCloner(tts, { sourceLanguage: "en", targetLanguage: "es", voices });
    expect(small.match(lj)).toBeUndefined();
    const [a, b] = [small.prepare(), small.prepare()];
    expect(a).toBe(b);
    await Promise.all([a, b, small.prepare()]);
    // Five candidates in Spanish plus the rate reference in English, once.
    expect(tts.requests.map((r) => r.language).sort()).toEqual(["en", "es", "es", "es", "es", "es"]);
    expect(tts.requests.some((r) => r.voice.id === 34)).toBe(false);
    expect(small.match(lj)!.gender).toBe("female");
  });

  it("measures a second pitch when no variant repeats, and still moves pitch toward the speaker", async () => {
    // Four low female voices with four different variants: no within-variant pitch comparison.
    const voices = [20, 28, 29, 32].map((id) => findVoice(id)!);
    const tts = counting(engine);
    const low = new VoiceCloner(tts, { sourceLanguage: "en", targetLanguage: "es", voices });
    await low.prepare();
    expect(tts.requests).toHaveLength(4 + 4 + 1);
    const voice = low.match(lj)!;
    const library = findVoice(voice.id)!;
    expect(voice.timbre.pitch).toBeGreaterThan(library.timbre.pitch);
    const before = semitones(await spanishF0(library), lj.medianF0Hz);
    const after = semitones(await spanishF0(voice), lj.medianF0Hz);
    expect(before).toBeGreaterThan(2);
    expect(after).toBeLessThan(before / 2);
  });
});

describe.skipIf(noSpeech)("SpeakerProfiler on real speech", () => {
  it("profiles after 0.5 s of voiced speech and locks after 4 s", async () => {
    const wavs = sharedPath("data", "speech", "ljspeech", "wavs");
    const files = readdirSync(wavs)
      .filter((f) => f.endsWith(".wav"))
      .sort();
    const profiler = new SpeakerProfiler();
    let fed = 0;
    let first: VoiceFeatures | undefined;
    let firstAt = 0;
    for (const file of files) {
      const pcm = await readWavAsPcm16(path.join(wavs, file));
      // Utterance by utterance in 0.25 s pieces, the way a live session would hand them over.
      for (let start = 0; start < pcm.length && !profiler.locked; start += 4000) {
        profiler.observe(pcm.subarray(start, start + 4000));
        fed += Math.min(4000, pcm.length - start) / 16_000;
        if (fed < 0.5) expect(profiler.profile).toBeUndefined();
        if (profiler.profile && !first) [first, firstAt] = [profiler.profile, fed];
      }
      if (profiler.locked) break;
    }
    expect(first).toBeDefined();
    expect(first!.voicedSeconds).toBeGreaterThanOrEqual(0.5);
    expect(first!.voicedSeconds).toBeLessThan(2);
    expect(firstAt).toBeLessThan(3);
    expect(profiler.locked).toBe(true);
    const locked = profiler.profile!;
    expect(locked.voicedSeconds).toBeGreaterThanOrEqual(4);
    expect(fed).toBeLessThan(15);
    // The locked profile agrees with a whole-file analysis of the same reader.
    const reference = measureVoice(toFloat(await readWavAsPcm16(path.join(wavs, files[2]!))), 16_000)!;
    expect(semitones(locked.medianF0Hz, reference.medianF0Hz)).toBeLessThan(1.5);
    expect(semitones(locked.formantSpacingHz!, reference.formantSpacingHz!)).toBeLessThan(1);

    // Locked: further speech (even another speaker) changes nothing.
    profiler.observe(await readWavAsPcm16(sharedPath("data", "speech", "misc", "jfk.wav")));
    expect(profiler.profile).toBe(locked);
  });
});
