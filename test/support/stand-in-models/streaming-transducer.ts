/**
 * A stand-in for sherpa-onnx's streaming recognizer model: a streaming Zipformer transducer as icefall's
 * zipformer/export-onnx-streaming.py exports it ("zipformer2", the 2023-06-26 English model's layout).
 * Encoder, decoder and joiner have the real input/output names, state tensors and metadata
 * (online-zipformer2-transducer-model.cc reads them); the weights are hand-set, not trained:
 *
 * - the encoder sums each group of 4 feature frames (one output frame, 40 ms) into a loudness and
 *   a spectral-shape vector; every 4th output frame (160 ms) it passes the loudness on as "emit";
 * - the joiner turns "emit" into the blank logit: loud frames on that grid give a non-blank token,
 *   quiet ones (and all frames in between) give blank. Which token comes out depends on the spectral
 *   shape and on the previous tokens (the decoder), so it is deterministic for given audio.
 *
 * So speech yields a few meaningless BPE tokens a second, silence yields blanks, and sherpa-onnx's
 * endpoint rules (trailing silence) fire once speech stops. The words mean nothing.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import {
  DataType,
  encodeModel,
  floatTensor,
  int64Tensor,
  node,
  randomWeights,
  valueInfo,
  type Dim,
  type ModelSpec,
} from "./onnx-graph.js";

/** Per-stack sizes, as the encoder's metadata lists them (one entry per Zipformer stack). */
interface ZipformerLayout {
  readonly numEncoderLayers: readonly number[];
  readonly encoderDims: readonly number[];
  readonly queryHeadDims: readonly number[];
  readonly valueHeadDims: readonly number[];
  readonly numHeads: readonly number[];
  readonly cnnModuleKernels: readonly number[];
  readonly leftContextLen: readonly number[];
  readonly joinerDim: number;
  /** Hidden layers of 1024 in the encoder's compute-only path: what makes "real" cost like the real model. */
  readonly computeLayers: number;
}

/** A few tiny stacks: every state tensor exists with the real layout, each a few hundred floats. */
const SMALL: ZipformerLayout = {
  numEncoderLayers: [1, 1],
  encoderDims: [32, 32],
  queryHeadDims: [8, 8],
  valueHeadDims: [4, 4],
  numHeads: [2, 2],
  cnnModuleKernels: [7, 7],
  leftContextLen: [32, 16],
  joinerDim: 32,
  computeLayers: 0,
};

/**
 * sherpa-onnx-streaming-zipformer-en-2023-06-26 (chunk 16, left context 128). Its encoder has about
 * 63 M parameters (int8: ~68 MB; fp32: ~250 MB); 60 hidden layers of 1024² (+ input and output
 * projections) give 64 M fp32 weights, applied to 4 frames per 320 ms chunk: ~0.26 G multiply-adds,
 * about what the real encoder's six stacks spend at their frame rates (an estimate from its layer sizes,
 * not a measurement of the real model; the stand-in takes ~11 ms a chunk on one core here).
 */
const REAL: ZipformerLayout = {
  numEncoderLayers: [2, 2, 3, 4, 3, 2],
  encoderDims: [192, 256, 384, 512, 384, 256],
  queryHeadDims: [32, 32, 32, 32, 32, 32],
  valueHeadDims: [12, 12, 12, 12, 12, 12],
  numHeads: [4, 4, 4, 8, 4, 4],
  cnnModuleKernels: [31, 31, 15, 15, 15, 31],
  leftContextLen: [128, 64, 32, 16, 32, 64],
  joinerDim: 512,
  computeLayers: 60,
};

const FEATURE_DIM = 80;
/** Feature frames the encoder advances per chunk (320 ms), and the 13 frames of right context it also sees. */
const DECODE_CHUNK_LEN = 32;
const T = 45;
/** 4× subsampling: 8 output frames per chunk. */
const SUBSAMPLING = 4;
const OUT_FRAMES = DECODE_CHUNK_LEN / SUBSAMPLING;
const CONTEXT_SIZE = 2;
const COMPUTE_DIM = 1024;

