/**
 * The translation stand-ins (test/support/stand-in-models/translation.ts) as transformers.js itself
 * loads and runs them, offline with `dtype: "q8"`: Marian and M2M100 echo the source followed by a
 * marker, through the pipeline and through `model.generate`, batched with padding too.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import {
  AutoModelForSeq2SeqLM,
  AutoTokenizer,
  env,
  pipeline,
  type Tensor,
  type TranslationPipeline,
} from "@huggingface/transformers";
import onnxProto from "onnx-proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeTranslationStandIn } from "../support/stand-in-models/translation.js";

const { onnx } = onnxProto;

let root: string;
// transformers.js settings are process-wide and integration files share their fork: put them back.
const saved = {
  allowRemoteModels: env.allowRemoteModels,
  localModelPath: env.localModelPath,
  useFSCache: env.useFSCache,
};

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "relay-translation-"));
  writeTranslationStandIn({
    dir: path.join(root, "stand-in/opus-mt-en-es"),
    family: "marian",
    marker: "[es]",
  });
  writeTranslationStandIn({ dir: path.join(root, "stand-in/m2m100_418M"), family: "m2m100" });
  writeTranslationStandIn({ dir: path.join(root, "stand-in/broken"), family: "marian" });
  // An encoder whose `attention_mask` input is renamed: its graph no longer holds together.
  const encoderFile = path.join(root, "stand-in/broken/onnx/encoder_model_quantized.onnx");
  const model = onnx.ModelProto.decode(await readFile(encoderFile));
  model.graph!.input!.find((input) => input.name === "attention_mask")!.name = "mask";
  await writeFile(encoderFile, onnx.ModelProto.encode(model).finish());
  Object.assign(env, { allowRemoteModels: false, localModelPath: root, useFSCache: false });
});
afterAll(async () => {
  Object.assign(env, saved);
  await rm(root, { recursive: true, force: true });
});

const texts = (output: unknown): string[] =>
  (output as { translation_text: string }[]).map((item) => item.translation_text);

describe("Marian (opus-mt) stand-in", () => {
  it("echoes the source with the marker through the translation pipeline", async () => {
    const translator = (await pipeline("translation", "stand-in/opus-mt-en-es", {
      dtype: "q8",
    })) as TranslationPipeline;
    expect(texts(await translator("hello world"))).toEqual(["hello world [es]"]);
    // A batch pads the shorter sentence: each still comes back whole and stops at its own end.
    const batch = ["Good morning.", "The quick brown fox jumps over the lazy dog near the river bank."];
    expect(texts(await translator(batch))).toEqual(batch.map((text) => `${text} [es]`));
    await translator.dispose();
  });

  it("generates source length + 1 tokens with AutoModelForSeq2SeqLM", async () => {
    const tokenizer = await AutoTokenizer.from_pretrained("stand-in/opus-mt-en-es");
    const model = await AutoModelForSeq2SeqLM.from_pretrained("stand-in/opus-mt-en-es", { dtype: "q8" });
    const inputs = tokenizer("hello world, how are you?");
    const output = (await model.generate({ ...inputs, max_new_tokens: 64 })) as Tensor;
    const sourceLength = (inputs.input_ids as Tensor).dims[1]!;
    // Decoder start, the source pieces, the marker, `</s>`.
    expect(output.dims).toEqual([1, sourceLength + 2]);
    expect(tokenizer.batch_decode(output, { skip_special_tokens: true })).toEqual([
      "hello world, how are you? [es]",
    ]);
    await model.dispose();
  });

  it("fails to load a file missing an input name, saying which", async () => {
    await expect(pipeline("translation", "stand-in/broken", { dtype: "q8" })).rejects.toThrow(
      /attention_mask/u,
    );
  });
});

describe("M2M100 stand-in", () => {
  it("echoes the source words with the target language's marker", async () => {
    const translator = (await pipeline("translation", "stand-in/m2m100_418M", {
      dtype: "q8",
    })) as TranslationPipeline;
    const options = { src_lang: "de", tgt_lang: "ja" } as Record<string, unknown>;
    expect(texts(await translator("Guten Morgen, wie geht es dir?", options))).toEqual([
      "Guten Morgen, wie geht es dir? [ja]",
    ]);
    const batch = ["hello", "Привет, как дела сегодня?"];
    expect(
      texts(await translator(batch, { src_lang: "en", tgt_lang: "ko" } as Record<string, unknown>)),
    ).toEqual(batch.map((text) => `${text} [ko]`));
    await translator.dispose();
  });

  it("starts with the forced language token under model.generate", async () => {
    const tokenizer = await AutoTokenizer.from_pretrained("stand-in/m2m100_418M");
    const model = await AutoModelForSeq2SeqLM.from_pretrained("stand-in/m2m100_418M", { dtype: "q8" });
    const fr = tokenizer.convert_tokens_to_ids("__fr__");
    const inputs = tokenizer("hello world");
    const output = (await model.generate({ ...inputs, forced_bos_token_id: fr })) as Tensor;
    const ids = output.tolist()[0] as bigint[];
    expect(ids.slice(0, 2)).toEqual([2n, BigInt(fr)]);
    expect(tokenizer.batch_decode(output, { skip_special_tokens: true })).toEqual(["hello world [fr]"]);
    await model.dispose();
  });
});
