/**
 * The real-size bodies of the OpenVoice V2 tone colour stand-ins (tone-color.ts), layer for layer the
 * shapes of myshell-ai/OpenVoice `openvoice/models.py` (74a1d147) under the V2 converter config, with
 * random weights. They are mixed faintly into the stand-ins' outputs so that their weights and compute
 * stay in the graph (onnxruntime prunes nodes no output reads) without changing what the tests measure.
 *
 * Weight norm is folded (one weight per layer, as after `remove_weight_norm`). The published files are
 * slightly larger than these (converter 127 891 564 B against 127 817 607 B, ≈ 18 k values more;
 * extractor 3 257 992 B against 3 255 940 B, ≈ 500 more): constants the exporter kept, or part of
 * weight norm's `weight_g`; unverified.
 */
import { type GraphBuilder, node } from "./onnx-graph.js";

/** The converter config's model sizes (`TONE_COLOR_CONFIG.model`). */
const SPEC_CHANNELS = 513;
const HIDDEN = 192;
const GIN = 256;
const WN_KERNEL = 5;
const ENC_Q_LAYERS = 16;
const FLOWS = 4;
const FLOW_LAYERS = 4;
const UPSAMPLE_INITIAL = 512;
const UPSAMPLING = [
  { rate: 8, kernel: 16 },
  { rate: 8, kernel: 16 },
  { rate: 2, kernel: 4 },
  { rate: 2, kernel: 4 },
];
const RESBLOCK_KERNELS = [3, 7, 11];
const RESBLOCK_DILATIONS = [1, 3, 5];

/** Splits `x` along `axis` into parts of the given sizes (one node, several outputs). */
function splitInto(graph: GraphBuilder, x: string, sizes: readonly number[], axis = 1): string[] {
  const outputs = sizes.map(() => graph.name("part"));
  graph.nodes.push(node("Split", [x, graph.ints("sizes", [sizes.length], sizes)], outputs, { axis }));
  return outputs;
}

function bias(graph: GraphBuilder, channels: number, fanIn: number): string {
  return graph.weights("bias", [channels], fanIn);
}

interface ConvWeights {
  readonly weight: string;
  readonly bias?: string;
  readonly kernel: number;
}

/** A torch `Conv1d`'s weights (and bias): [out, in, kernel], ±1/√(in·kernel). */
function convWeights(
  graph: GraphBuilder,
  inChannels: number,
  outChannels: number,
  kernel: number,
  withBias = true,
): ConvWeights {
  const fanIn = inChannels * kernel;
  const weight = graph.weights("conv_w", [outChannels, inChannels, kernel], fanIn);
  return { weight, kernel, ...(withBias ? { bias: bias(graph, outChannels, fanIn) } : {}) };
}

/** A 1-D convolution over [1, C, L] with "same" padding (torch's padding (k−1)·d/2). */
function applyConv(graph: GraphBuilder, x: string, conv: ConvWeights, dilation = 1): string {
  const pad = (dilation * (conv.kernel - 1)) / 2;
  const inputs = conv.bias ? [x, conv.weight, conv.bias] : [x, conv.weight];
  return graph.op("Conv", inputs, { kernel_shape: [conv.kernel], dilations: [dilation], pads: [pad, pad] });
}

function conv1d(
  graph: GraphBuilder,
  x: string,
  inChannels: number,
  outChannels: number,
  kernel: number,
  options: { dilation?: number; bias?: boolean } = {},
): string {
  return applyConv(
    graph,
    x,
    convWeights(graph, inChannels, outChannels, kernel, options.bias ?? true),
    options.dilation,
  );
}

function leakyRelu(graph: GraphBuilder, x: string, alpha: number): string {
  return graph.op("LeakyRelu", [x], { alpha });
}

