import { existsSync } from "node:fs";
import { copyFile, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSvoxPicoEngine } from "../../src/engines/svox-pico/index.js";
import { picoMarkup, picoPitchLevel, picoSpeedLevel } from "../../src/engines/svox-pico/markup.js";
import type { TtsEngine } from "../../src/core/contracts.js";
import { defaultVoice, findVoice, VOICES } from "../../src/voices/library.js";
import { SHARED_DIR } from "../support/shared.js";
import { medianPitch, rms, seconds } from "../support/audio-measures.js";

const LINGWARE_DIR = path.join(SHARED_DIR, "models", "svox-pico");
const HAVE_LINGWARE = existsSync(LINGWARE_DIR);
if (!HAVE_LINGWARE)
  console.warn(`[tts-svox-pico] skipping engine tests: no SVOX Pico lingware in ${LINGWARE_DIR}`);

const SENTENCES: Readonly<Record<string, string>> = {
  en: "The weather is lovely today, so we are going for a walk in the park.",
  de: "Das Wetter ist heute herrlich, also gehen wir im Park spazieren.",
  es: "Hoy hace un tiempo estupendo, así que vamos a pasear por el parque.",
  fr: "Il fait très beau aujourd'hui, alors nous allons nous promener au parc.",
  it: "Oggi il tempo è bellissimo, quindi andiamo a fare una passeggiata nel parco.",
};

describe("SVOX Pico markup", () => {
  it("maps eSpeak pitch steps and rate factors to Pico levels", () => {
    expect(picoPitchLevel(50)).toBe(100);
    expect(picoPitchLevel(90)).toBe(141);
    expect(picoPitchLevel(10)).toBe(71);
    expect(picoPitchLevel(500)).toBe(200);
    expect(picoSpeedLevel(1)).toBe(100);
    expect(picoSpeedLevel(0.9)).toBe(90);
    expect(picoSpeedLevel(0)).toBe(20);
  });

  it("wraps text in prosody tags and never lets text open a tag", () => {
    const timbre = findVoice(17)!.timbre;
    expect(picoMarkup("Hello", timbre)).toBe('<speed level="108"><pitch level="111">Hello</pitch></speed>');
    const markup = picoMarkup('<speed level="500">fast</speed>\u0001', timbre)!;
    expect(markup.match(/</g)).toHaveLength(4);
    expect(picoMarkup(" <> \n", timbre)).toBeUndefined();
  });
});

describe("SVOX Pico engine errors", () => {
  it("names the missing files when the lingware directory does not exist", async () => {
    await expect(createSvoxPicoEngine({ lingwareDir: "/nonexistent/svox-pico" })).rejects.toThrow(
      /\/nonexistent\/svox-pico .*en-US_ta\.bin \+ en-US_lh0_sg\.bin/,
    );
  });

  it("names the missing files when no language is complete", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "pico-"));
    try {
      await expect(createSvoxPicoEngine({ lingwareDir: dir })).rejects.toThrow(
        /missing: en-US_ta\.bin, en-US_lh0_sg\.bin/,
      );
    } finally {
      await rm(dir, { recursive: true });
    }
  });

  it.skipIf(!HAVE_LINGWARE)("declares only the languages whose lingware pair is present", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "pico-"));
    try {
      for (const file of ["it-IT_ta.bin", "it-IT_cm0_sg.bin", "de-DE_ta.bin"]) {
        await copyFile(path.join(LINGWARE_DIR, file), path.join(dir, file));
      }
      const engine = await createSvoxPicoEngine({ lingwareDir: dir });
      try {
        expect(engine.capabilities.languages).toEqual(["it"]);
        expect(engine.info.version).toMatch(/\+it-IT$/);
      } finally {
        await engine.close();
      }
    } finally {
      await rm(dir, { recursive: true });
    }
  });
});

