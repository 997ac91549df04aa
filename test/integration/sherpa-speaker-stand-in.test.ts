/**
 * The speaker embedding stand-in (test/support/stand-in-models/speaker-embedding.ts) through
 * sherpa-onnx itself: it loads as a 3D-Speaker and as a WeSpeaker model, and on real speech two
 * clips of one person score closer than a woman and a man. Its numbers are not a real model's.
 */
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { sharedMissing, sharedPath } from "../support/shared.js";
import {
  writeSpeakerEmbeddingStandIn,
  type SpeakerEmbeddingFramework,
} from "../support/stand-in-models/speaker-embedding.js";

/** The part of sherpa-onnx-node this test uses (the package ships no type declarations). */
interface SherpaSpeakerApi {
  readWave(file: string): { samples: Float32Array; sampleRate: number };
  LinearResampler: new (from: number, to: number) => { flush(samples: Float32Array): Float32Array };
  SpeakerEmbeddingExtractor: new (config: { model: string; numThreads: number; debug: boolean }) => {
    readonly dim: number;
    createStream(): {
      acceptWaveform(audio: { samples: Float32Array; sampleRate: number }): void;
      inputFinished(): void;
    };
    isReady(stream: object): boolean;
    compute(stream: object): Float32Array;
  };
}
// A CommonJS addon without types: `require` returns `any`, typed here once.
const sherpa = createRequire(import.meta.url)("sherpa-onnx-node") as SherpaSpeakerApi;

const SPEECH_MISSING =
  sharedMissing("data/speech/ljspeech/wavs") || sharedMissing("data/speech/librivox-pocketsphinx");
const RATE = 16_000;
const dir = mkdtempSync(path.join(tmpdir(), "relay-speaker-stand-in-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Five clips each of a woman (LJSpeech, 22.05 kHz) and a man (LibriVox, 16 kHz), at 16 kHz. */
function readClips(): { woman: Float32Array[]; man: Float32Array[] } {
  const read = (file: string): Float32Array => {
    const { samples, sampleRate } = sherpa.readWave(file);
    // Resampled here: sherpa resamples too, but says so on stderr for every stream.
    return sampleRate === RATE ? samples : new sherpa.LinearResampler(sampleRate, RATE).flush(samples);
  };
  const lj = sharedPath("data/speech/ljspeech/wavs");
  const librivox = sharedPath("data/speech/librivox-pocketsphinx");
  return {
    woman: readdirSync(lj)
      .sort()
      .slice(0, 5)
      .map((file) => read(path.join(lj, file))),
    man: readdirSync(librivox)
      .filter((file) => file.startsWith("sense_and_sensibility"))
      .sort()
      .map((file) => read(path.join(librivox, file))),
  };
}

function cosine(a: Float32Array, b: Float32Array): number {
  let dot = 0;
  let normA = 0;
  let normB = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    normA += a[i]! ** 2;
    normB += b[i]! ** 2;
  }
  return dot / Math.sqrt(normA * normB);
}

function pairs<T>(items: readonly T[]): [T, T][] {
  return items.flatMap((a, i) => items.slice(i + 1).map((b): [T, T] => [a, b]));
}

describe.skipIf(SPEECH_MISSING)("speaker embedding stand-in through sherpa-onnx", () => {
  const clips = SPEECH_MISSING ? { woman: [], man: [] } : readClips();

  function embed(model: string, samples: Float32Array): Float32Array {
    const extractor = new sherpa.SpeakerEmbeddingExtractor({ model, numThreads: 1, debug: false });
    const stream = extractor.createStream();
    expect(extractor.isReady(stream)).toBe(false);
    stream.acceptWaveform({ samples, sampleRate: RATE });
    stream.inputFinished();
    expect(extractor.isReady(stream)).toBe(true);
    const embedding = extractor.compute(stream);
    expect(embedding).toHaveLength(extractor.dim);
    // The extractor's buffer may be reused: keep a copy.
    return Float32Array.from(embedding);
  }

  it.each<[SpeakerEmbeddingFramework, number]>([
    ["3d-speaker", 192],
    ["wespeaker", 256],
  ])(
    "%s: loads with dim %i, and one person's clips score closer than a woman and a man",
    (framework, dim) => {
      const { model } = writeSpeakerEmbeddingStandIn({ dir: path.join(dir, framework), framework });
      expect(new sherpa.SpeakerEmbeddingExtractor({ model, numThreads: 1, debug: false }).dim).toBe(dim);

      const woman = clips.woman.map((clip) => embed(model, clip));
      const man = clips.man.map((clip) => embed(model, clip));
      const same = [...pairs(woman), ...pairs(man)].map(([a, b]) => cosine(a, b));
      const different = woman.flatMap((a) => man.map((b) => cosine(a, b)));
      // Measured: same 0.49–0.92, different −0.14–0.26 (see the stand-in's comment).
      expect(Math.min(...same)).toBeGreaterThan(Math.max(...different) + 0.1);
    },
  );

  it("real size: about CAM++'s 7.2 M weights, and nearly the small model's embedding", () => {
    const small = writeSpeakerEmbeddingStandIn({ dir: path.join(dir, "small"), dim: 192 });
    const real = writeSpeakerEmbeddingStandIn({ dir: path.join(dir, "real"), dim: 192, size: "real" });
    const weights = statSync(real.model).size / Float32Array.BYTES_PER_ELEMENT;
    expect(weights).toBeGreaterThan(6.5e6);
    expect(weights).toBeLessThan(7.5e6);
    const clip = clips.man[0]!;
    expect(cosine(embed(real.model, clip), embed(small.model, clip))).toBeGreaterThan(0.99);
  });
});
