import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import onnxProto from "onnx-proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findSherpaModelOf } from "../../src/engines/sherpa-onnx/catalogue.js";
import { readModelMetadata } from "../../src/engines/sherpa-onnx/model-check.js";
import { isPulled, knownModelsOf, neuralVoiceModels } from "../../src/engines/sherpa-onnx/models.js";
import { importPiperVoice } from "../../src/engines/sherpa-onnx/piper-import.js";
import { DataType, encodeModel, node, valueInfo } from "../support/stand-in-models/onnx-graph.js";

const { onnx } = onnxProto;

/** A model with Piper's inputs (and `sid` when `speakers` > 1), and `metadata`. */
function piperModel(speakers = 1, metadata: Record<string, string> = {}): Uint8Array {
  return encodeModel({
    name: "piper layout",
    inputs: [
      valueInfo("input", DataType.INT64, [1, "n"]),
      valueInfo("input_lengths", DataType.INT64, [1]),
      valueInfo("scales", DataType.FLOAT, [3]),
      ...(speakers > 1 ? [valueInfo("sid", DataType.INT64, [1])] : []),
    ],
    outputs: [valueInfo("output", DataType.FLOAT, [1, "n"])],
    nodes: [node("Cast", ["input"], ["output"], { to: DataType.FLOAT })],
    metadata,
  });
}

const ID_MAP = { _: [0], "^": [1], $: [2], " ": [3], "\n": [9], a: [14], ɪ: [74], "\u0303": [141] };

function piperConfig(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    audio: { sample_rate: 22050, quality: "medium" },
    espeak: { voice: "en-us" },
    num_speakers: 1,
    phoneme_type: "espeak",
    phoneme_id_map: ID_MAP,
    language: { family: "en", name_english: "English" },
    dataset: "test",
    ...overrides,
  };
}

let work: string;
let espeakData: string;
beforeAll(async () => {
  work = await mkdtemp(path.join(tmpdir(), "relay-piper-import-"));
  // Only its phontab is looked for; the copy is what the voice reads.
  espeakData = path.join(work, "espeak-ng-data");
  await mkdir(path.join(espeakData, "lang"), { recursive: true });
  await writeFile(path.join(espeakData, "phontab"), "phonemes");
});
afterAll(() => rm(work, { recursive: true, force: true }));

/** Writes `<voice>.onnx` and its `.onnx.json` in a fresh directory; the .onnx's path. */
async function piperVoice(
  voice: string,
  model: Uint8Array,
  config: Record<string, unknown>,
): Promise<string> {
  const dir = await mkdtemp(path.join(work, "voice-"));
  await writeFile(path.join(dir, `${voice}.onnx`), model);
  await writeFile(path.join(dir, `${voice}.onnx.json`), JSON.stringify(config));
  await writeFile(path.join(dir, "MODEL_CARD"), "# Model card\n\n* License: CC0\n");
  return path.join(dir, `${voice}.onnx`);
}

