/**
 * Stand-ins for the OpenVoice V2 tone colour converter as published in ONNX by
 * seasonstudio/openvoice_tone_clone_onnx (and run by season-studio/MeloTTS-ONNX's
 * `OpenVoiceToneClone_ONNX`): `configuration.json` (upstream `checkpoints_v2/converter/config.json`),
 * `tone_color_extract_model.onnx` (`SynthesizerTrn.ref_enc`) and `tone_clone_model.onnx`
 * (`SynthesizerTrn.voice_conversion`), with the real files' input names, dtypes and shapes.
 *
 * What they compute is no voice conversion, but something a test can predict:
 * - the extractor's tone colour has in element 0 the spectral centroid (kHz) of the time-averaged
 *   magnitude spectrum below 2 kHz (`standInToneColorKhz` computes the same from samples), the rest 0;
 * - the converter says a 0.3-amplitude sine at dest_tone[0] kHz, 256 samples per input frame, so
 *   "converted" audio shows which tone colour it was given.
 *
 * `size: "real"` adds the real models' weights and compute with random weights (tone-color-body.ts),
 * mixed in faintly: the extractor's elements 1..255 are 0.001 × a ReferenceEncoder's output; the
 * converter's waveform gets 0.01 × a full converter's (≈ 31.9 M parameters, ≈ 128 MB).
 */
import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { linearSpectrogram } from "../../../src/audio/spectrogram.js";
import { DataType, encodeModel, GraphBuilder, node, valueInfo } from "./onnx-graph.js";
import { addConverterBody, addReferenceEncoderBody } from "./tone-color-body.js";

export interface ToneColorStandInOptions {
  /** "small" (the default): kilobytes, microseconds. "real": the published models' size and compute. */
  readonly size?: "small" | "real";
}

export interface ToneColorStandInFiles {
  readonly dir: string;
  readonly config: string;
  readonly extractor: string;
  readonly converter: string;
}

/**
 * Upstream `checkpoints_v2/converter/config.json` (myshell-ai/OpenVoiceV2), which the release ships as
 * `configuration.json`. Key order matters: `toneColorConfigText()` reproduces the file byte for byte.
 */
export const TONE_COLOR_CONFIG = {
  _version_: "v2",
  data: { sampling_rate: 22050, filter_length: 1024, hop_length: 256, win_length: 1024, n_speakers: 0 },
  model: {
    zero_g: true,
    inter_channels: 192,
    hidden_channels: 192,
    filter_channels: 768,
    n_heads: 2,
    n_layers: 6,
    kernel_size: 3,
    p_dropout: 0.1,
    resblock: "1",
    resblock_kernel_sizes: [3, 7, 11],
    resblock_dilation_sizes: [
      [1, 3, 5],
      [1, 3, 5],
      [1, 3, 5],
    ],
    upsample_rates: [8, 8, 2, 2],
    upsample_initial_channel: 512,
    upsample_kernel_sizes: [16, 16, 4, 4],
    gin_channels: 256,
  },
} as const;

/**
 * The config file's text: 2-space indent, no trailing newline. Upstream's bytes: 838 of them, sha256
 * 9dfff60350b8c63f2c664efd92a61b2516efb22671466960f0e5dfebd881fa47 (check:
 * `createHash("sha256").update(toneColorConfigText()).digest("hex")`).
 */
export function toneColorConfigText(): string {
  return JSON.stringify(TONE_COLOR_CONFIG, null, 2);
}

const SAMPLE_RATE = TONE_COLOR_CONFIG.data.sampling_rate;
const HOP = TONE_COLOR_CONFIG.data.hop_length;
const BINS = TONE_COLOR_CONFIG.data.filter_length / 2 + 1;
/** The tone colour's size (gin_channels). */
const TONE_DIM = TONE_COLOR_CONFIG.model.gin_channels;
/** The centroid's band: bins 0..92, 0–2 kHz at 22050/1024 Hz a bin. */
const CENTROID_BINS = 93;
const KHZ_PER_BIN = SAMPLE_RATE / TONE_COLOR_CONFIG.data.filter_length / 1000;
/** The converter's sine amplitude. */
export const TONE_COLOR_STAND_IN_AMPLITUDE = 0.3;