/**
 * Loudness (log of the summed mel energies of 4 frames; sherpa-onnx's fbank of samples in ±1) above which
 * an output frame counts as speech: measured at about -50 dBFS for white noise. goforward.wav's room
 * noise (-56 dBFS) stays below it, its speech (-20 to -40 dBFS) well above; digital silence is far below.
 */
const SPEECH_LOG_ENERGY = 1.2;
/** The "emit" channel saturates the joiner's tanh: ±16 on the blank logit. */
const BLANK_WEIGHT = 16;
/** Output frames (of each chunk's 8) on which a token may come out: one per 160 ms. */
const EMIT_FRAMES = [0, 4];

export interface StreamingTransducerStandIn {
  readonly encoder: string;
  readonly decoder: string;
  readonly joiner: string;
  readonly tokens: string;
  /** sentencepiece-style vocabulary (piece and score per line), for hotwords with modelingUnit "bpe". */
  readonly bpeVocab: string;
}

/** The vocabulary: `<blk>` 0, `<sos/eos>` 1, `<unk>` 2, then BPE-style pieces, 500 in all like the real model. */
const STAND_IN_VOCAB_SIZE = 500;

const COMMON_WORDS = (
  "THE AND OF TO A IN I HE THAT WAS IT HIS YOU WITH AS FOR HAD IS HER NOT BUT AT ON SHE BE HAVE BY WHICH " +
  "HIM THEY THIS ALL FROM SO SAID WERE MY WE ONE THERE NO ME WHAT WOULD WHEN ARE AN OR IF WILL BEEN THEIR " +
  "WHO UP OUT THEM DO INTO MORE NOW COULD SOME THEN TIME LITTLE VERY ABOUT OVER CAN MAN ONLY UPON DID LIKE " +
  "GO FORWARD TEN METERS BACK LEFT RIGHT TURN STOP HELLO GOOD MORNING THANK PLEASE YES WELL KNOW SEE COME " +
  "ELINOR MARIANNE SISTER MOTHER HOUSE WORLD DAY NIGHT WATER VOICE SPEECH"
).split(" ");
const SUFFIXES = "S ED ING ER LY ES EN AL TION NESS MENT ABLE Y E D T N R".split(" ");
const LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ".split("");
const CONSONANTS = "BCDFGHJKLMNPRSTVWZ".split("");
const VOWELS = "AEIOU".split("");

/** The pieces, in id order: deterministic, BPE-looking, all distinct. */
function standInTokens(): string[] {
  const pieces = ["<blk>", "<sos/eos>", "<unk>", "▁"];
  const seen = new Set(pieces);
  const add = (piece: string): void => {
    if (pieces.length < STAND_IN_VOCAB_SIZE && !seen.has(piece)) {
      seen.add(piece);
      pieces.push(piece);
    }
  };
  COMMON_WORDS.forEach((word) => add(`▁${word}`));
  SUFFIXES.forEach(add);
  LETTERS.forEach(add);
  for (const c of CONSONANTS) for (const v of VOWELS) add(`${c}${v}`);
  for (const c of CONSONANTS) for (const v of VOWELS) add(`▁${c}${v}`);
  for (const c of CONSONANTS) for (const v of VOWELS) for (const e of "NRST") add(`${c}${v}${e}`);
  if (pieces.length !== STAND_IN_VOCAB_SIZE)
    throw new Error(`stand-in vocabulary has ${pieces.length} pieces`);
  return pieces;
}

/** Longer pieces score higher, so the sentencepiece encoder prefers whole words to letters. */
export function pieceScore(piece: string, id: number): number {
  if (id < 3) return 0;
  const letters = piece.replace("▁", "").length;
  return letters <= 1 ? -20 : -(10 - Math.min(letters, 8) * 0.5) - id * 1e-4;
}

const float = (
  name: string,
  dims: readonly number[],
  values: ArrayLike<number>,
): ReturnType<typeof floatTensor> => floatTensor(name, dims, Float32Array.from(values));