describe("importPiperVoice", () => {
  it("appends sherpa-onnx's metadata to the model's bytes, leaving the graph as it was", async () => {
    const models = await mkdtemp(path.join(work, "models-"));
    const original = piperModel();
    const file = await piperVoice("en_US-test-medium", original, piperConfig());
    const result = await importPiperVoice(file, models, { espeakData });
    expect(result).toMatchObject({ name: "piper-en_US-test-medium", language: "en", licence: "CC0" });
    const written = await readFile(path.join(result.dir, "en_US-test-medium.onnx"));
    expect(written.subarray(0, original.length).equals(Buffer.from(original))).toBe(true);
    expect(
      Object.fromEntries(await readModelMetadata(path.join(result.dir, "en_US-test-medium.onnx"))),
    ).toEqual({
      model_type: "vits",
      comment: "piper",
      language: "English",
      voice: "en-us",
      version: "1",
      has_espeak: "1",
      has_g2pw: "0",
      n_speakers: "1",
      sample_rate: "22050",
    });
    expect(onnx.ModelProto.decode(written).graph!.node).toHaveLength(1);
    expect(await readFile(path.join(result.dir, "espeak-ng-data", "phontab"), "utf8")).toBe("phonemes");
  });

  it("writes tokens.txt as `<symbol> <id>` per phoneme_id_map entry, without the line break", async () => {
    const models = await mkdtemp(path.join(work, "models-"));
    const file = await piperVoice("en_US-tokens-medium", piperModel(), piperConfig());
    const { dir } = await importPiperVoice(file, models, { espeakData });
    const lines = (await readFile(path.join(dir, "tokens.txt"), "utf8")).trimEnd().split("\n");
    expect(lines.sort()).toEqual(["_ 0", "^ 1", "$ 2", "  3", "a 14", "ɪ 74", "\u0303 141"].sort());
  });

  it("makes a voice the engines, `verify` and `check` find by its name, as a pulled one", async () => {
    const models = await mkdtemp(path.join(work, "models-"));
    const file = await piperVoice(
      "de_DE-new-low",
      piperModel(2),
      piperConfig({ num_speakers: 2, language: { family: "de", name_english: "German" } }),
    );
    await importPiperVoice(file, models, { espeakData });
    const entry = knownModelsOf("tts", models).find((e) => e.name === "piper-de_DE-new-low");
    expect(entry).toMatchObject({ dir: "vits-piper-de_DE-new-low", languages: ["de"], default: false });
    expect(isPulled(entry!, models)).toBe(true);
    const [voice] = neuralVoiceModels(["piper-de_DE-new-low"], models);
    expect(voice!.problem).toBeUndefined();
    expect(voice!.files).toMatchObject({ kind: "vits", tokens: path.join(models, entry!.dir, "tokens.txt") });
  });

  it("imports a catalogue voice where its archive would unpack: that voice is then pulled", async () => {
    const models = await mkdtemp(path.join(work, "models-"));
    const file = await piperVoice("en_US-amy-medium", piperModel(), piperConfig());
    await importPiperVoice(file, models, { espeakData });
    expect(isPulled(findSherpaModelOf("tts", "piper-en_US-amy-medium")!, models)).toBe(true);
    expect(knownModelsOf("tts", models).filter((e) => e.name === "piper-en_US-amy-medium")).toHaveLength(1);
  });

  it.each([
    [
      "a phoneme type other than espeak",
      piperModel(),
      piperConfig({ phoneme_type: "pinyin" }),
      /phoneme_type "pinyin"/u,
    ],
    ["no language", piperModel(), piperConfig({ language: {} }), /states no language/u],
    ["a map without ^", piperModel(), piperConfig({ phoneme_id_map: { _: [0], $: [2] } }), /lacks \^/u],
    [
      "a phoneme of two code points",
      piperModel(),
      piperConfig({ phoneme_id_map: { ...ID_MAP, aɪ: [200] } }),
      /not one printable character/u,
    ],
    [
      "a multi-speaker model without sid",
      piperModel(1),
      piperConfig({ num_speakers: 4 }),
      /lacks the inputs sid/u,
    ],
    [
      "a model already converted",
      piperModel(1, { comment: "piper", sample_rate: "22050" }),
      piperConfig(),
      /already has sherpa-onnx's metadata \(comment, sample_rate\)/u,
    ],
    ["no ONNX model", new TextEncoder().encode("not a model"), piperConfig(), /ONNX model/u],
  ])("refuses %s, leaving nothing behind", async (_what, model, config, message) => {
    const models = await mkdtemp(path.join(work, "models-"));
    const file = await piperVoice("xx_XX-bad-medium", model, config);
    await expect(importPiperVoice(file, models, { espeakData })).rejects.toThrow(message);
    expect(knownModelsOf("tts", models).some((e) => e.name === "piper-xx_XX-bad-medium")).toBe(false);
  });

  it("refuses a file that is not <voice>.onnx, and one without its .onnx.json", async () => {
    const models = await mkdtemp(path.join(work, "models-"));
    await expect(importPiperVoice(path.join(work, "voice.bin"), models, { espeakData })).rejects.toThrow(
      /<voice>\.onnx/u,
    );
    await expect(importPiperVoice(path.join(work, "missing.onnx"), models, { espeakData })).rejects.toThrow(
      /cannot read .*missing\.onnx\.json/u,
    );
  });
});