describe.skipIf(!HAVE_LINGWARE)("SVOX Pico engine (WASM, real lingware)", () => {
  let engine: TtsEngine;

  beforeAll(async () => {
    engine = await createSvoxPicoEngine({ lingwareDir: LINGWARE_DIR });
  });

  afterAll(async () => {
    await engine?.close();
  });

  it("declares the languages of its lingware", () => {
    expect(engine.info.id).toBe("svox-pico");
    expect(engine.capabilities.languages).toEqual(["de", "en", "es", "fr", "it"]);
  });

  it.each(Object.entries(SENTENCES))(
    "speaks %s as non-silent audio of plausible length",
    async (language, text) => {
      const audio = await engine.synthesize({ text, language, voice: defaultVoice("female") });
      expect(audio.sampleRate).toBe(16000);
      expect(seconds(audio)).toBeGreaterThan(0.5);
      expect(seconds(audio)).toBeLessThan(10);
      expect(rms(audio.samples)).toBeGreaterThan(0.02);
      // Pico's speakers are female: the F0 sits in the female range.
      expect(medianPitch(audio)).toBeGreaterThan(140);
      expect(medianPitch(audio)).toBeLessThan(300);
    },
  );

  it("renders a voice's pitch and rate through Pico markup", async () => {
    const text = SENTENCES.en!;
    const emma = await engine.synthesize({ text, language: "en", voice: findVoice(1)! }); // pitch 50, rate 1
    const yuki = await engine.synthesize({ text, language: "en", voice: findVoice(17)! }); // pitch 62, rate 1.08
    expect(medianPitch(yuki)).toBeGreaterThan(medianPitch(emma) * 1.05);
    expect(seconds(yuki)).toBeLessThan(seconds(emma) * 0.97);
  });

  it("uses British English for a voice with a British accent", async () => {
    const isla = VOICES.find((v) => v.timbre.accentLocales?.en?.startsWith("en-gb"))!;
    const plain = { ...isla, strongAccent: false, timbre: { ...isla.timbre, accentLocales: undefined } };
    const text = "I would like a glass of water, please.";
    const british = await engine.synthesize({ text, language: "en", voice: isla });
    const american = await engine.synthesize({ text, language: "en", voice: plain });
    expect(rms(british.samples)).toBeGreaterThan(0.02);
    expect(british.samples.length).not.toBe(american.samples.length);
  });

  it("speaks markup-like text as text", async () => {
    const text = 'Say <speed level="500"> this "; rm -rf / <speak> slowly </speed> please.';
    const audio = await engine.synthesize({ text, language: "en", voice: defaultVoice("female") });
    const plain = await engine.synthesize({
      text: "Say speed level 500 this rm rf speak slowly speed please.",
      language: "en",
      voice: defaultVoice("female"),
    });
    // A 5x speed tag taking effect would make the utterance far shorter than the plain reading.
    expect(seconds(audio)).toBeGreaterThan(seconds(plain) * 0.6);
  });

  it("rejects a language without lingware", async () => {
    await expect(
      engine.synthesize({ text: "hola", language: "pt", voice: defaultVoice("female") }),
    ).rejects.toThrow(/SVOX Pico cannot speak language "pt"/);
  });

  it("serves concurrent requests one after another without mixing them", async () => {
    const voice = defaultVoice("female");
    const german = await engine.synthesize({ text: SENTENCES.de!, language: "de", voice });
    const french = await engine.synthesize({ text: SENTENCES.fr!, language: "fr", voice });
    const [a, b, c] = await Promise.all([
      engine.synthesize({ text: SENTENCES.de!, language: "de", voice }),
      engine.synthesize({ text: SENTENCES.fr!, language: "fr", voice }),
      engine.synthesize({ text: SENTENCES.de!, language: "de", voice }),
    ]);
    // Pico's unvoiced excitation is random noise, so samples differ run to run; lengths do not.
    expect(a!.samples.length).toBe(german.samples.length);
    expect(b!.samples.length).toBe(french.samples.length);
    expect(c!.samples.length).toBe(german.samples.length);
  });
});