function encoderModel(layout: ZipformerLayout): Uint8Array {
  const inputs = [valueInfo("x", DataType.FLOAT, ["N", T, FEATURE_DIM])];
  const outputs = [valueInfo("encoder_out", DataType.FLOAT, ["N", OUT_FRAMES, layout.joinerDim])];
  const nodes: ModelSpec["nodes"][number][] = [];
  const initializers: ReturnType<typeof floatTensor>[] = [];

  // The states, in the order sherpa-onnx passes them (by position): 6 per layer, then the embed states.
  // The stand-in only passes them through: their sizes, not their values, are what the runtime handles.
  const state = (name: string, elemType: Parameters<typeof valueInfo>[1], dims: readonly Dim[]): void => {
    inputs.push(valueInfo(name, elemType, dims));
    outputs.push(valueInfo(`new_${name}`, elemType, dims));
    nodes.push(node("Identity", [name], [`new_${name}`]));
  };
  let layer = 0;
  layout.numEncoderLayers.forEach((layers, stack) => {
    const left = layout.leftContextLen[stack]!;
    const dim = layout.encoderDims[stack]!;
    const keyDim = layout.queryHeadDims[stack]! * layout.numHeads[stack]!;
    const valueDim = layout.valueHeadDims[stack]! * layout.numHeads[stack]!;
    const convPad = Math.floor(layout.cnnModuleKernels[stack]! / 2);
    for (let i = 0; i < layers; i++, layer++) {
      state(`cached_key_${layer}`, DataType.FLOAT, [left, "N", keyDim]);
      state(`cached_nonlin_attn_${layer}`, DataType.FLOAT, [1, "N", left, (3 * dim) / 4]);
      state(`cached_val1_${layer}`, DataType.FLOAT, [left, "N", valueDim]);
      state(`cached_val2_${layer}`, DataType.FLOAT, [left, "N", valueDim]);
      state(`cached_conv1_${layer}`, DataType.FLOAT, ["N", dim, convPad]);
      state(`cached_conv2_${layer}`, DataType.FLOAT, ["N", dim, convPad]);
    }
  });
  const embedFreqs = Math.floor((Math.floor((FEATURE_DIM - 1) / 2) - 1) / 2);
  state("embed_states", DataType.FLOAT, ["N", 128, 3, embedFreqs]);
  // processed_lens counts 50 Hz frames (after the 2× embed): 16 more per chunk. sherpa-onnx feeds int64.
  inputs.push(valueInfo("processed_lens", DataType.INT64, ["N"]));
  outputs.push(valueInfo("new_processed_lens", DataType.INT64, ["N"]));
  initializers.push(int64Tensor("chunk_frames_50hz", [], [DECODE_CHUNK_LEN / 2]));
  nodes.push(node("Add", ["processed_lens", "chunk_frames_50hz"], ["new_processed_lens"]));

  // The acoustic part. x: (N, 45, 80); the chunk's first 32 frames, 4 per output frame.
  const selectionDim = layout.joinerDim - 1;
  initializers.push(
    int64Tensor("chunk_start", [1], [0]),
    int64Tensor("chunk_end", [1], [DECODE_CHUNK_LEN]),
    int64Tensor("time_axis", [1], [1]),
    int64Tensor("grouped_shape", [3], [0, OUT_FRAMES, SUBSAMPLING * FEATURE_DIM]),
    float("speech_log_energy", [], [SPEECH_LOG_ENERGY]),
    // +10 lets the loudness through (min), -10 forces blank.
    float(
      "emit_gate",
      [1, OUT_FRAMES, 1],
      Array.from({ length: OUT_FRAMES }, (_, t) => (EMIT_FRAMES.includes(t) ? 10 : -10)),
    ),
    // Spectral shape → token choice: fixed pseudo-random projection, outputs of order 1 for speech.
    floatTensor(
      "shape_projection",
      [SUBSAMPLING * FEATURE_DIM, selectionDim],
      randomWeights(SUBSAMPLING * FEATURE_DIM * selectionDim, 11, 0.05),
    ),
  );
  nodes.push(
    node("Slice", ["x", "chunk_start", "chunk_end", "time_axis"], ["chunk"]),
    node("Reshape", ["chunk", "grouped_shape"], ["grouped"]),
    node("ReduceLogSumExp", ["grouped"], ["loudness"], { axes: [2], keepdims: 1 }),
    node("Sub", ["loudness", "speech_log_energy"], ["speechness"]),
    node("Min", ["speechness", "emit_gate"], ["emit"]),
    node("ReduceMean", ["grouped"], ["mean_log_mel"], { axes: [2], keepdims: 1 }),
    node("Sub", ["grouped", "mean_log_mel"], ["spectral_shape"]),
    node("MatMul", ["spectral_shape", "shape_projection"], ["selection"]),
  );

  let selection = "selection";
  if (layout.computeLayers > 0) {
    // Compute only (the real model's cost): a deep MLP on the chunk, its result added at 1e-3 so the
    // hand-set behavior above stays the same.
    const groupedDim = (DECODE_CHUNK_LEN / 4) * FEATURE_DIM;
    initializers.push(
      int64Tensor("compute_shape", [3], [0, 4, groupedDim]),
      floatTensor(
        "compute_in",
        [groupedDim, COMPUTE_DIM],
        randomWeights(groupedDim * COMPUTE_DIM, 101, 0.03),
      ),
      floatTensor(
        "compute_out",
        [COMPUTE_DIM, selectionDim],
        randomWeights(COMPUTE_DIM * selectionDim, 102, 0.03),
      ),
      float("compute_scale", [], [1e-3]),
    );
    nodes.push(
      node("Reshape", ["chunk", "compute_shape"], ["compute_frames"]),
      node("MatMul", ["compute_frames", "compute_in"], ["compute_0_linear"]),
      node("Tanh", ["compute_0_linear"], ["compute_0"]),
    );
    for (let i = 1; i <= layout.computeLayers; i++) {
      initializers.push(
        floatTensor(
          `compute_${i}_weight`,
          [COMPUTE_DIM, COMPUTE_DIM],
          randomWeights(COMPUTE_DIM * COMPUTE_DIM, 200 + i, 0.03),
        ),
      );
      nodes.push(
        node("MatMul", [`compute_${i - 1}`, `compute_${i}_weight`], [`compute_${i}_linear`]),
        node("Tanh", [`compute_${i}_linear`], [`compute_${i}`]),
      );
    }
    nodes.push(
      node("ReduceMean", [`compute_${layout.computeLayers}`], ["compute_pooled"], { axes: [1], keepdims: 1 }),
      node("MatMul", ["compute_pooled", "compute_out"], ["compute_projected"]),
      node("Tanh", ["compute_projected"], ["compute_bounded"]),
      node("Mul", ["compute_bounded", "compute_scale"], ["compute_result"]),
      node("Add", ["selection", "compute_result"], ["selection_computed"]),
    );
    selection = "selection_computed";
  }
  nodes.push(node("Concat", ["emit", selection], ["encoder_out"], { axis: 2 }));

  return encodeModel({
    name: "streaming zipformer2 encoder (stand-in)",
    inputs,
    outputs,
    nodes,
    initializers,
    metadata: {
      model_type: "zipformer2",
      version: 1,
      model_author: "k2-fsa",
      comment: "streaming zipformer2",
      decode_chunk_len: DECODE_CHUNK_LEN,
      T,
      num_encoder_layers: layout.numEncoderLayers.join(","),
      encoder_dims: layout.encoderDims.join(","),
      cnn_module_kernels: layout.cnnModuleKernels.join(","),
      left_context_len: layout.leftContextLen.join(","),
      query_head_dims: layout.queryHeadDims.join(","),
      value_head_dims: layout.valueHeadDims.join(","),
      num_heads: layout.numHeads.join(","),
    },
  });
}

