/**
 * A stand-in speaker embedding model for sherpa-onnx's `SpeakerEmbeddingExtractor`: the file format,
 * input and output names, shapes and metadata of 3D-Speaker's CAM++ export
 * (sherpa-onnx scripts/3dspeaker/export-onnx.py: input `x` [N, T, 80], output `embedding` [N, 192])
 * or of a WeSpeaker export (scripts/wespeaker/add_meta_data.py: input `feats` [B, T, 80], output
 * `embs` [B, 256]).
 *
 * Its numbers are not a real model's. The embedding is a hand-made statistic of the 80 fbank bins:
 * per bin, the log standard deviation over time of the frame-to-frame change and, at half weight, of
 * the features themselves, each centered across bins (how much each band moves, relative to the
 * others), projected to `dim` by a fixed matrix with orthonormal rows, so cosine similarity is that
 * of the statistic. It is blind to per-bin offsets, so the 3D-Speaker path (sherpa subtracts each
 * utterance's per-bin mean) and the WeSpeaker path (samples scaled by 32768: a constant offset in
 * the log domain) give nearly the same embedding. Measured through sherpa-onnx, 5 clips each of
 * the LJSpeech woman and the LibriVox man: same person 0.50–0.92 (mean 0.78), woman vs man
 * −0.12–0.26 (mean 0.10). It hears the recording as much as the voice: the single JFK and
 * LibriSpeech-1995 clips score 0.24–0.48 against the others, and against each other 0.36. Good
 * enough to tell these voices apart in tests, nothing more.
 *
 * `size: "real"` adds, with a negligible weight, a branch of CAM++'s size for benchmarks: 7.1 M
 * parameters (CAM++: 7.18 M, arXiv 2303.00332) and about 0.47 G multiply-adds per second of audio.
 * That estimate follows CAM++'s layout: a 2-D convolution front end of 32 channels over the 80 bins
 * at 100 frames/s (FCM, about 0.12 G/s), then 1-D convolutions at 50 frames/s holding nearly all
 * the weights, each weight used once per frame (about 0.35 G/s), then statistics pooling.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { DataType, encodeModel, GraphBuilder, node, randomWeights, valueInfo } from "./onnx-graph.js";

export type SpeakerEmbeddingFramework = "3d-speaker" | "wespeaker";

export interface SpeakerEmbeddingStandInOptions {
  readonly dir: string;
  /**
   * Embedding size (`output_dim`): 192 for CAM++ (the default for 3d-speaker), 256 for WeSpeaker's
   * ResNet34 (the default for wespeaker). At least 160, the statistic's size.
   */
  readonly dim?: number;
  /** "small" (the default) for tests; "real" for benchmarks: CAM++'s size and compute. */
  readonly size?: "small" | "real";
  readonly framework?: SpeakerEmbeddingFramework;
}

const FEATURE_DIM = 80;
/** Two statistics per fbank bin (see `voiceStatistic`). */
const STATISTIC_DIM = 2 * FEATURE_DIM;
/** The ratio of the "real" branch's output in the embedding: enough to be computed, too small to matter. */
const REAL_BRANCH_WEIGHT = 1e-3;

/** What each framework's export calls things, and the metadata sherpa-onnx reads from it. */
const EXPORTS: Record<
  SpeakerEmbeddingFramework,
  {
    file: string;
    input: string;
    output: string;
    batch: string;
    defaultDim: number;
    metadata: (dim: number) => Record<string, string | number>;
  }
> = {
  "3d-speaker": {
    file: "3dspeaker_speech_campplus_sv_en_voxceleb_16k.onnx",
    input: "x",
    output: "embedding",
    batch: "N",
    defaultDim: 192,
    metadata: (dim) => ({
      framework: "3d-speaker",
      language: "English",
      url: "https://www.modelscope.cn/models/iic/speech_campplus_sv_en_voxceleb_16k/summary",
      comment:
        "relay stand-in: the names and metadata of iic/speech_campplus_sv_en_voxceleb_16k, not its weights",
      sample_rate: 16000,
      output_dim: dim,
      // Samples in [-1, 1]; sherpa subtracts each utterance's per-bin mean from the features.
      normalize_samples: 1,
      feature_normalize_type: "global-mean",
    }),
  },
  wespeaker: {
    file: "wespeaker_en_voxceleb_resnet34.onnx",
    input: "feats",
    output: "embs",
    batch: "B",
    defaultDim: 256,
    metadata: (dim) => ({
      framework: "wespeaker",
      language: "English",
      url: "https://github.com/wenet-e2e/wespeaker/blob/master/docs/pretrained.md",
      comment: "relay stand-in: the names and metadata of a WeSpeaker export, not its weights",
      sample_rate: 16000,
      output_dim: dim,
      // Samples in [-32768, 32767]; no feature normalization.
      normalize_samples: 0,
    }),
  },
};

