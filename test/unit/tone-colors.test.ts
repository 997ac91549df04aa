/**
 * Each speaker's tone colour (src/speakers/tone-colors.ts) and the own-voice speech it drives
 * (src/pipeline/speech-output.ts), over a converter double that records what it is asked: when a
 * tone colour is first extracted and refined, what speech it rests on, its bounds, and that a
 * converter that fails never costs a line its speech.
 */
import { describe, expect, it } from "vitest";
import { EngineBusyError } from "../../src/core/busy.js";
import type { SynthesizedAudio, ToneColor, ToneColorEngine, TtsEngine } from "../../src/core/contracts.js";
import { renderOwnVoice } from "../../src/pipeline/speech-output.js";
import { ClonedVoices, REFERENCE_SECONDS, SpeakerToneColors } from "../../src/speakers/tone-colors.js";
import { fixedVoice } from "../../src/speakers/voice-choice.js";
import { MAX_SPEAKERS } from "../../src/speakers/tracker.js";
import { defaultVoice } from "../../src/voices/library.js";

const RATE = 16_000;

/** A converter double: a tone colour is the mean of the speech it was made from and its length. */
function converterDouble(options: { fail?: "extract" | "convert" } = {}) {
  const extractions: number[] = [];
  const engine: ToneColorEngine = {
    info: { id: "double", version: "1" },
    capabilities: { sampleRate: 22_050, minSeconds: 3 },
    async toneColor(audio) {
      if (options.fail === "extract") throw new EngineBusyError("busy");
      extractions.push(audio.samples.length / audio.sampleRate);
      const mean = audio.samples.reduce((sum, v) => sum + v, 0) / audio.samples.length;
      return { vector: Float32Array.of(mean), seconds: audio.samples.length / audio.sampleRate };
    },
    // Two pieces, each the target's first value; `fail: "convert"` fails the second.
    async *convert(audio, target) {
      const half = Math.floor(audio.samples.length / 2);
      yield { samples: new Float32Array(half).fill(target.vector[0]!), sampleRate: audio.sampleRate };
      if (options.fail === "convert") throw new EngineBusyError("busy");
      const rest = audio.samples.length - half;
      yield { samples: new Float32Array(rest).fill(target.vector[0]!), sampleRate: audio.sampleRate };
    },
    close: async () => undefined,
  };
  return { engine, extractions };
}

/** `seconds` of speech at a constant level. */
const speech = (seconds: number, level = 0.25) =>
  new Int16Array(Math.round(seconds * RATE)).fill(Math.round(level * 32_767));

const settled = () => new Promise((resolve) => setTimeout(resolve, 0));

