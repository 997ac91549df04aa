/**
 * A stand-in Piper VITS voice for sherpa-onnx's `OfflineTts` (`model.vits`): Piper's export — inputs
 * `input` int64 [1, N], `input_lengths` int64 [1], `scales` float [3] (noise, length, noise_w) and, for a
 * multi-speaker voice only, `sid` int64 [1]; output `output` float [1, 1, 1, T] (Piper's
 * `infer(...)[0].unsqueeze(1)`) — with the metadata sherpa-onnx's Piper conversion writes, and Piper's
 * phoneme id map as tokens.txt, phonemized by sherpa-onnx's bundled eSpeak NG over Debian's espeak-ng data.
 *
 * What it says is no speech: a harmonic tone (pitch set by the speaker id) with a syllable-rate envelope,
 * as long as a real voice would take for the same phoneme ids: each id has a hand-set duration in frames
 * of 256 samples, scaled by the length scale and rounded up as VITS does (`ceil(w * length_scale)`).
 *
 * `size: "real"` adds a Piper-medium amount of weights and compute, for benchmarks (see `addMediumBody`).
 */
import { existsSync, readdirSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { DataType, encodeModel, GraphBuilder, node, valueInfo } from "./onnx-graph.js";

export interface VitsStandInOptions {
  readonly dir: string;
  /** The metadata "language", as Piper names it ("English"). */
  readonly language?: string;
  /** The eSpeak NG voice that phonemizes the text ("en-us"). */
  readonly voice?: string;
  readonly sampleRate?: number;
  /** Piper's `num_speakers`; above 1 the model takes a `sid` input. */
  readonly speakers?: number;
  /** "small": the tone alone (kilobytes, microseconds). "real": Piper medium's weights and compute. */
  readonly size?: "small" | "real";
}

export interface VitsStandInFiles {
  readonly model: string;
  readonly tokens: string;
  readonly dataDir: string;
}

/** Samples per VITS frame (Piper's hop length). */
export const VITS_HOP = 256;
/** Lowest pitch and the step between speakers; speakers repeat every `PITCH_STEPS`. */
export const VITS_BASE_PITCH_HZ = 110;
export const VITS_PITCH_STEP_HZ = 40;
const PITCH_STEPS = 8;

/** The pitch the stand-in speaks with for a speaker id. */
export function vitsStandInPitch(sid: number): number {
  return VITS_BASE_PITCH_HZ + VITS_PITCH_STEP_HZ * (sid % PITCH_STEPS);
}

/**
 * Piper's phoneme id map (piper-phonemize DEFAULT_PHONEME_ID_MAP): symbol i has id i. Piper models have
 * 256 embeddings (MAX_PHONEMES); the ids past the map are unused.
 */
const PIPER_SYMBOLS = [
  ..."_^$ !'(),-.:;?abcdefhijklmnopqrstuvwxyz",
  ..."æçðøħŋœǀǁǂǃɐɑɒɓɔɕɖɗɘəɚɛɜɞɟɠɡɢɣɤɥɦɧɨɪɫɬɭɮɯɰɱɲɳɴɵɶɸɹɺɻɽɾʀʁʂʃʄʈʉʊʋʌʍʎʏʐʑʒʔʕʘʙʛʜʝʟʡʢʲˈˌːˑ˞βθχᵻⱱ",
  ..."0123456789",
  "\u0327", // combining cedilla
  "\u0303", // combining tilde
  "\u032a", // combining bridge below
  "\u032f", // combining inverted breve below
  "\u0329", // combining vertical line below
  ...'ʰˤε↓#"↑',
  "\u033a", // Basque
  "\u033b",
  ..."gʦX", // Luxembourgish
  "\u031d", // Czech
  "\u030a",
];
const PIPER_VOCABULARY = 256;

/**
 * Frames per phoneme id before the length scale, set so "Hello world. How are you?" lasts about 1.8 s
 * at 22050 Hz (Piper's en_US medium voices take about 1.7 s): pads short, phonemes longer, punctuation a
 * pause. Each id gets at least one frame, as in VITS, so speed 2 shortens by less than half.
 */
function framesPerId(symbol: string | undefined): number {
  if (symbol === undefined) return 0;
  if (symbol === "_") return 0.6;
  if (symbol === "^" || symbol === "$") return 1.5;
  if (".,;:!?".includes(symbol)) return 8;
  if ("ˈˌːˑ".includes(symbol)) return 1;
  return 4.5;
}

/** The directory of Debian's espeak-ng-data (package espeak-ng-data), which sherpa-onnx's eSpeak NG reads. */
export function findEspeakNgData(): string {
  const libDirs = existsSync("/usr/lib")
    ? readdirSync("/usr/lib").filter((name) => name.includes("-linux-"))
    : [];
  const candidates = [
    ...libDirs.map((name) => path.join("/usr/lib", name, "espeak-ng-data")),
    "/usr/share/espeak-ng-data",
    "/usr/local/share/espeak-ng-data",
  ];
  const found = candidates.find((dir) => existsSync(path.join(dir, "phontab")));
  if (!found)
    throw new Error(`no espeak-ng-data (apt-get install espeak-ng-data); looked in ${candidates.join(", ")}`);
  return found;
}

/** Piper's tokens.txt: `<symbol> <id>` a line; the space's line is " 3", which sherpa-onnx reads as " ". */
export function piperTokensText(): string {
  return PIPER_SYMBOLS.map((symbol, id) => `${symbol} ${id}\n`).join("");
}

/** The pitch [1] of the speaker `sid` (int64 [1]), or of the only speaker. */
function addPitch(graph: GraphBuilder, sid: string | undefined): string {
  if (!sid) return graph.floats("pitch_hz", [1], [VITS_BASE_PITCH_HZ]);
  const step = graph.op("Mod", [sid, graph.ints("pitch_steps", [1], [PITCH_STEPS])]);
  const stepHz = graph.op("Mul", [
    graph.op("Cast", [step], { to: DataType.FLOAT }),
    graph.floats("step_hz", [1], [VITS_PITCH_STEP_HZ]),
  ]);
  return graph.op("Add", [stepHz, graph.floats("base_hz", [1], [VITS_BASE_PITCH_HZ])]);
}

/**
 * The stand-in's voice over `sampleIndex` (float [T]): five harmonics of `pitch` (float [1], Hz) under a
 * 4 Hz syllable envelope that never falls silent; peak about 0.45, RMS about 0.12.
 */
export function addHarmonicVoice(
  graph: GraphBuilder,
  sampleIndex: string,
  pitch: string,
  sampleRate: number,
): string {
  const radiansPerSample = graph.op("Mul", [
    pitch,
    graph.floats("two_pi_over_rate", [1], [(2 * Math.PI) / sampleRate]),
  ]);
  const phase = graph.op("Mul", [sampleIndex, radiansPerSample]);
  const phaseColumn = graph.op("Unsqueeze", [phase, graph.ints("axis", [1], [1])]);
  const harmonicNumbers = [1, 2, 3, 4, 5];
  const harmonicPhases = graph.op("MatMul", [
    phaseColumn,
    graph.floats("harmonics", [1, harmonicNumbers.length], harmonicNumbers),
  ]);
  const amplitudes = graph.floats("amplitudes", [harmonicNumbers.length, 1], [0.2, 0.12, 0.08, 0.05, 0.03]);
  const voiced = graph.op("MatMul", [graph.op("Sin", [harmonicPhases]), amplitudes]);
  const voicedRow = graph.op("Reshape", [voiced, graph.ints("flat", [1], [-1])]);

  const syllablePhase = graph.op("Mul", [
    sampleIndex,
    graph.floats("syllable_rate", [], [(2 * Math.PI * 4) / sampleRate]),
  ]);
  const envelope = graph.op("Add", [
    graph.op("Mul", [graph.op("Sin", [syllablePhase]), graph.floats("depth", [], [0.45])]),
    graph.floats("floor", [], [0.55]),
  ]);
  return graph.op("Mul", [voicedRow, envelope]);
}

/** A 1-D convolution over [1, C, L] with "same" padding. */
function conv(
  graph: GraphBuilder,
  x: string,
  inChannels: number,
  outChannels: number,
  kernel: number,
  dilation = 1,
): string {
  const weight = graph.weights("conv_w", [outChannels, inChannels, kernel], inChannels * kernel);
  const pad = (dilation * (kernel - 1)) / 2;
  return graph.op("Conv", [x, weight], { kernel_shape: [kernel], dilations: [dilation], pads: [pad, pad] });
}

function leakyRelu(graph: GraphBuilder, x: string, alpha: number): string {
  return graph.op("LeakyRelu", [x], { alpha });
}

/**
 * Piper medium's body (piper_train defaults: hidden 192, filter 768, 6 encoder layers, kernel 3; 4 flows of
 * 4 WaveNet layers, kernel 5; HiFi-GAN decoder with resblock "2", upsample 8·8·4 from 256 channels, kernels
 * 16·16·8, resblock kernels 3·5·7 with dilations (1,2)·(2,6)·(3,12)), with random weights:
 * - parameters ≈ 15 M (≈ 60 MB; en_US-lessac-medium.onnx is 63 MB): encoder 6.2 M (attention 4·192², FFN
 *   2·192·768·3 a layer), flows 7.1 M (4·4·(192·384·5 + 192·384)), decoder 1.7 M;
 * - compute ≈ 2.7 G multiply-adds per second of audio: decoder ≈ 1.9 G (its resblocks at 689, 5 513 and
 *   22 050 samples/s: 128²·30, 64²·30 and 32²·30 MACs a sample), flows ≈ 0.6 G (7.1 M a frame, 86 frames/s),
 *   encoder ≈ 0.2 G (6.2 M an id, ~35 ids/s).
 * The stochastic duration predictor (~0.5 M) is left out: durations come from the hand-set table.
 * Measured (onnxruntime in sherpa-onnx 1.13.8, one thread, this project's 2-core AMD EPYC): 26.5 s of
 * audio in 1.1 s, real-time factor 0.045.
 * Returns the decoder's waveform, [1, 1, frames·256].
 */
function addMediumBody(
  graph: GraphBuilder,
  ids: string,
  framesPerToken: string,
  totalFrames: string,
): string {
  const hidden = 192;
  const filter = 768;

  // Text encoder over [1, 192, N].
  const embedded = graph.op("Gather", [graph.weights("embedding", [PIPER_VOCABULARY, hidden], hidden), ids]);
  let x = graph.op("Transpose", [embedded], { perm: [0, 2, 1] });
  for (let layer = 0; layer < 6; layer++) {
    const query = graph.op("Transpose", [conv(graph, x, hidden, hidden, 1)], { perm: [0, 2, 1] });
    const key = conv(graph, x, hidden, hidden, 1);
    const value = conv(graph, x, hidden, hidden, 1);
    const scores = graph.op("Mul", [
      graph.op("MatMul", [query, key]),
      graph.floats("scale", [], [1 / Math.sqrt(hidden)]),
    ]);
    const attention = graph.op("Transpose", [graph.op("Softmax", [scores], { axis: -1 })], {
      perm: [0, 2, 1],
    });
    const context = graph.op("MatMul", [value, attention]);
    x = graph.op("Add", [x, conv(graph, context, hidden, hidden, 1)]);
    const feedForward = conv(graph, graph.op("Relu", [conv(graph, x, hidden, filter, 3)]), filter, hidden, 3);
    x = graph.op("Add", [x, feedForward]);
  }

  // Length regulator: token n covers frames [start_n, end_n); latents [1, 192, frames] = x · path.
  const durations = graph.op("Transpose", [framesPerToken], { perm: [1, 0] });
  const ends = graph.op("CumSum", [durations, graph.ints("axis", [], [0])]);
  const starts = graph.op("Sub", [ends, durations]);
  const frameIndex = graph.op("Range", [
    graph.floats("zero", [], [0]),
    totalFrames,
    graph.floats("one", [], [1]),
  ]);
  const inToken = graph.op("And", [
    graph.op("GreaterOrEqual", [frameIndex, starts]),
    graph.op("Less", [frameIndex, ends]),
  ]);
  let z = graph.op("MatMul", [x, graph.op("Cast", [inToken], { to: DataType.FLOAT })]);

  // Flows: gated WaveNet layers.
  for (let flow = 0; flow < 4; flow++) {
    let h = z;
    let skip: string | undefined;
    for (let layer = 0; layer < 4; layer++) {
      const [filterHalf, gateHalf] = split(graph, conv(graph, h, hidden, 2 * hidden, 5), hidden);
      const gated = graph.op("Mul", [graph.op("Tanh", [filterHalf]), graph.op("Sigmoid", [gateHalf])]);
      const [residual, skipPart] = split(graph, conv(graph, gated, hidden, 2 * hidden, 1), hidden);
      h = graph.op("Add", [h, residual]);
      skip = skip ? graph.op("Add", [skip, skipPart]) : skipPart;
    }
    z = graph.op("Add", [z, skip!]);
  }

  // HiFi-GAN decoder, resblock "2".
  let y = conv(graph, z, hidden, 256, 7);
  let channels = 256;
  const upsampling = [
    { rate: 8, kernel: 16 },
    { rate: 8, kernel: 16 },
    { rate: 4, kernel: 8 },
  ];
  const resblocks = [
    { kernel: 3, dilations: [1, 2] },
    { kernel: 5, dilations: [2, 6] },
    { kernel: 7, dilations: [3, 12] },
  ];
  for (const { rate, kernel } of upsampling) {
    const outChannels = channels / 2;
    const weight = graph.weights("up_w", [channels, outChannels, kernel], (channels * kernel) / rate);
    const pad = (kernel - rate) / 2;
    y = graph.op("ConvTranspose", [leakyRelu(graph, y, 0.1), weight], {
      kernel_shape: [kernel],
      strides: [rate],
      pads: [pad, pad],
    });
    channels = outChannels;
    let sum: string | undefined;
    for (const block of resblocks) {
      let r = y;
      for (const dilation of block.dilations) {
        r = graph.op("Add", [
          r,
          conv(graph, leakyRelu(graph, r, 0.1), channels, channels, block.kernel, dilation),
        ]);
      }
      sum = sum ? graph.op("Add", [sum, r]) : r;
    }
    y = graph.op("Mul", [sum!, graph.floats("third", [], [1 / resblocks.length])]);
  }
  return graph.op("Tanh", [conv(graph, leakyRelu(graph, y, 0.01), channels, 1, 7)]);
}

function split(graph: GraphBuilder, x: string, half: number): [string, string] {
  const first = graph.name("first");
  const second = graph.name("second");
  graph.nodes.push(node("Split", [x, graph.ints("halves", [2], [half, half])], [first, second], { axis: 1 }));
  return [first, second];
}

export function buildVitsStandIn(options: Omit<VitsStandInOptions, "dir"> = {}): Uint8Array {
  const { language = "English", voice = "en-us", sampleRate = 22050, speakers = 1, size = "small" } = options;
  const graph = new GraphBuilder();
  const multiSpeaker = speakers > 1;

  const durationTable = Array.from({ length: PIPER_VOCABULARY }, (_, id) => framesPerId(PIPER_SYMBOLS[id]));
  const idFrames = graph.op("Gather", [
    graph.floats("frames_per_id", [PIPER_VOCABULARY], durationTable),
    "input",
  ]);
  const lengthScale = graph.op("Gather", ["scales", graph.ints("length_scale_index", [], [1])], { axis: 0 });
  const framesPerToken = graph.op("Ceil", [graph.op("Mul", [idFrames, lengthScale])]);
  const totalFrames = graph.op("Max", [
    graph.op("ReduceSum", [framesPerToken], { keepdims: 0 }),
    graph.floats("one", [], [1]),
  ]);
  const sampleCount = graph.op("Mul", [totalFrames, graph.floats("hop", [], [VITS_HOP])]);
  const sampleIndex = graph.op("Range", [
    graph.floats("zero", [], [0]),
    sampleCount,
    graph.floats("one", [], [1]),
  ]);
  let wave = addHarmonicVoice(
    graph,
    sampleIndex,
    addPitch(graph, multiSpeaker ? "sid" : undefined),
    sampleRate,
  );

  if (size === "real") {
    const body = addMediumBody(graph, "input", framesPerToken, totalFrames);
    // A faint mix keeps the body's compute in the graph (unused nodes are pruned) without hiding the voice.
    const bodyRow = graph.op("Reshape", [body, graph.ints("flat", [1], [-1])]);
    wave = graph.op("Add", [wave, graph.op("Mul", [bodyRow, graph.floats("body_gain", [], [0.01])])]);
  }
  graph.nodes.push(node("Reshape", [wave, graph.ints("output_shape", [4], [1, 1, 1, -1])], ["output"]));

  return encodeModel({
    name: "piper-vits-stand-in",
    inputs: [
      valueInfo("input", DataType.INT64, [1, "phonemes"]),
      // Unused here (the real model masks with it); sherpa-onnx always passes N.
      valueInfo("input_lengths", DataType.INT64, [1]),
      valueInfo("scales", DataType.FLOAT, [3]),
      ...(multiSpeaker ? [valueInfo("sid", DataType.INT64, [1])] : []),
    ],
    outputs: [valueInfo("output", DataType.FLOAT, [1, 1, 1, "time"])],
    nodes: graph.nodes,
    initializers: graph.initializers,
    // What sherpa-onnx's Piper conversion writes; sherpa-onnx requires sample_rate, n_speakers, language, comment.
    metadata: {
      model_type: "vits",
      comment: "piper",
      language,
      voice,
      has_espeak: 1,
      n_speakers: speakers,
      sample_rate: sampleRate,
    },
    opset: 15,
  });
}

/** Writes model.onnx and tokens.txt to `dir`; `dataDir` is the system's espeak-ng-data. */
export async function writeVitsStandIn(options: VitsStandInOptions): Promise<VitsStandInFiles> {
  await mkdir(options.dir, { recursive: true });
  const model = path.join(options.dir, "model.onnx");
  const tokens = path.join(options.dir, "tokens.txt");
  await writeFile(model, buildVitsStandIn(options));
  await writeFile(tokens, piperTokensText());
  return { model, tokens, dataDir: findEspeakNgData() };
}