/** y (N, 2) previous tokens → decoder_out (N, joinerDim): mean of their embeddings, then a projection. */
function decoderModel(joinerDim: number): Uint8Array {
  // Channel 0 (the joiner's "emit" channel) stays 0: blank or not is the audio's call alone.
  const embeddings = randomWeights(STAND_IN_VOCAB_SIZE * joinerDim, 21, 1);
  for (let token = 0; token < STAND_IN_VOCAB_SIZE; token++) embeddings[token * joinerDim] = 0;
  const projection = new Float32Array(joinerDim * joinerDim);
  for (let i = 0; i < joinerDim; i++) projection[i * joinerDim + i] = 1;
  return encodeModel({
    name: "zipformer2 decoder (stand-in)",
    inputs: [valueInfo("y", DataType.INT64, ["N", CONTEXT_SIZE])],
    outputs: [valueInfo("decoder_out", DataType.FLOAT, ["N", joinerDim])],
    initializers: [
      floatTensor("embedding", [STAND_IN_VOCAB_SIZE, joinerDim], embeddings),
      floatTensor("decoder_proj", [joinerDim, joinerDim], projection),
    ],
    nodes: [
      node("Gather", ["embedding", "y"], ["embedded"]),
      node("ReduceMean", ["embedded"], ["context"], { axes: [1], keepdims: 0 }),
      node("MatMul", ["context", "decoder_proj"], ["decoder_out"]),
    ],
    metadata: { context_size: CONTEXT_SIZE, vocab_size: STAND_IN_VOCAB_SIZE },
  });
}