/**
 * What the stand-in extractor returns in element 0 for mono `samples` at 22050 Hz: the centroid (kHz)
 * of bins 0..92 of the mean over frames of OpenVoice's linear magnitude spectrogram.
 */
export function standInToneColorKhz(samples: Float32Array): number {
  const { data, frames, bins } = linearSpectrogram(samples, { nFft: 1024, hop: 256, win: 1024 });
  let weighted = 0;
  let total = 0;
  for (let k = 0; k < CENTROID_BINS; k++) {
    let sum = 0;
    for (let t = 0; t < frames; t++) sum += data[t * bins + k]!;
    const mean = sum / frames;
    weighted += k * mean;
    total += mean;
  }
  return (weighted / total) * KHZ_PER_BIN;
}

/** The centroid (kHz) of `spectrum` [1, T, 513] as [1, 1]. */
function addCentroid(graph: GraphBuilder, spectrum: string): string {
  const band = graph.op("Slice", [
    spectrum,
    graph.ints("band_start", [1], [0]),
    graph.ints("band_end", [1], [CENTROID_BINS]),
    graph.ints("band_axis", [1], [2]),
  ]);
  const mean = graph.op("ReduceMean", [band], { axes: [1], keepdims: 0 }); // [1, 93]
  // Columns: Σ k·m_k and Σ m_k.
  const moments = new Float32Array(CENTROID_BINS * 2);
  for (let k = 0; k < CENTROID_BINS; k++) {
    moments[2 * k] = k;
    moments[2 * k + 1] = 1;
  }
  const sums = graph.op("MatMul", [mean, graph.floats("moments", [CENTROID_BINS, 2], moments)]);
  const [weighted, total] = [graph.name("weighted"), graph.name("total")];
  graph.nodes.push(node("Split", [sums, graph.ints("halves", [2], [1, 1])], [weighted, total], { axis: 1 }));
  return graph.op("Mul", [
    graph.op("Div", [weighted, total]),
    graph.floats("khz_per_bin", [], [KHZ_PER_BIN]),
  ]);
}

/** The extractor, `tone_color_extract_model.onnx`: `input` float [1, T, 513] → float [1, 256]. */
export function buildToneColorExtractorStandIn(options: ToneColorStandInOptions = {}): Uint8Array {
  const graph = new GraphBuilder();
  const centroid = addCentroid(graph, "input");
  let tone = graph.op("Pad", [centroid, graph.ints("pads", [4], [0, 0, 0, TONE_DIM - 1])]);
  if (options.size === "real") {
    const body = addReferenceEncoderBody(graph, "input");
    // Element 0 stays the centroid; the others carry the body at a thousandth.
    const gains = new Float32Array(TONE_DIM).fill(0.001);
    gains[0] = 0;
    tone = graph.op("Add", [tone, graph.op("Mul", [body, graph.floats("body_gain", [TONE_DIM], gains)])]);
  }
  graph.nodes.push(node("Identity", [tone], ["tone_color"]));
  return encodeModel({
    name: "openvoice-tone-color-extractor-stand-in",
    inputs: [valueInfo("input", DataType.FLOAT, [1, "frames", BINS])],
    outputs: [valueInfo("tone_color", DataType.FLOAT, [1, TONE_DIM])],
    nodes: graph.nodes,
    initializers: graph.initializers,
    opset: 17,
  });
}

/**
 * The converter, `tone_clone_model.onnx`: `audio` float [1, 513, T], `audio_length` int64 [1],
 * `src_tone` and `dest_tone` float [1, 256, 1], `tau` float [1] → output 0 the waveform float
 * [1, 1, 256·T] under an auto-generated-looking name ("4831"; loaders take `outputNames[0]`), output 1
 * `y_mask` float [1, 1, T] (ones up to `audio_length`, as the real graph's sequence mask).
 */
