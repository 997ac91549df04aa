import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  kokoroSpeakers,
  MAX_PROFILED,
  speakerMap,
  type ModelSpeakers,
} from "../../src/engines/sherpa-onnx/voice-speakers.js";
import { VOICES } from "../../src/voices/library.js";
import { VoiceMeasurementStore } from "../../src/voices/measurement-store.js";

const RATE = 16_000;
/** Two seconds of a voiced tone at `hz` with a syllable-rate envelope: what voice-features measures as speech. */
function tone(hz: number): Float32Array {
  return Float32Array.from({ length: 2 * RATE }, (_, i) => {
    const t = i / RATE;
    const envelope = 0.5 + 0.5 * Math.sin(2 * Math.PI * 4 * t);
    return 0.3 * envelope * (Math.sin(2 * Math.PI * hz * t) + 0.5 * Math.sin(4 * Math.PI * hz * t));
  });
}

/** A model whose speaker `id` speaks at 100 + 30·id Hz: ids 0–1 men, 2 and up women. */
function sampler() {
  const calls: number[] = [];
  return {
    calls,
    sample: async (_model: string, id: number) => {
      calls.push(id);
      return { samples: tone(100 + 30 * id), sampleRate: RATE };
    },
  };
}

const model = (speakers: number, extra: Partial<ModelSpeakers> = {}): ModelSpeakers => ({
  name: "voice",
  languages: ["en"],
  speakers,
  version: "1",
  ...extra,
});
const female = VOICES.filter((v) => v.gender === "female");
const male = VOICES.filter((v) => v.gender === "male");

let dir: string | undefined;
afterEach(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
  dir = undefined;
});

describe("library voices on neural speakers", () => {
  it("gives each voice a speaker of its gender, the first voice the first speaker, spread over the rest", async () => {
    const { sample } = sampler();
    const map = await speakerMap({ models: [model(6)], store: undefined, sample });
    expect(map.speakerFor("en", female[0]!).id).toBe(2);
    expect(map.speakerFor("en", male[0]!).id).toBe(0);
    const womenUsed = new Set(female.map((voice) => map.speakerFor("en", voice).id));
    expect(womenUsed).toEqual(new Set([2, 3, 4, 5]));
    // An adjusted copy of a library voice (voice matching) keeps its speaker.
    const adjusted = { ...female[7]!, timbre: { ...female[7]!.timbre, rate: 1.2 } };
    expect(map.speakerFor("en", adjusted)).toEqual(map.speakerFor("en", female[7]!));
    expect(() => map.speakerFor("fr", female[0]!)).toThrow(/no voice for language "fr"/u);
  });

  it("speaks both genders' voices with the one gender a language has", async () => {
    const map = await speakerMap({
      models: [model(1, { genders: ["female"] })],
      store: undefined,
      ...sampler(),
    });
    expect(map.speakerFor("en", male[3]!)).toMatchObject({ id: 0, gender: "female" });
  });

  it("measures a model once, keeps it in the store, and again when the model changes", async () => {
    dir = await mkdtemp(path.join(tmpdir(), "relay-speaker-map-"));
    const store = new VoiceMeasurementStore(dir);
    const first = sampler();
    await speakerMap({ models: [model(4)], store, sample: first.sample });
    expect(first.calls).toEqual([0, 1, 2, 3]);
    const again = sampler();
    const map = await speakerMap({ models: [model(4)], store, sample: again.sample });
    expect(again.calls).toEqual([]);
    expect(map.speakerFor("en", female[0]!).id).toBe(2);
    const rebuilt = sampler();
    await speakerMap({ models: [model(4, { version: "2" })], store, sample: rebuilt.sample });
    expect(rebuilt.calls).toEqual([0, 1, 2, 3]);
  });

  it(`measures at most ${MAX_PROFILED} speakers of a large model, evenly spread`, async () => {
    const { calls, sample } = sampler();
    await speakerMap({ models: [model(904)], store: undefined, sample });
    expect(calls).toHaveLength(MAX_PROFILED);
    expect(calls[1]! - calls[0]!).toBe(Math.floor(904 / MAX_PROFILED));
  });

  it("takes Kokoro's speakers' language and gender from their names, measuring nothing", async () => {
    const { calls, sample } = sampler();
    const named = kokoroSpeakers("af_alloy,am_adam,bf_emma,zf_xiaobei,ef_dora,unnamed");
    expect(named.map((s) => [s.id, s.language, s.gender, s.lang])).toEqual([
      [0, "en", "female", "en-us"],
      [1, "en", "male", "en-us"],
      [2, "en", "female", "en-gb"],
      [3, "zh", "female", "en-us"],
    ]);
    const map = await speakerMap({
      models: [model(6, { languages: ["en", "zh"], named })],
      store: undefined,
      sample,
    });
    expect(calls).toEqual([]);
    expect(map.languages()).toEqual(["en", "zh"]);
    expect(map.speakerFor("zh", male[0]!)).toMatchObject({ id: 3, lang: "en-us" });
    expect(map.speakerFor("en", male[0]!)).toMatchObject({ id: 1, lang: "en-us" });
  });
});
