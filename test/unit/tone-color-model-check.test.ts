/**
 * The tone colour model's load check (src/engines/openvoice/model-check.ts): the stand-in (the real
 * release's file names, config and input names) passes; a configuration without usable spectrogram
 * settings, a truncated or foreign ONNX file, or an ONNX file without the inputs the converter feeds
 * is refused with the file and what is wrong.
 */
import { copyFile, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { findToneColorModel } from "../../src/engines/openvoice/catalogue.js";
import {
  parseToneColorConfig,
  problemWithToneColorModel,
  readToneColorModel,
} from "../../src/engines/openvoice/model-check.js";
import { writeToneColorStandIn, type ToneColorStandInFiles } from "../support/stand-in-models/tone-color.js";

const TONE = findToneColorModel("tone-color")!;
let tmp: string;
let original: ToneColorStandInFiles;
/** A fresh copy of the stand-in for each test. */
let dir: string;

beforeAll(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), "relay-tone-color-check-"));
  original = await writeToneColorStandIn(path.join(tmp, "original"));
});
afterAll(async () => {
  if (tmp) await rm(tmp, { recursive: true, force: true });
});
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmp, "model-"));
  for (const file of [original.config, original.extractor, original.converter])
    await copyFile(file, path.join(dir, path.basename(file)));
});

describe("the tone colour model's load check", () => {
  it("reads the stand-in's spectrogram settings (upstream's configuration)", async () => {
    expect(await readToneColorModel(dir, TONE)).toEqual({
      sampleRate: 22050,
      filterLength: 1024,
      hopLength: 256,
      winLength: 1024,
    });
    expect(await problemWithToneColorModel(dir, TONE)).toBeUndefined();
  });

  it("refuses a configuration without usable spectrogram settings", () => {
    const config = (data: Record<string, unknown>) =>
      parseToneColorConfig(
        JSON.stringify({
          data: { sampling_rate: 22050, filter_length: 1024, hop_length: 256, win_length: 1024, ...data },
        }),
        "configuration.json",
      );
    expect(parseToneColorConfig("{", "configuration.json")).toMatch(/^configuration\.json: .*JSON/);
    expect(parseToneColorConfig("[]", "configuration.json")).toBe('configuration.json has no "data" object');
    expect(config({ hop_length: 0 })).toBe(
      "configuration.json: data.hop_length is 0, not a positive integer",
    );
    expect(config({ sampling_rate: "22050" })).toBe(
      'configuration.json: data.sampling_rate is "22050", not a positive integer',
    );
    expect(config({ filter_length: 1024.5 })).toMatch(
      /data\.filter_length is 1024\.5, not a positive integer/,
    );
    expect(config({ win_length: undefined })).toBe(
      "configuration.json: data.win_length is missing, not a positive integer",
    );
    expect(config({ win_length: 2048 })).toBe(
      "configuration.json: data.win_length 2048 exceeds data.filter_length 1024",
    );
    expect(config({ hop_length: 2048, win_length: 1024 })).toMatch(
      /hop_length 2048 exceeds data\.win_length/,
    );
  });

  it("refuses a missing configuration, a truncated or foreign ONNX file, and one without the converter's inputs", async () => {
    await writeFile(path.join(dir, TONE.files.config), JSON.stringify({ data: { sampling_rate: 22050 } }));
    expect(await problemWithToneColorModel(dir, TONE)).toBe(
      "configuration.json: data.filter_length is missing, not a positive integer",
    );
    await rm(path.join(dir, TONE.files.config));
    expect(await problemWithToneColorModel(dir, TONE)).toBe("cannot read configuration.json (ENOENT)");
    await copyFile(original.config, path.join(dir, TONE.files.config));

    const converter = await readFile(original.converter);
    await writeFile(path.join(dir, TONE.files.converter), converter.subarray(0, converter.length - 40));
    expect(await problemWithToneColorModel(dir, TONE)).toMatch(
      /^tone_clone_model\.onnx is not (a complete ONNX model|an ONNX model \(it has no graph\))/,
    );
    await writeFile(path.join(dir, TONE.files.converter), "<!DOCTYPE html><html>rate limited</html>");
    expect(await problemWithToneColorModel(dir, TONE)).toMatch(/^tone_clone_model\.onnx is not/);

    // The two files swapped: each lacks the other's inputs.
    await copyFile(original.converter, path.join(dir, TONE.files.extractor));
    expect(await problemWithToneColorModel(dir, TONE)).toBe(
      "tone_color_extract_model.onnx lacks the inputs the tone colour converter feeds it: input",
    );
    await copyFile(original.extractor, path.join(dir, TONE.files.extractor));
    await copyFile(original.extractor, path.join(dir, TONE.files.converter));
    expect(await problemWithToneColorModel(dir, TONE)).toBe(
      "tone_clone_model.onnx lacks the inputs the tone colour converter feeds it: audio, audio_length, src_tone, dest_tone, tau",
    );
  });
});