export function buildToneColorConverterStandIn(options: ToneColorStandInOptions = {}): Uint8Array {
  const graph = new GraphBuilder();
  const frames = graph.op("Gather", [graph.op("Shape", ["audio"]), graph.ints("time_axis", [1], [2])]);
  const frameIndex = graph.op("Range", [
    graph.ints("zero", [], [0]),
    graph.op("Squeeze", [frames, graph.ints("axis", [1], [0])]),
    graph.ints("one", [], [1]),
  ]);
  const mask = graph.op("Reshape", [
    graph.op("Cast", [graph.op("Less", [frameIndex, "audio_length"])], { to: DataType.FLOAT }),
    graph.ints("mask_shape", [3], [1, 1, -1]),
  ]);

  // n = 0 .. 256·T − 1; the sine's angular step is 2π·1000·dest_tone[0] / 22050 a sample.
  const sampleCount = graph.op("Mul", [
    graph.op("Cast", [graph.op("Squeeze", [frames, graph.ints("axis", [1], [0])])], { to: DataType.FLOAT }),
    graph.floats("hop", [], [HOP]),
  ]);
  const sampleIndex = graph.op("Range", [
    graph.floats("zero", [], [0]),
    sampleCount,
    graph.floats("one", [], [1]),
  ]);
  const khz = graph.op("Reshape", [
    graph.op("Slice", [
      "dest_tone",
      graph.ints("first_start", [1], [0]),
      graph.ints("first_end", [1], [1]),
      graph.ints("first_axis", [1], [1]),
    ]),
    graph.ints("scalar_shape", [1], [1]),
  ]);
  const step = graph.op("Mul", [
    khz,
    graph.floats("radians_per_khz", [1], [(2 * Math.PI * 1000) / SAMPLE_RATE]),
  ]);
  let wave = graph.op("Mul", [
    graph.op("Sin", [graph.op("Mul", [sampleIndex, step])]),
    graph.floats("amplitude", [], [TONE_COLOR_STAND_IN_AMPLITUDE]),
  ]);
  wave = graph.op("Reshape", [wave, graph.ints("wave_shape", [3], [1, 1, -1])]);

  if (options.size === "real") {
    const body = addConverterBody(graph, "audio", mask, "src_tone", "dest_tone");
    // A faint mix keeps the body's compute in the graph (unused nodes are pruned) without hiding the sine.
    wave = graph.op("Add", [wave, graph.op("Mul", [body, graph.floats("body_gain", [], [0.01])])]);
  }
  graph.nodes.push(node("Identity", [wave], ["4831"]));
  graph.nodes.push(node("Identity", [mask], ["y_mask"]));

  return encodeModel({
    name: "openvoice-tone-clone-stand-in",
    inputs: [
      valueInfo("audio", DataType.FLOAT, [1, BINS, "frames"]),
      // Used only for the mask, as in the real graph.
      valueInfo("audio_length", DataType.INT64, [1]),
      // Unused by the small stand-in; the real graph conditions its flow on them.
      valueInfo("src_tone", DataType.FLOAT, [1, TONE_DIM, 1]),
      valueInfo("dest_tone", DataType.FLOAT, [1, TONE_DIM, 1]),
      // Unused: the real graph scales the posterior's noise by it; the stand-ins are deterministic.
      valueInfo("tau", DataType.FLOAT, [1]),
    ],
    outputs: [
      valueInfo("4831", DataType.FLOAT, [1, 1, "samples"]),
      valueInfo("y_mask", DataType.FLOAT, [1, 1, "frames"]),
    ],
    nodes: graph.nodes,
    initializers: graph.initializers,
    opset: 17,
  });
}

/** Writes configuration.json, tone_color_extract_model.onnx and tone_clone_model.onnx into `dir`. */
export async function writeToneColorStandIn(
  dir: string,
  options: ToneColorStandInOptions = {},
): Promise<ToneColorStandInFiles> {
  await mkdir(dir, { recursive: true });
  const files = {
    dir,
    config: path.join(dir, "configuration.json"),
    extractor: path.join(dir, "tone_color_extract_model.onnx"),
    converter: path.join(dir, "tone_clone_model.onnx"),
  };
  await writeFile(files.config, toneColorConfigText());
  await writeFile(files.extractor, buildToneColorExtractorStandIn(options));
  await writeFile(files.converter, buildToneColorConverterStandIn(options));
  return files;
}
