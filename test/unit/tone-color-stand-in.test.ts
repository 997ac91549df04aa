/**
 * The OpenVoice V2 tone colour stand-ins (test/support/stand-in-models/tone-color.ts) load in
 * onnxruntime with the published models' input names and shapes, and compute what tests rely on: the
 * extractor's element 0 is `standInToneColorKhz`, the converter says a sine at dest_tone[0] kHz.
 */
import { createHash } from "node:crypto";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import * as ort from "onnxruntime-node";
import { describe, expect, it } from "vitest";
import { linearSpectrogram } from "../../src/audio/spectrogram.js";
import {
  buildToneColorConverterStandIn,
  buildToneColorExtractorStandIn,
  standInToneColorKhz,
  TONE_COLOR_STAND_IN_AMPLITUDE,
  toneColorConfigText,
  writeToneColorStandIn,
} from "../support/stand-in-models/tone-color.js";

const SAMPLE_RATE = 22050;

/** One second of 300 Hz plus a quieter 900 Hz. */
function twoTones(): Float32Array {
  return Float32Array.from(
    { length: SAMPLE_RATE },
    (_, n) =>
      0.4 * Math.sin((2 * Math.PI * 300 * n) / SAMPLE_RATE) +
      0.2 * Math.sin((2 * Math.PI * 900 * n) / SAMPLE_RATE),
  );
}

/** The spectrogram time-major ([1, T, 513], the extractor's layout) and frame count. */
function spectrogramOf(samples: Float32Array): { data: Float32Array; frames: number } {
  const { data, frames } = linearSpectrogram(samples, { nFft: 1024, hop: 256, win: 1024 });
  return { data, frames };
}

/** [1, T, 513] → [1, 513, T] (the converter's layout). */
function freqMajor(data: Float32Array, frames: number): Float32Array {
  const out = new Float32Array(data.length);
  for (let t = 0; t < frames; t++) for (let k = 0; k < 513; k++) out[k * frames + t] = data[t * 513 + k]!;
  return out;
}

async function extract(model: Uint8Array, samples: Float32Array): Promise<Float32Array> {
  const session = await ort.InferenceSession.create(model);
  const { data, frames } = spectrogramOf(samples);
  const result = await session.run({ input: new ort.Tensor("float32", data, [1, frames, 513]) });
  const output = result[session.outputNames[0]!]!;
  expect(output.dims).toEqual([1, 256]);
  return output.data as Float32Array;
}

describe("OpenVoice tone colour stand-ins", () => {
  it("write upstream's converter config byte for byte", () => {
    expect(createHash("sha256").update(toneColorConfigText()).digest("hex")).toBe(
      "9dfff60350b8c63f2c664efd92a61b2516efb22671466960f0e5dfebd881fa47",
    );
  });

  it("write the release's three files", async () => {
    const dir = path.join(await mkdtemp(path.join(tmpdir(), "tone-color-stand-in-")), "nested");
    try {
      const files = await writeToneColorStandIn(dir);
      expect(files.dir).toBe(dir);
      expect((await readdir(dir)).sort()).toEqual([
        "configuration.json",
        "tone_clone_model.onnx",
        "tone_color_extract_model.onnx",
      ]);
      expect(await readFile(files.config, "utf8")).toBe(toneColorConfigText());
      expect(JSON.parse(await readFile(files.config, "utf8")).data.hop_length).toBe(256);
      expect(path.basename(files.extractor)).toBe("tone_color_extract_model.onnx");
      expect(path.basename(files.converter)).toBe("tone_clone_model.onnx");
    } finally {
      await rm(path.dirname(dir), { recursive: true, force: true });
    }
  });

  it("extract the spectral centroid below 2 kHz as element 0", async () => {
    const model = buildToneColorExtractorStandIn();
    const session = await ort.InferenceSession.create(model);
    expect(session.inputNames).toEqual(["input"]);
    expect(session.inputMetadata[0]).toMatchObject({
      isTensor: true,
      type: "float32",
      shape: [1, "frames", 513],
    });
    expect(session.outputNames).toHaveLength(1);

    const samples = twoTones();
    const expected = standInToneColorKhz(samples);
    // Between the two tones, nearer the louder.
    expect(expected).toBeGreaterThan(0.3);
    expect(expected).toBeLessThan(0.6);
    const tone = await extract(model, samples);
    expect(tone[0]).toBeCloseTo(expected, 3);
    expect(Array.from(tone.subarray(1)).every((v) => v === 0)).toBe(true);
  });

  it("keep element 0 with the real-size body, which fills the rest", async () => {
    const model = buildToneColorExtractorStandIn({ size: "real" });
    // fp32 weights of ≈ 0.81 M parameters, as the published 3.26 MB file.
    expect(model.byteLength).toBeGreaterThan(3_200_000);
    expect(model.byteLength).toBeLessThan(3_400_000);
    const samples = twoTones();
    const tone = await extract(model, samples);
    expect(tone[0]).toBeCloseTo(standInToneColorKhz(samples), 3);
    const rest = Array.from(tone.subarray(1));
    expect(rest.every((v) => Number.isFinite(v) && Math.abs(v) < 0.05)).toBe(true);
    expect(rest.some((v) => v !== 0)).toBe(true);
  });

  it("convert to a sine at the target tone colour's element 0 in kHz", async () => {
    const session = await ort.InferenceSession.create(buildToneColorConverterStandIn());
    expect(session.inputNames).toEqual(["audio", "audio_length", "src_tone", "dest_tone", "tau"]);
    expect(session.inputMetadata.map((input) => (input.isTensor ? [input.type, input.shape] : []))).toEqual([
      ["float32", [1, 513, "frames"]],
      ["int64", [1]],
      ["float32", [1, 256, 1]],
      ["float32", [1, 256, 1]],
      ["float32", [1]],
    ]);
    expect(session.outputNames).toHaveLength(2);

    const { data, frames } = spectrogramOf(twoTones());
    const destTone = new Float32Array(256);
    destTone[0] = 0.5;
    const result = await session.run({
      audio: new ort.Tensor("float32", freqMajor(data, frames), [1, 513, frames]),
      audio_length: new ort.Tensor("int64", BigInt64Array.of(BigInt(frames)), [1]),
      src_tone: new ort.Tensor("float32", new Float32Array(256), [1, 256, 1]),
      dest_tone: new ort.Tensor("float32", destTone, [1, 256, 1]),
      tau: new ort.Tensor("float32", Float32Array.of(0.3), [1]),
    });
    const wave = result[session.outputNames[0]!]!;
    expect(wave.dims).toEqual([1, 1, 256 * frames]);
    const samples = wave.data as Float32Array;
    // Upward zero crossings per second: the sine's frequency.
    let crossings = 0;
    for (let n = 1; n < samples.length; n++) if (samples[n - 1]! < 0 && samples[n]! >= 0) crossings++;
    expect((crossings * SAMPLE_RATE) / samples.length).toBeCloseTo(500, -1);
    expect(Math.max(...samples)).toBeCloseTo(TONE_COLOR_STAND_IN_AMPLITUDE, 3);
    expect(samples[100]).toBeCloseTo(0.3 * Math.sin((2 * Math.PI * 500 * 100) / SAMPLE_RATE), 4);

    const mask = result[session.outputNames[1]!]!;
    expect(mask.dims).toEqual([1, 1, frames]);
    expect(Array.from(mask.data as Float32Array).every((v) => v === 1)).toBe(true);
  });
});