/**
 * OpenVoice's `ReferenceEncoder(spec_channels=513, gin_channels=256, layernorm=True)` over `input`
 * (float [1, T, 513], time-major): LayerNorm(513), six Conv2d 3×3 stride 2 pad 1 with filters
 * 32·32·64·64·128·128 and ReLU (513 bins → 9), [1, T', 128·9 = 1152], GRU(1152 → 128) whose last
 * state goes through Linear(128 → 256). Parameters: LayerNorm 1 026, convolutions 286 432, GRU
 * 492 288, Linear 33 024 — 812 770 in all (≈ 3.25 MB; the published extractor is 3 257 992 B).
 * Compute ≈ 0.055 G multiply-adds per second of audio (86 frames/s, halved in time and frequency by
 * each convolution): the second convolution (32·32·9 at 22·129 positions/s) 26 M of it, the third
 * 13 M, the GRU 0.49 M a step at 1.3 steps/s.
 * Returns [1, 256].
 */
export function addReferenceEncoderBody(graph: GraphBuilder, input: string): string {
  let x = graph.op(
    "LayerNormalization",
    [
      graph.op("Unsqueeze", [input, graph.ints("axis", [1], [1])]),
      graph.floats("ln_scale", [SPEC_CHANNELS], new Float32Array(SPEC_CHANNELS).fill(1)),
      graph.floats("ln_bias", [SPEC_CHANNELS], new Float32Array(SPEC_CHANNELS)),
    ],
    { axis: -1, epsilon: 1e-5 },
  );
  let channels = 1;
  for (const filters of [32, 32, 64, 64, 128, 128]) {
    const fanIn = channels * 9;
    const weight = graph.weights("conv2d_w", [filters, channels, 3, 3], fanIn, "he");
    x = graph.op("Relu", [
      graph.op("Conv", [x, weight, bias(graph, filters, fanIn)], {
        kernel_shape: [3, 3],
        strides: [2, 2],
        pads: [1, 1, 1, 1],
      }),
    ]);
    channels = filters;
  }
  // [1, 128, T', 9] → [1, T', 128, 9] → [1, T', 1152] → GRU's [T', 1, 1152].
  const rows = graph.op("Reshape", [
    graph.op("Transpose", [x], { perm: [0, 2, 1, 3] }),
    graph.ints("rows", [3], [1, -1, 128 * 9]),
  ]);
  const sequence = graph.op("Transpose", [rows], { perm: [1, 0, 2] });
  const gruHidden = 128;
  const everyState = graph.name("gru_y");
  const lastState = graph.name("gru_h");
  graph.nodes.push(
    node(
      "GRU",
      [
        sequence,
        graph.weights("gru_w", [1, 3 * gruHidden, 128 * 9], 128 * 9),
        graph.weights("gru_r", [1, 3 * gruHidden, gruHidden], gruHidden),
        graph.weights("gru_b", [1, 6 * gruHidden], gruHidden),
      ],
      [everyState, lastState],
      // PyTorch's GRU applies the reset gate after the recurrent product.
      { hidden_size: gruHidden, linear_before_reset: 1 },
    ),
  );
  const state = graph.op("Reshape", [lastState, graph.ints("state", [2], [1, gruHidden])]);
  return graph.op("Add", [
    graph.op("MatMul", [state, graph.weights("proj_w", [gruHidden, GIN], gruHidden)]),
    bias(graph, GIN, gruHidden),
  ]);
}

interface WaveNetWeights {
  readonly condition: ConvWeights;
  readonly layers: readonly { readonly input: ConvWeights; readonly resSkip: ConvWeights }[];
}

/**
 * OpenVoice's gated WaveNet (`modules.WN`, hidden 192, kernel 5, dilation 1, gin 256): cond_layer 1×1
 * (256 → 2·192·layers), per layer a kernel-5 convolution 192 → 384 and a 1×1 convolution to residual
 * and skip (192 → 384; the last layer to skip only, 192 → 192).
 */
function waveNetWeights(graph: GraphBuilder, layers: number): WaveNetWeights {
  return {
    condition: convWeights(graph, GIN, 2 * HIDDEN * layers, 1),
    layers: Array.from({ length: layers }, (_, layer) => ({
      input: convWeights(graph, HIDDEN, 2 * HIDDEN, WN_KERNEL),
      resSkip: convWeights(graph, HIDDEN, layer < layers - 1 ? 2 * HIDDEN : HIDDEN, 1),
    })),
  };
}

/**
 * The WaveNet over `x` [1, 192, T] conditioned on `g` [1, 256, 1]: per layer the input convolution
 * plus its slice of the condition, tanh·sigmoid, then residual and skip. Returns the skip sum, masked.
 */
