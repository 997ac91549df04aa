import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { EngineRegistry } from "../../src/engines/routing/registry.js";
import type { SynthesisRequest, TtsEngine, VadEngine } from "../../src/core/contracts.js";
import { defaultVoice } from "../../src/voices/library.js";
import {
  measurementKey,
  VoiceMeasurementStore,
  type StoredMeasurement,
} from "../../src/voices/measurement-store.js";
import { voiceClonerFor } from "../../src/voices/voice-clone.js";

const RATE = 16_000;

const vad: VadEngine = {
  info: { id: "vad-double", version: "test" },
  capabilities: { sampleRate: RATE, windowSamples: 512 },
  createStream: () => ({ probability: async () => 0 }),
  close: async () => {},
};

/**
 * A TTS double whose speech the voice analysis can measure: a harmonic tone in syllable-like bursts
 * (4 per second), its F0 following the voice's gender and pitch as a real engine's does. It counts
 * its syntheses, which is what measuring the library costs.
 */
function measurableTts(id: string, version: string): TtsEngine & { syntheses: number } {
  const engine = {
    syntheses: 0,
    info: { id, version },
    capabilities: { languages: ["en", "es"] },
    async synthesize({ voice }: SynthesisRequest) {
      engine.syntheses++;
      const base = voice.gender === "female" ? 200 : 110;
      const f0 = base * 2 ** (((voice.timbre.pitch - 50) * 0.16) / 12);
      const samples = new Float32Array(RATE);
      let phase = 0;
      for (let i = 0; i < samples.length; i++) {
        const t = i / RATE;
        phase += (2 * Math.PI * f0) / RATE;
        let tone = 0;
        for (let k = 1; k <= 12; k++) tone += Math.sin(k * phase) / k;
        const syllable = Math.max(0, Math.sin(2 * Math.PI * 4 * voice.timbre.rate * t));
        samples[i] = 0.2 * tone * syllable;
      }
      return { samples, sampleRate: RATE };
    },
    close: async () => {},
  };
  return engine;
}

const FEATURES: StoredMeasurement = {
  medianF0Hz: 118.5,
  f0SpreadSemitones: 1.25,
  syllablesPerSecond: 4.1,
  voicedSeconds: 1.2,
  formantSpacingHz: 1010,
};
const VOICE = defaultVoice("male");
const ENGINE = { id: "espeak-ng", version: "1.51" };

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "voice-measurements-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("VoiceMeasurementStore", () => {
  it("reads back what it wrote, in another store on the same directory", async () => {
    const entries = new Map([
      [measurementKey(VOICE.timbre, "es"), FEATURES],
      [measurementKey(VOICE.timbre, "en"), null],
    ]);
    await new VoiceMeasurementStore(dir).write(ENGINE, entries);
    expect(await new VoiceMeasurementStore(dir).read(ENGINE)).toEqual(entries);
    // Later writes add to the file rather than replace it.
    const other = measurementKey({ ...VOICE.timbre, pitch: 75 }, "es");
    await new VoiceMeasurementStore(dir).write(ENGINE, new Map([[other, FEATURES]]));
    expect([...(await new VoiceMeasurementStore(dir).read(ENGINE)).keys()].sort()).toEqual(
      [...entries.keys(), other].sort(),
    );
    // Written aside and renamed: nothing else is left in the directory.
    expect(await readdir(dir)).toEqual(["espeak-ng.json"]);
  });

  it("keys measurements by everything the engine renders: language, timbre and accent", () => {
    const keys = new Set([
      measurementKey(VOICE.timbre, "es"),
      measurementKey(VOICE.timbre, "en"),
      measurementKey({ ...VOICE.timbre, pitch: VOICE.timbre.pitch + 1 }, "es"),
      measurementKey({ ...VOICE.timbre, rate: 1.05 }, "es"),
      measurementKey({ ...VOICE.timbre, accentLocales: { es: "es-419" } }, "es"),
    ]);
    expect(keys.size).toBe(5);
    expect(measurementKey({ ...VOICE.timbre, accentLocales: { en: "en-029" } }, "es")).toBe(
      measurementKey(VOICE.timbre, "es"),
    );
  });

  it("ignores the entries of another engine version, and replaces them when the new version writes", async () => {
    const store = new VoiceMeasurementStore(dir);
    const key = measurementKey(VOICE.timbre, "es");
    await store.write(ENGINE, new Map([[key, FEATURES]]));
    const upgraded = { ...ENGINE, version: "1.52" };
    expect((await store.read(upgraded)).size).toBe(0);

    const newKey = measurementKey(VOICE.timbre, "en");
    await store.write(upgraded, new Map([[newKey, null]]));
    expect(await store.read(upgraded)).toEqual(new Map([[newKey, null]]));
    expect((await store.read(ENGINE)).size).toBe(0);
  });

  it("treats a torn or corrupt file as empty", async () => {
    const file = path.join(dir, "espeak-ng.json");
    const store = new VoiceMeasurementStore(dir);
    for (const content of [
      '{"format":1,"engine":"espeak-ng","version":"1.51","measurements":{"es|m3',
      "not json at all",
      '{"format":1,"engine":"espeak-ng","version":"1.51","measurements":{"k":{"medianF0Hz":"high"}}}',
      '{"format":99,"engine":"espeak-ng","version":"1.51","measurements":{}}',
    ]) {
      await writeFile(file, content);
      expect((await store.read(ENGINE)).size).toBe(0);
    }
  });
});

