/**
 * A man gets a man's voice (issue 30): the voice `voiceId=auto` and rooms' `clone` choose for real
 * recordings of men and women (test/support/conversations.ts says who they are), against a library
 * that measures as eSpeak NG's does, its measurements read from a store so no TTS runs.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TtsEngine, Voice } from "../../src/core/contracts.js";
import { MatchedVoices } from "../../src/speakers/voice-choice.js";
import { defaultVoice, VOICES } from "../../src/voices/library.js";
import {
  measurementKey,
  VoiceMeasurementStore,
  type StoredMeasurement,
} from "../../src/voices/measurement-store.js";
import { VoiceCloner } from "../../src/voices/voice-clone.js";
import { analyzeVoice, summarizeVoice, type VoiceFeatures } from "../../src/voices/voice-features.js";
import { clipsOf, SPEAKERS, type SpeakerName } from "../support/conversations.js";
import { sharedMissing } from "../support/shared.js";

const RATE = 16_000;
/** Speech is handed over in 250 ms pieces, as the live pipeline does. */
const PIECE = RATE / 4;

/**
 * eSpeak NG 1.51's library as the cloner measures it in Spanish: the medians of its female and male
 * voices (F0, formant spacing), each voice's F0 moved by its pitch setting at eSpeak NG's slope.
 */
const ESPEAK_LIKE = {
  female: { medianF0Hz: 209, formantSpacingHz: 1155 },
  male: { medianF0Hz: 101, formantSpacingHz: 1000 },
} as const;
const SEMITONES_PER_PITCH_STEP = 0.16;
const ENGINE = { id: "library-double", version: "1" };

/** What measuring `voice` would give. */
function measured(voice: Voice, rate = voice.timbre.rate): StoredMeasurement {
  const { medianF0Hz, formantSpacingHz } = ESPEAK_LIKE[voice.gender];
  return {
    medianF0Hz: medianF0Hz * 2 ** (((voice.timbre.pitch - 50) * SEMITONES_PER_PITCH_STEP) / 12),
    f0SpreadSemitones: 1.5,
    syllablesPerSecond: 5 * rate,
    voicedSeconds: 2,
    formantSpacingHz,
  };
}

/** A TTS that must not be needed: every measurement is in the store. */
const refusingTts: TtsEngine & { syntheses: number } = {
  syntheses: 0,
  info: ENGINE,
  capabilities: { languages: ["en", "es"] },
  synthesize() {
    refusingTts.syntheses++;
    return Promise.reject(new Error("the library's measurements are in the store"));
  },
  close: async () => {},
};

const toFloat = (pcm: Int16Array): Float32Array => Float32Array.from(pcm, (s) => s / 32768);
const PEOPLE = Object.keys(SPEAKERS) as SpeakerName[];

describe.skipIf(sharedMissing("data/speech/fleurs-dev") || sharedMissing("data/speech/ljspeech/wavs"))(
  "a man gets a man's voice (real recordings)",
  () => {
    let dir: string;
    let cloner: VoiceCloner;
    const profiles = new Map<SpeakerName, VoiceFeatures>();

    beforeAll(async () => {
      dir = await mkdtemp(path.join(tmpdir(), "voice-gender-"));
      const store = new VoiceMeasurementStore(dir);
      const entries = new Map(VOICES.map((voice) => [measurementKey(voice.timbre, "es"), measured(voice)]));
      // The TTS's own rate, measured in the speaker's language.
      const rateReference = defaultVoice("male");
      entries.set(measurementKey({ ...rateReference.timbre, rate: 1 }, "en"), measured(rateReference, 1));
      await store.write(ENGINE, entries);
      cloner = new VoiceCloner(refusingTts, { sourceLanguage: "en", targetLanguage: "es", store });
      await cloner.prepare();
      for (const person of PEOPLE) {
        const clips = await clipsOf(person);
        profiles.set(person, summarizeVoice(clips.map((clip) => analyzeVoice(toFloat(clip), RATE)))!);
      }
    });
    afterAll(async () => {
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    it("reads the library from the store", () => {
      expect(refusingTts.syntheses).toBe(0);
    });

    // The FLEURS men measure a woman's formant spacing (up to 1395 Hz) at a man's pitch (100–118 Hz);
    // JFK, a man raising his voice, a woman's pitch (247 Hz) with a man's formant spacing.
    it.each(PEOPLE)("gives %s a voice of their gender", (person) => {
      const profile = profiles.get(person)!;
      const voice = cloner.match(profile)!;
      const measures = `F0 ${profile.medianF0Hz.toFixed(0)} Hz, ΔF ${profile.formantSpacingHz?.toFixed(0)} Hz`;
      expect(voice.gender, measures).toBe(SPEAKERS[person].gender);
    });

    it.each(PEOPLE)("never gives %s a voice of the other gender as their profile grows", async (person) => {
      const voices = new MatchedVoices({
        match: (speaker, _language, gender) => cloner.match(speaker, gender),
        fallback: () => defaultVoice("female"),
      });
      const genders = new Set<Voice["gender"]>();
      for (const clip of await clipsOf(person)) {
        for (let at = 0; at < clip.length; at += PIECE) {
          voices.observe(person, clip.subarray(at, at + PIECE));
          const chosen = voices.voiceFor(person, "es");
          if (chosen.matched) genders.add(chosen.voice.gender);
        }
      }
      expect([...genders]).toEqual([SPEAKERS[person].gender]);
    });
  },
);
