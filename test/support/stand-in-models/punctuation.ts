/**
 * A stand-in for the English online punctuation and casing model sherpa-onnx's OnlinePunctuation loads
 * (sherpa-onnx-online-punct-en-2024-08-06, a CNN-BiLSTM from Edge-Punct-Casing): the real inputs,
 * outputs and metadata (online-cnn-bilstm-model.cc), with hand-set weights in place of the network.
 * It capitalizes the first word and ends the text with a period, leaving the rest as it is:
 * "how are you" → "How are you." Nothing is learned; longer texts get no inner punctuation.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { DataType, encodeModel, floatTensor, int64Tensor, node, valueInfo } from "./onnx-graph.js";

/** Classes as the metadata numbers them (sherpa-onnx asserts these ids). */
const CASES = ["LOWER", "UPPER", "CAP", "MIX_CASE"] as const;
const PUNCTUATIONS = ["NO_PUNCT", "COMMA", "PERIOD", "QUESTION"] as const;

export interface PunctuationStandIn {
  /** The CNN-BiLSTM model: config `model.cnnBilstm`. */
  readonly model: string;
  /** Its sentencepiece vocabulary: config `model.bpeVocab` (required by sherpa-onnx). */
  readonly bpeVocab: string;
}

/**
 * Piece ids as the model's vocabulary has them: sherpa-onnx hardcodes 1 = `<s>`, 2 = `</s>` and pads
 * with 0. Lowercase pieces, since the model reads lowercased ASR output; letters make any word encodable.
 */
function vocabulary(): string[] {
  const words = "the and of to a in i he that was it you is not but for how are fine thank".split(" ");
  return [
    "<pad>",
    "<s>",
    "</s>",
    "<unk>",
    "▁",
    ...words.map((word) => `▁${word}`),
    ..."abcdefghijklmnopqrstuvwxyz'".split(""),
  ];
}

/**
 * One row per word of all sentences (the real model's "active" logits: `<s>`, `</s>` and padding
 * dropped): case CAP for the first, LOWER otherwise; PERIOD after the last, nothing otherwise.
 */
function punctuationModel(): Uint8Array {
  const oneHot = (index: number): number[] => CASES.map((_, i) => (i === index ? 1 : 0));
  // (is not / is the marked word) → class logits.
  const caseTable = [...oneHot(CASES.indexOf("LOWER")), ...oneHot(CASES.indexOf("CAP"))];
  const punctTable = [...oneHot(PUNCTUATIONS.indexOf("NO_PUNCT")), ...oneHot(PUNCTUATIONS.indexOf("PERIOD"))];
  return encodeModel({
    name: "CNN-BiLSTM punctuation and casing (stand-in)",
    inputs: [
      valueInfo("token_ids", DataType.INT32, ["N", "T"]),
      valueInfo("valid_ids", DataType.INT32, ["N", "T"]),
      valueInfo("label_lens", DataType.INT32, ["N"]),
    ],
    // sherpa-onnx reads the class counts from dim 1 of the declared output shapes: they must be fixed.
    outputs: [
      valueInfo("active_case_logits", DataType.FLOAT, ["words", CASES.length]),
      valueInfo("active_punct_logits", DataType.FLOAT, ["words", PUNCTUATIONS.length]),
      valueInfo("mask", DataType.BOOL, ["N", "T"]),
    ],
    initializers: [
      int64Tensor("zero", [], [0]),
      int64Tensor("one", [], [1]),
      int64Tensor("two", [1], [2]),
      int64Tensor("column", [2], [-1, 1]),
      floatTensor("float_one", [], Float32Array.of(1)),
      floatTensor("case_table", [2, CASES.length], Float32Array.from(caseTable)),
      floatTensor("punct_table", [2, PUNCTUATIONS.length], Float32Array.from(punctTable)),
    ],
    nodes: [
      // words = valid ids - (<s>, </s>) per sentence
      node("Cast", ["valid_ids"], ["valid"], { to: DataType.INT64 }),
      node("ReduceSum", ["valid"], ["valid_count"], { keepdims: 0 }),
      node("Shape", ["label_lens"], ["sentences"]),
      node("Mul", ["sentences", "two"], ["markers"]),
      node("Sub", ["valid_count", "markers"], ["word_count_1d"]),
      node("Squeeze", ["word_count_1d"], ["word_count"]),
      node("Range", ["zero", "word_count", "one"], ["word_index"]),
      node("Sub", ["word_count", "one"], ["last_index"]),
      node("Equal", ["word_index", "zero"], ["is_first_bool"]),
      node("Equal", ["word_index", "last_index"], ["is_last_bool"]),
      node("Cast", ["is_first_bool"], ["is_first_flat"], { to: DataType.FLOAT }),
      node("Cast", ["is_last_bool"], ["is_last_flat"], { to: DataType.FLOAT }),
      node("Reshape", ["is_first_flat", "column"], ["is_first"]),
      node("Reshape", ["is_last_flat", "column"], ["is_last"]),
      node("Sub", ["float_one", "is_first"], ["not_first"]),
      node("Sub", ["float_one", "is_last"], ["not_last"]),
      node("Concat", ["not_first", "is_first"], ["case_choice"], { axis: 1 }),
      node("Concat", ["not_last", "is_last"], ["punct_choice"], { axis: 1 }),
      node("MatMul", ["case_choice", "case_table"], ["active_case_logits"]),
      node("MatMul", ["punct_choice", "punct_table"], ["active_punct_logits"]),
      node("Cast", ["valid_ids"], ["mask"], { to: DataType.BOOL }),
    ],
    metadata: {
      ...Object.fromEntries(PUNCTUATIONS.map((name, id) => [name, id])),
      ...Object.fromEntries(CASES.map((name, id) => [name, id])),
    },
  });
}

/** Writes model.onnx and bpe.vocab into `dir` (a few KB). */
export function writePunctuationStandIn({ dir }: { dir: string }): PunctuationStandIn {
  mkdirSync(dir, { recursive: true });
  const files: PunctuationStandIn = {
    model: path.join(dir, "model.onnx"),
    bpeVocab: path.join(dir, "bpe.vocab"),
  };
  writeFileSync(files.model, punctuationModel());
  // Whole words score higher than their letters; one "piece score" pair a line, no blank lines
  // (sherpa-onnx's sentencepiece reader ends the process on a line it cannot parse).
  const pieces = vocabulary();
  writeFileSync(
    files.bpeVocab,
    pieces.map((piece, id) => `${piece}\t${id < 4 ? 0 : piece.length > 2 ? -5 : -10}\n`).join(""),
  );
  return files;
}