/** logit = output_linear(tanh(encoder_out + decoder_out)), as the real joiner; the weights hand-set. */
function joinerModel(joinerDim: number): Uint8Array {
  const weights = new Float32Array(joinerDim * STAND_IN_VOCAB_SIZE);
  // Row 0 ("emit") drives blank only: +emit → blank logit -16, -emit → +16.
  weights[0] = -BLANK_WEIGHT;
  // The other rows pick the token; scaled so token logits spread by ~2 whatever joinerDim is.
  const scale = 5.6 / Math.sqrt(joinerDim - 1);
  const picks = randomWeights((joinerDim - 1) * STAND_IN_VOCAB_SIZE, 31, scale);
  for (let row = 1; row < joinerDim; row++) {
    for (let token = 1; token < STAND_IN_VOCAB_SIZE; token++) {
      weights[row * STAND_IN_VOCAB_SIZE + token] = picks[(row - 1) * STAND_IN_VOCAB_SIZE + token]!;
    }
  }
  // <sos/eos> and <unk> never come out.
  const bias = new Float32Array(STAND_IN_VOCAB_SIZE);
  bias[1] = -30;
  bias[2] = -30;
  return encodeModel({
    name: "zipformer2 joiner (stand-in)",
    inputs: [
      valueInfo("encoder_out", DataType.FLOAT, ["N", joinerDim]),
      valueInfo("decoder_out", DataType.FLOAT, ["N", joinerDim]),
    ],
    outputs: [valueInfo("logit", DataType.FLOAT, ["N", STAND_IN_VOCAB_SIZE])],
    initializers: [
      floatTensor("output_linear_weight", [joinerDim, STAND_IN_VOCAB_SIZE], weights),
      floatTensor("output_linear_bias", [STAND_IN_VOCAB_SIZE], bias),
    ],
    nodes: [
      node("Add", ["encoder_out", "decoder_out"], ["joined"]),
      node("Tanh", ["joined"], ["activated"]),
      node("MatMul", ["activated", "output_linear_weight"], ["projected"]),
      node("Add", ["projected", "output_linear_bias"], ["logit"]),
    ],
    metadata: { joiner_dim: joinerDim },
  });
}

/**
 * Writes encoder/decoder/joiner ONNX files, tokens.txt and bpe.vocab into `dir`. "small" (the
 * default) is a few hundred KB and loads in milliseconds; "real" has the 2023-06-26 model's state
 * sizes and about its parameter count and compute (~260 MB), for benchmarks only.
 */
export function writeStreamingTransducerStandIn({
  dir,
  size = "small",
}: {
  dir: string;
  size?: "small" | "real";
}): StreamingTransducerStandIn {
  const layout = size === "real" ? REAL : SMALL;
  mkdirSync(dir, { recursive: true });
  const files: StreamingTransducerStandIn = {
    encoder: path.join(dir, "encoder.onnx"),
    decoder: path.join(dir, "decoder.onnx"),
    joiner: path.join(dir, "joiner.onnx"),
    tokens: path.join(dir, "tokens.txt"),
    bpeVocab: path.join(dir, "bpe.vocab"),
  };
  writeFileSync(files.encoder, encoderModel(layout));
  writeFileSync(files.decoder, decoderModel(layout.joinerDim));
  writeFileSync(files.joiner, joinerModel(layout.joinerDim));
  const pieces = standInTokens();
  writeFileSync(files.tokens, pieces.map((piece, id) => `${piece} ${id}\n`).join(""));
  writeFileSync(files.bpeVocab, pieces.map((piece, id) => `${piece}\t${pieceScore(piece, id)}\n`).join(""));
  return files;
}