/** Writes the stand-in into `dir` (created if needed) and returns its path. */
export function writeSpeakerEmbeddingStandIn(options: SpeakerEmbeddingStandInOptions): { model: string } {
  const framework = options.framework ?? "3d-speaker";
  const names = EXPORTS[framework];
  const dim = options.dim ?? names.defaultDim;
  if (!Number.isInteger(dim) || dim < STATISTIC_DIM)
    throw new RangeError(`dim must be an integer >= ${STATISTIC_DIM} (the statistic's size), got ${dim}`);

  const graph = new GraphBuilder();
  const statistic = voiceStatistic(graph, names.input);
  let embedding = project(graph, statistic, STATISTIC_DIM, dim, "projection");
  if (options.size === "real") {
    const real = realSizeBranch(graph, names.input, dim);
    const scaled = graph.op("Mul", [real, graph.floats("real_branch_weight", [1], [REAL_BRANCH_WEIGHT])]);
    embedding = graph.op("Add", [embedding, scaled]);
  }
  graph.nodes.push(node("Identity", [embedding], [names.output]));

  const model = path.join(options.dir, names.file);
  mkdirSync(options.dir, { recursive: true });
  writeFileSync(
    model,
    encodeModel({
      name: `speaker embedding stand-in (${framework}, ${options.size ?? "small"})`,
      inputs: [valueInfo(names.input, DataType.FLOAT, [names.batch, "T", FEATURE_DIM])],
      outputs: [valueInfo(names.output, DataType.FLOAT, [names.batch, dim])],
      nodes: graph.nodes,
      initializers: graph.initializers,
      metadata: names.metadata(dim),
    }),
  );
  return { model };
}

/**
 * [N, from] → [N, to] by the first `from` rows of a Householder reflection I − 2vvᵀ of size `to`:
 * near-identity, rows orthonormal, so cosine similarity survives the projection exactly.
 */
function project(graph: GraphBuilder, input: string, from: number, to: number, name: string): string {
  const v = randomWeights(to, 7919, 1);
  const norm2 = v.reduce((sum, x) => sum + x * x, 0);
  const matrix = new Float32Array(from * to);
  for (let row = 0; row < from; row++)
    for (let col = 0; col < to; col++)
      matrix[row * to + col] = (row === col ? 1 : 0) - (2 * v[row]! * v[col]!) / norm2;
  return graph.op("MatMul", [input, graph.floats(`${name}_matrix`, [from, to], matrix)]);
}

/**
 * [N, T, 80] features → [N, 160]: per bin, the log standard deviation of the frame-to-frame change
 * and (at half weight) of the features themselves, each centered across bins. The first frame's
 * change is zero, so one frame is enough; a small fixed offset keeps a featureless input (all bins
 * alike) from giving a zero vector, whose cosine is undefined.
 */
function voiceStatistic(graph: GraphBuilder, input: string): string {
  const timeAxis = graph.ints("time_axis", [1], [1]);
  const zero = graph.ints("zero", [1], [0]);
  const first = graph.op("Slice", [input, zero, graph.ints("one", [1], [1]), timeAxis]);
  const allButLast = graph.op("Slice", [input, zero, graph.ints("minus_one", [1], [-1]), timeAxis]);
  const previous = graph.op("Concat", [first, allButLast], { axis: 1 });
  const change = graph.op("Sub", [input, previous]);
  const mean = graph.op("ReduceMean", [input], { axes: [1], keepdims: 1 });
  const deviation = graph.op("Sub", [input, mean]);
  // log std = 0.5 · log variance; the level part counts half as much as the change part.
  const parts = [
    centeredLogVariance(graph, change, "change", 0.5),
    centeredLogVariance(graph, deviation, "level", 0.25),
  ];
  const joined = graph.op("Concat", parts, { axis: 1 });
  const offset = graph.floats(
    "statistic_offset",
    [STATISTIC_DIM],
    randomWeights(STATISTIC_DIM, 104729, 0.01),
  );
  return graph.op("Add", [joined, offset]);
}