describe("EngineRegistry.synthesizer", () => {
  it("returns the same object for a language on every call, with one engine or a fallback pair", () => {
    const first = measurableTts("first", "1");
    const second = measurableTts("second", "1");
    const pair = EngineRegistry.fromEngines({ vad, asr: [], mt: [], tts: [first, second] });
    expect(pair.synthesizer("es")).toBe(pair.synthesizer("es"));
    expect(pair.synthesizer("es")!.info.id).toBe("first");
    expect(pair.synthesizer("fr")).toBeUndefined();
    const single = EngineRegistry.fromEngines({ vad, asr: [], mt: [], tts: [first] });
    expect(single.synthesizer("es")).toBe(first);
  });

  it("lets sessions of one registry share a voice cloner, so the library is measured once", async () => {
    const first = measurableTts("first", "1");
    const registry = EngineRegistry.fromEngines({
      vad,
      asr: [],
      mt: [],
      tts: [first, measurableTts("second", "1")],
    });
    const cloner = voiceClonerFor(registry.synthesizer("es")!, "en", "es");
    expect(voiceClonerFor(registry.synthesizer("es")!, "en", "es")).toBe(cloner);
    await cloner.prepare();
    const measured = first.syntheses;
    await voiceClonerFor(registry.synthesizer("es")!, "en", "es").prepare();
    expect(first.syntheses).toBe(measured);
  });
});

describe("voice measurements persisted in the data directory", () => {
  const speaker = { medianF0Hz: 130, f0SpreadSemitones: 2, syllablesPerSecond: 4, voicedSeconds: 3 };

  /** A fresh registry, as a new process builds it, on `dir` with its own engine double. */
  function newProcess(version = "1.51") {
    const tts = measurableTts("espeak-ng", version);
    const registry = EngineRegistry.fromEngines({
      vad,
      asr: [],
      mt: [],
      tts: [tts],
      voiceMeasurementsDir: dir,
    });
    const cloner = voiceClonerFor(registry.synthesizer("es")!, "en", "es", registry.voiceMeasurements);
    return { tts, cloner };
  }

  it("are measured by the first registry and read, not measured, by the next one on the same directory", async () => {
    const first = newProcess();
    await first.cloner.prepare();
    expect(first.tts.syntheses).toBeGreaterThan(60);
    const stored = JSON.parse(await readFile(path.join(dir, "espeak-ng.json"), "utf8"));
    expect(stored).toMatchObject({ engine: "espeak-ng", version: "1.51" });
    expect(Object.keys(stored.measurements).length).toBe(first.tts.syntheses);

    const second = newProcess();
    await second.cloner.prepare();
    expect(second.tts.syntheses).toBe(0);
    expect(second.cloner.match(speaker)).toBeDefined();
    expect(second.cloner.match(speaker)).toEqual(first.cloner.match(speaker));
  });

  it("are measured again when the engine's version changes", async () => {
    const first = newProcess("1.51");
    await first.cloner.prepare();
    const upgraded = newProcess("1.52");
    await upgraded.cloner.prepare();
    expect(upgraded.tts.syntheses).toBe(first.tts.syntheses);
    const stored = JSON.parse(await readFile(path.join(dir, "espeak-ng.json"), "utf8"));
    expect(stored.version).toBe("1.52");
  });

  it("are measured again, not a crash, when the file is corrupt, and the file is repaired", async () => {
    await writeFile(path.join(dir, "espeak-ng.json"), '{"format":1,"engine":"espeak-ng","vers');
    const first = newProcess();
    await first.cloner.prepare();
    expect(first.tts.syntheses).toBeGreaterThan(60);
    const second = newProcess();
    await second.cloner.prepare();
    expect(second.tts.syntheses).toBe(0);
  });
});