describe("SpeakerToneColors", () => {
  it("extracts a speaker's tone colour after 3 s of their speech, then again at twice as much", async () => {
    const { engine, extractions } = converterDouble();
    const colors = new SpeakerToneColors(engine);
    for (let i = 0; i < 5; i++) {
      colors.observe("1", speech(1));
      await settled();
    }
    expect(colors.of("1")?.seconds).toBeCloseTo(3, 5);
    for (let i = 0; i < 8; i++) {
      colors.observe("1", speech(1));
      await settled();
    }
    // 3 s, then 6 s and 12 s: refined as more arrives, each time from all of it.
    expect(extractions.map((s) => Math.round(s))).toEqual([3, 6, 12]);
    expect(colors.of("2")).toBeUndefined();
  });

  it("keeps each speaker's own speech apart, and at most REFERENCE_SECONDS of it", async () => {
    const { engine, extractions } = converterDouble();
    const colors = new SpeakerToneColors(engine);
    colors.observe("1", speech(3, 0.5));
    colors.observe("2", speech(3, -0.5));
    await settled();
    expect(colors.of("1")!.vector[0]).toBeCloseTo(0.5, 3);
    expect(colors.of("2")!.vector[0]).toBeCloseTo(-0.5, 3);
    colors.observe("1", speech(60));
    await settled();
    await colors.settle();
    expect(Math.max(...extractions)).toBeLessThanOrEqual(REFERENCE_SECONDS);
  });

  it("follows at most MAX_SPEAKERS speakers", async () => {
    const { engine } = converterDouble();
    const colors = new SpeakerToneColors(engine);
    for (let i = 0; i <= MAX_SPEAKERS; i++) colors.observe(String(i), speech(3));
    await colors.settle();
    expect(colors.of(String(MAX_SPEAKERS - 1))).toBeDefined();
    expect(colors.of(String(MAX_SPEAKERS))).toBeUndefined();
  });

  it("settle() gives every speaker a tone colour from all their speech (dubbing)", async () => {
    const { engine } = converterDouble();
    const colors = new SpeakerToneColors(engine);
    colors.observe(undefined, speech(3.5));
    colors.observe(undefined, speech(1));
    await colors.settle();
    expect(colors.of(undefined)?.seconds).toBeCloseTo(4.5, 5);
  });

  it("a busy converter leaves the speaker without a tone colour, and is asked again with more speech", async () => {
    let failing = true;
    const { engine } = converterDouble();
    const flaky: ToneColorEngine = {
      ...engine,
      toneColor: (audio, signal) =>
        failing ? Promise.reject(new EngineBusyError("busy")) : engine.toneColor(audio, signal),
    };
    const colors = new SpeakerToneColors(flaky);
    colors.observe("1", speech(3));
    await settled();
    expect(colors.of("1")).toBeUndefined();
    failing = false;
    colors.observe("1", speech(0.5));
    await settled();
    expect(colors.of("1")?.seconds).toBeCloseTo(3.5, 5);
  });

  it("close() forgets every speaker", async () => {
    const { engine } = converterDouble();
    const colors = new SpeakerToneColors(engine);
    colors.observe("1", speech(3));
    await colors.settle();
    colors.close();
    expect(colors.of("1")).toBeUndefined();
  });
});

describe("ClonedVoices", () => {
  it("gives the chosen voice, with the speaker's tone colour once it is ready", async () => {
    const { engine } = converterDouble();
    const voice = defaultVoice("male");
    const voices = new ClonedVoices(fixedVoice(voice), new SpeakerToneColors(engine));
    voices.observe("1", speech(1));
    expect(voices.voiceFor("1", "es")).toEqual({ voice, matched: false });
    voices.observe("1", speech(2));
    await settled();
    expect(voices.voiceFor("1", "es").voice).toBe(voice);
    expect(voices.voiceFor("1", "es").toneColor?.seconds).toBeCloseTo(3, 5);
    expect(voices.voiceFor("2", "es").toneColor).toBeUndefined();
  });
});

describe("renderOwnVoice", () => {
  const tts: TtsEngine = {
    info: { id: "tts-double", version: "1" },
    capabilities: {
      languages: ["es"],
      voices: [],
      sampleRate: 24_000,
    } as unknown as TtsEngine["capabilities"],
    async synthesize(): Promise<SynthesizedAudio> {
      return { samples: new Float32Array(24_000).fill(0.1), sampleRate: 24_000 };
    },
    close: async () => undefined,
  };
  const request = { text: "hola", language: "es", voice: defaultVoice("female") };
  const toneColor: ToneColor = { vector: Float32Array.of(0.5), seconds: 3 };
  const frames = async (converter: ToneColorEngine) => {
    const out: Float32Array[] = [];
    for await (const frame of renderOwnVoice(tts, request, { converter, toneColor })) out.push(frame);
    return out;
  };

  it("speaks the sentence converted to the speaker's tone colour", async () => {
    const out = await frames(converterDouble().engine);
    expect(out.length).toBeGreaterThan(0);
    expect(out[0]![960]).toBeCloseTo(0.5, 2);
  });

  it("speaks the rest in the library voice when the converter fails: the listener always gets the speech", async () => {
    const out = await frames(converterDouble({ fail: "convert" }).engine);
    const joined = Float32Array.from(out.flatMap((frame) => [...frame]));
    expect(joined.length / 24_000).toBeGreaterThanOrEqual(1);
    // The first half converted, the second the library voice, none of it lost.
    expect(joined[6_000]).toBeCloseTo(0.5, 2);
    expect(joined[18_000]).toBeCloseTo(0.1, 2);
  });
});
