import { readdirSync } from "node:fs";
import { beforeAll, describe, expect, it } from "vitest";
import { readWavAsPcm16 } from "../../src/audio/wav.js";
import type { LanguageCode, Voice } from "../../src/core/contracts.js";
import { MAX_SPEAKERS } from "../../src/speakers/tracker.js";
import { fixedVoice, MatchedVoices } from "../../src/speakers/voice-choice.js";
import { defaultVoice, VOICES } from "../../src/voices/library.js";
import type { VoiceFeatures } from "../../src/voices/voice-features.js";
import { SHARED_DIR, sharedMissing } from "../support/shared.js";

const RATE = 16_000;
/** Speech is handed over in 250 ms pieces, as the live pipeline does. */
const PIECE = RATE / 4;

describe("fixedVoice", () => {
  it("gives every speaker the one voice, never as matched", () => {
    const voice = VOICES[5]!;
    const chooser = fixedVoice(voice);
    chooser.observe("1", new Int16Array(RATE).fill(1000));
    for (const speaker of [undefined, "1", "2"])
      for (const language of ["es", "fr"])
        expect(chooser.voiceFor(speaker, language)).toEqual({ voice, matched: false });
    expect(chooser.voiceFor("1", "es").voice).toBe(voice);
  });
});

const SPEECH = "data/speech";
const MAN_DIR = `${SPEECH}/librivox-pocketsphinx`;
const WOMAN_DIR = `${SPEECH}/ljspeech/wavs`;