function applyWaveNet(graph: GraphBuilder, net: WaveNetWeights, x: string, g: string, mask: string): string {
  const count = net.layers.length;
  const condition = applyConv(graph, g, net.condition);
  const perLayer = splitInto(graph, condition, new Array<number>(count).fill(2 * HIDDEN));
  let h = x;
  let skip: string | undefined;
  net.layers.forEach((layer, i) => {
    const input = graph.op("Add", [applyConv(graph, h, layer.input), perLayer[i]!]);
    const [filterHalf, gateHalf] = splitInto(graph, input, [HIDDEN, HIDDEN]);
    const gated = graph.op("Mul", [graph.op("Tanh", [filterHalf!]), graph.op("Sigmoid", [gateHalf!])]);
    let skipPart = applyConv(graph, gated, layer.resSkip);
    if (i < count - 1) {
      const [residual, skipHalf] = splitInto(graph, skipPart, [HIDDEN, HIDDEN]);
      h = graph.op("Mul", [graph.op("Add", [h, residual!]), mask]);
      skipPart = skipHalf!;
    }
    skip = skip ? graph.op("Add", [skip, skipPart]) : skipPart;
  });
  return graph.op("Mul", [skip!, mask]);
}

interface CouplingWeights {
  readonly pre: ConvWeights;
  readonly waveNet: WaveNetWeights;
  readonly post: ConvWeights;
}

/**
 * A `ResidualCouplingLayer(192, 192, 5, 1, 4, gin 256, mean_only=True)`: pre 1×1 96 → 192, WaveNet of
 * 4 layers, post 1×1 192 → 96 (the mean). Built once, used by both passes of the flow.
 */
function couplingWeights(graph: GraphBuilder): CouplingWeights {
  const half = HIDDEN / 2;
  return {
    pre: convWeights(graph, half, HIDDEN, 1),
    waveNet: waveNetWeights(graph, FLOW_LAYERS),
    post: convWeights(graph, HIDDEN, half, 1),
  };
}

/** One coupling step: x1 ± mean(x0), forward adding, reverse subtracting (the flow flips between steps). */
function coupling(
  graph: GraphBuilder,
  layer: CouplingWeights,
  x: string,
  g: string,
  mask: string,
  reverse: boolean,
): string {
  const half = HIDDEN / 2;
  const [x0, x1] = splitInto(graph, x, [half, half]);
  const h = graph.op("Mul", [applyConv(graph, x0!, layer.pre), mask]);
  const encoded = applyWaveNet(graph, layer.waveNet, h, g, mask);
  const mean = graph.op("Mul", [applyConv(graph, encoded, layer.post), mask]);
  const moved = graph.op("Mul", [graph.op(reverse ? "Sub" : "Add", [x1!, mean]), mask]);
  return graph.op("Concat", [x0!, moved], { axis: 1 });
}

/** `modules.Flip`: the channels in reverse order. */
function flip(graph: GraphBuilder, x: string): string {
  const reversed = Array.from({ length: HIDDEN }, (_, i) => HIDDEN - 1 - i);
  return graph.op("Gather", [x, graph.ints("flip", [HIDDEN], reversed)], { axis: 1 });
}

/** HiFi-GAN `Generator` with resblock "1" over [1, 192, T] conditioned on `g`; returns [1, 1, 256·T]. */
function addDecoder(graph: GraphBuilder, z: string, g: string): string {
  let y = graph.op("Add", [
    conv1d(graph, z, HIDDEN, UPSAMPLE_INITIAL, 7),
    conv1d(graph, g, GIN, UPSAMPLE_INITIAL, 1),
  ]);
  let channels = UPSAMPLE_INITIAL;
  for (const { rate, kernel } of UPSAMPLING) {
    const outChannels = channels / 2;
    const fanIn = (channels * kernel) / rate;
    const weight = graph.weights("up_w", [channels, outChannels, kernel], fanIn);
    const pad = (kernel - rate) / 2;
    y = graph.op("ConvTranspose", [leakyRelu(graph, y, 0.1), weight, bias(graph, outChannels, fanIn)], {
      kernel_shape: [kernel],
      strides: [rate],
      pads: [pad, pad],
    });
    channels = outChannels;
    let sum: string | undefined;
    for (const blockKernel of RESBLOCK_KERNELS) {
      let r = y;
      for (const dilation of RESBLOCK_DILATIONS) {
        const first = conv1d(graph, leakyRelu(graph, r, 0.1), channels, channels, blockKernel, { dilation });
        const second = conv1d(graph, leakyRelu(graph, first, 0.1), channels, channels, blockKernel);
        r = graph.op("Add", [r, second]);
      }
      sum = sum ? graph.op("Add", [sum, r]) : r;
    }
    y = graph.op("Mul", [sum!, graph.floats("third", [], [1 / RESBLOCK_KERNELS.length])]);
  }
  const post = conv1d(graph, leakyRelu(graph, y, 0.01), channels, 1, 7, { bias: false });
  return graph.op("Tanh", [post]);
}