/** [N, T, 80] zero-mean values → [N, 80]: `scale` · log(mean square over time), centered across bins. */
function centeredLogVariance(graph: GraphBuilder, values: string, name: string, scale: number): string {
  const squared = graph.op("Mul", [values, values]);
  const variance = graph.op("ReduceMean", [squared], { axes: [1], keepdims: 0 });
  const floored = graph.op("Add", [variance, graph.floats(`${name}_floor`, [1], [1e-4])]);
  const logVariance = graph.op("Log", [floored]);
  const level = graph.op("ReduceMean", [logVariance], {
    axes: [1],
    keepdims: 1,
  });
  const centered = graph.op("Sub", [logVariance, level]);
  return graph.op("Mul", [centered, graph.floats(`${name}_scale`, [1], [scale])]);
}

/**
 * CAM++'s size and compute, none of its function: a 2-D convolution front end over (bin, frame),
 * 1-D convolutions at half the frame rate, mean and max pooling, a dense layer to `dim`, tanh.
 */
function realSizeBranch(graph: GraphBuilder, input: string, dim: number): string {
  // Centered per bin, so the WeSpeaker path's large log-domain offset does not reach the weights.
  const mean = graph.op("ReduceMean", [input], { axes: [1], keepdims: 1 });
  const centered = graph.op("Sub", [input, mean]);
  // [N, T, 80] → [N, 1, 80, T]: one channel over (bin, frame), as CAM++'s FCM sees it.
  const image = graph.op("Unsqueeze", [
    graph.op("Transpose", [centered], { perm: [0, 2, 1] }),
    graph.ints("channel_axis", [1], [1]),
  ]);

  const channels = 32;
  let x = image;
  let inChannels = 1;
  // Bin strides: 80 → 40 → 20 → 10 bins, like FCM's downsampling; time stays at 100 frames/s.
  for (const [i, binStride] of [1, 2, 1, 2, 1, 2].entries()) {
    const w = graph.weights(`fcm${i}_w`, [channels, inChannels, 3, 3], inChannels * 9, "he");
    const conv = graph.op("Conv", [x, w], { pads: [1, 1, 1, 1], strides: [binStride, 1] });
    x = graph.op("Relu", [conv]);
    inChannels = channels;
  }
  // [N, 32, 10, T] → [N, 320, T]
  x = graph.op("Reshape", [x, graph.ints("tdnn_shape", [3], [0, channels * 10, -1])]);

  // [in, out, kernel, stride]: the stride-2 layer halves the frame rate, as CAM++'s first TDNN does.
  const layers: [number, number, number, number][] = [
    [320, 512, 5, 2],
    ...Array.from({ length: 7 }, (): [number, number, number, number] => [512, 512, 3, 1]),
    [512, 512, 1, 1],
    [512, 512, 1, 1],
  ];
  for (const [i, [inC, outC, kernel, stride]] of layers.entries()) {
    const w = graph.weights(`tdnn${i}_w`, [outC, inC, kernel], inC * kernel, "he");
    const b = graph.floats(`tdnn${i}_b`, [outC], new Float32Array(outC));
    const half = Math.floor(kernel / 2);
    const conv = graph.op("Conv", [x, w, b], { pads: [half, half], strides: [stride] });
    x = graph.op("Relu", [conv]);
  }

  const pooledMean = graph.op("ReduceMean", [x], { axes: [2], keepdims: 0 });
  const pooledMax = graph.op("ReduceMax", [x], { axes: [2], keepdims: 0 });
  const pooled = graph.op("Concat", [pooledMean, pooledMax], { axis: 1 });
  const dense = graph.op("MatMul", [pooled, graph.weights("dense_w", [1024, dim], 1024, "he")]);
  return graph.op("Tanh", [dense]);
}