describe.skipIf(sharedMissing(MAN_DIR) || sharedMissing(WOMAN_DIR))("MatchedVoices (real speech)", () => {
  /** About 10 s of one man (LibriVox reader, F0 near 100 Hz) and one woman (LJSpeech, near 200 Hz). */
  let man: Int16Array;
  let woman: Int16Array;

  async function firstClips(dir: string, filter: (file: string) => boolean): Promise<Int16Array> {
    const files = readdirSync(`${SHARED_DIR}/${dir}`).filter(filter).sort().slice(0, 2);
    const clips = await Promise.all(files.map((file) => readWavAsPcm16(`${SHARED_DIR}/${dir}/${file}`)));
    const pcm = new Int16Array(clips.reduce((sum, clip) => sum + clip.length, 0));
    let at = 0;
    for (const clip of clips) {
      pcm.set(clip, at);
      at += clip.length;
    }
    return pcm;
  }

  beforeAll(async () => {
    man = await firstClips(MAN_DIR, (file) => file.startsWith("sense_and_sensibility"));
    woman = await firstClips(WOMAN_DIR, (file) => file.endsWith(".wav"));
    expect(man.length).toBeGreaterThan(10 * RATE);
    expect(woman.length).toBeGreaterThan(10 * RATE);
  });

  const FALLBACK = defaultVoice("female");
  const males = VOICES.filter((v) => v.gender === "male");
  const females = VOICES.filter((v) => v.gender === "female");

  /**
   * A matcher double: a library voice of the gender asked for, else male for speakers below 165 Hz
   * and female above. Each `switchMatch()` makes it answer with other voices, as a matcher following
   * a firming profile might.
   */
  function chooser() {
    let generation = 1;
    const fallbacks: (VoiceFeatures | undefined)[] = [];
    const matches: [VoiceFeatures, LanguageCode, Voice["gender"] | undefined][] = [];
    let ready = true;
    const voices = new MatchedVoices({
      match: (speaker, language, gender) => {
        matches.push([speaker, language, gender]);
        if (!ready) return undefined;
        const family = gender ?? (speaker.medianF0Hz < 165 ? "male" : "female");
        return (family === "male" ? males : females)[generation]!;
      },
      fallback: (speaker) => {
        fallbacks.push(speaker);
        return FALLBACK;
      },
    });
    return {
      voices,
      fallbacks,
      matches,
      switchMatch: () => void generation++,
      setReady: (value: boolean) => void (ready = value),
      /** Hands `pcm` from `from` to `to` seconds to the chooser in 250 ms pieces. */
      observe(speaker: string | undefined, pcm: Int16Array, from: number, to: number) {
        for (let at = Math.round(from * RATE); at < Math.round(to * RATE); at += PIECE)
          voices.observe(speaker, pcm.subarray(at, Math.min(at + PIECE, Math.round(to * RATE))));
      },
    };
  }

  it("uses the fallback, unmatched, until the speaker has a profile, then their matched voice", () => {
    const c = chooser();
    // nothing heard yet
    expect(c.voices.voiceFor("1", "es")).toEqual({ voice: FALLBACK, matched: false });
    expect(c.fallbacks).toEqual([undefined]);
    // 0.3 s of speech is no profile yet
    c.observe("1", man, 0, 0.3);
    expect(c.voices.voiceFor("1", "es")).toEqual({ voice: FALLBACK, matched: false });
    expect(c.fallbacks).toEqual([undefined, undefined]);
    expect(c.matches).toEqual([]);
    // a match within about a second of speech (0.5 s of it voiced)
    let heard = 0.3;
    let matchedAt: number | undefined;
    for (const to of [0.5, 0.75, 1, 1.25, 1.5]) {
      c.observe("1", man, heard, to);
      heard = to;
      if (matchedAt === undefined && c.voices.voiceFor("1", "es").matched) matchedAt = to;
    }
    expect(matchedAt).toBeDefined();
    expect(matchedAt).toBeLessThanOrEqual(1.5);
    expect(c.voices.voiceFor("1", "es")).toEqual({ voice: males[1], matched: true });
    // the matcher was given the measured profile and the language
    const [features, language] = c.matches.at(-1)!;
    expect(language).toBe("es");
    expect(features.medianF0Hz).toBeLessThan(165);
    expect(features.voicedSeconds).toBeGreaterThanOrEqual(0.5);
  });

  it("keeps the fallback (given the profile) while the matcher is not ready", () => {
    const c = chooser();
    c.setReady(false);
    c.observe("1", woman, 0, 2);
    expect(c.voices.voiceFor("1", "es")).toEqual({ voice: FALLBACK, matched: false });
    const profile = c.fallbacks.at(-1);
    expect(profile?.medianF0Hz).toBeGreaterThan(165);
    c.setReady(true);
    expect(c.voices.voiceFor("1", "es")).toEqual({ voice: females[1], matched: true });
  });

  it("follows the matcher while the profile firms up, and locks the voice per language once it is firm", () => {
    const c = chooser();
    c.observe("1", man, 0, 3);
    expect(c.voices.voiceFor("1", "es").voice).toBe(males[1]);
    // not locked yet: a new answer of the matcher applies
    c.switchMatch();
    expect(c.voices.voiceFor("1", "es")).toEqual({ voice: males[2], matched: true });
    // about 4 s of voiced speech (10 s of this reading) locks the profile: the next choice is kept
    c.observe("1", man, 3, 10);
    const locked = c.voices.voiceFor("1", "es");
    expect(locked).toEqual({ voice: males[2], matched: true });
    c.switchMatch();
    const asked = c.matches.length;
    c.observe("1", man, 10, man.length / RATE);
    expect(c.voices.voiceFor("1", "es").voice).toBe(locked.voice);
    expect(c.voices.voiceFor("1", "es").matched).toBe(true);
    expect(c.matches.length).toBe(asked);
    // another language is matched (and locked) on its own
    expect(c.voices.voiceFor("1", "fr")).toEqual({ voice: males[3], matched: true });
    c.switchMatch();
    expect(c.voices.voiceFor("1", "fr").voice).toBe(males[3]);
    expect(c.voices.voiceFor("1", "es").voice).toBe(males[2]);
  });

  it("tracks speakers independently", () => {
    const c = chooser();
    for (let second = 0; second < 3; second++) {
      c.observe("1", man, second, second + 1);
      c.observe("2", woman, second, second + 1);
    }
    expect(c.voices.voiceFor("1", "es")).toEqual({ voice: males[1], matched: true });
    expect(c.voices.voiceFor("2", "es")).toEqual({ voice: females[1], matched: true });
    expect(c.voices.voiceFor("3", "es")).toEqual({ voice: FALLBACK, matched: false });
    expect(c.voices.voiceFor(undefined, "es")).toEqual({ voice: FALLBACK, matched: false });
    // speaker 1's profile locks; speaker 2's does not
    c.observe("1", man, 3, 10);
    expect(c.voices.voiceFor("1", "es").voice).toBe(males[1]);
    c.switchMatch();
    expect(c.voices.voiceFor("1", "es").voice).toBe(males[1]);
    expect(c.voices.voiceFor("2", "es").voice).toBe(females[2]);
  });

  // A tracker that merged a woman into a man's label, or a profile that firms up across the
  // boundary between the genders: the speaker's voice family was decided by the first match.
  it("keeps the gender of a speaker's first matched voice for good, in every language", () => {
    const c = chooser();
    c.observe("1", man, 0, 1.5);
    expect(c.voices.voiceFor("1", "es")).toEqual({ voice: males[1], matched: true });
    expect(c.matches.at(-1)![2]).toBeUndefined();
    // the woman's speech under the man's label takes the profile into her range, before it locks
    c.observe("1", woman, 0, 6);
    expect(c.voices.voiceFor("1", "es").voice.gender).toBe("male");
    expect(c.voices.voiceFor("1", "fr").voice.gender).toBe("male");
    expect(c.matches.at(-1)![0].medianF0Hz).toBeGreaterThan(165);
    expect(c.matches.at(-1)![2]).toBe("male");
    // while the matcher cannot answer, the default voice of that gender, not the fallback
    c.setReady(false);
    expect(c.voices.voiceFor("1", "de")).toEqual({ voice: defaultVoice("male"), matched: false });
    expect(FALLBACK.gender).toBe("female");
  });

  it(`follows at most MAX_SPEAKERS (${MAX_SPEAKERS}) speakers: later labels keep the fallback`, () => {
    const c = chooser();
    for (let label = 1; label <= MAX_SPEAKERS + 2; label++) c.observe(String(label), woman, 0, 1.5);
    for (let label = 1; label <= MAX_SPEAKERS; label++)
      expect(c.voices.voiceFor(String(label), "es")).toEqual({ voice: females[1], matched: true });
    for (const label of [MAX_SPEAKERS + 1, MAX_SPEAKERS + 2]) {
      c.observe(String(label), woman, 1.5, 4);
      expect(c.voices.voiceFor(String(label), "es")).toEqual({ voice: FALLBACK, matched: false });
    }
    expect(c.fallbacks.at(-1)).toBeUndefined();
  });
});