/**
 * `SynthesizerTrn.voice_conversion` of the V2 converter (zero_g): the PosteriorEncoder (pre 1×1
 * 513 → 192, WaveNet of 16 layers conditioned on zeros, proj 1×1 192 → 384, z = its mean half; the
 * real graph adds noise scaled by tau, left out here so the output is deterministic), the flow of 4
 * couplings forward on `srcTone` then in reverse on `destTone` (the same weights twice), and the
 * HiFi-GAN decoder conditioned on zeros. `audio` [1, 513, T], `mask` [1, 1, T]; returns [1, 1, 256·T].
 *
 * Parameters ≈ 31.9 M (≈ 128 MB; the published tone_clone_model.onnx is 127 891 564 B):
 * - PosteriorEncoder 8.80 M: WaveNet 16·(192·384·5 + 192·384) ≈ 7.05 M plus its condition 256·6 144
 *   = 1.58 M, pre 0.10 M, proj 0.07 M;
 * - flow 8.67 M: 4 × (WaveNet 4 layers 1.74 M + condition 0.39 M + pre/post 0.04 M);
 * - decoder 14.46 M: resblocks 126·C² a stage for C = 256, 128, 64, 32 (10.98 M), upsampling 2.66 M,
 *   conv_pre 0.69 M, condition 0.13 M.
 * Compute ≈ 28 G multiply-adds per second of audio (86.1 frames/s, 22 050 samples/s): decoder ≈ 26.4 G
 * (resblocks 126·C² a sample at 689, 5 513, 11 025 and 22 050 samples/s: 5.7 + 11.4 + 5.7 + 2.8 G;
 * upsampling 0.8 G), flows ≈ 1.25 G (7.2 M a frame each way), PosteriorEncoder ≈ 0.62 G (7.2 M a frame).
 * Measured (onnxruntime-node 1.30, one intra-op thread, this project's 2-core AMD EPYC with other work
 * running, load ≈ 6): 5 s of audio (431 frames) in 5.3–7.8 s, real-time factor 1.1–1.6; the session
 * takes 0.6–1.1 s to create and the model 0.5–0.7 s to build.
 */
export function addConverterBody(
  graph: GraphBuilder,
  audio: string,
  mask: string,
  srcTone: string,
  destTone: string,
): string {
  // zero_g: the encoder and decoder get zeros shaped like the tone (still a graph value, so the
  // condition layers' weights and compute stay in the graph as in the export).
  const zeros = graph.op("Mul", [srcTone, graph.floats("zero", [], [0])]);

  const pre = graph.op("Mul", [conv1d(graph, audio, SPEC_CHANNELS, HIDDEN, 1), mask]);
  const encoded = applyWaveNet(graph, waveNetWeights(graph, ENC_Q_LAYERS), pre, zeros, mask);
  const stats = graph.op("Mul", [conv1d(graph, encoded, HIDDEN, 2 * HIDDEN, 1), mask]);
  const [mean] = splitInto(graph, stats, [HIDDEN, HIDDEN]);
  let z = mean!;

  const layers = Array.from({ length: FLOWS }, () => couplingWeights(graph));
  for (const layer of layers) z = flip(graph, coupling(graph, layer, z, srcTone, mask, false));
  for (const layer of [...layers].reverse()) z = coupling(graph, layer, flip(graph, z), destTone, mask, true);

  return addDecoder(graph, graph.op("Mul", [z, mask]), zeros);
}
