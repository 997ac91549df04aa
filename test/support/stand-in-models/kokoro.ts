/**
 * A stand-in Kokoro v1.0 (multi-language) voice for sherpa-onnx's `OfflineTts` (`model.kokoro`): the
 * export's inputs `tokens` int64 [1, N] (0 … ids … 0), `style` float [1, 256] and `speed` float [1], output
 * `audio` float [T] at 24 kHz; voices.bin as sherpa-onnx's conversion writes it (float32
 * [speakers, 510, 256], one style row per token count); Kokoro's vocabulary as tokens.txt; the metadata of
 * sherpa-onnx's kokoro-multi-lang-v1_0 (version 2, so sherpa-onnx wants `lang` or `lexicon` in the config).
 *
 * What it says is no speech: the harmonic tone of the VITS stand-in at the pitch written in the first
 * element of each speaker's style rows, as long as Kokoro would take: each token has a hand-set duration
 * in units of 600 samples, divided by the speed and rounded (at least 1), as Kokoro's predictor does.
 */
import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { DataType, encodeModel, GraphBuilder, node, randomWeights, valueInfo } from "./onnx-graph.js";
import { addHarmonicVoice, findEspeakNgData } from "./vits.js";

export interface KokoroStandInOptions {
  readonly dir: string;
  readonly speakers?: number;
  /**
   * The model's `speaker_names`, as the real one names its voices ("af_bella": American English,
   * female); `stand_in_<id>` by default. Their number sets `speakers`.
   */
  readonly speakerNames?: readonly string[];
  /** The eSpeak NG voice for text that is not Chinese, passed as the config's `lang` ("en-us"). */
  readonly lang?: string;
}

/** The `kokoro` part of sherpa-onnx's OfflineTts config. */
export interface KokoroStandInFiles {
  readonly model: string;
  readonly voices: string;
  readonly tokens: string;
  readonly dataDir: string;
  readonly lang: string;
}

export const KOKORO_SAMPLE_RATE = 24000;
/** Samples per unit of Kokoro's predicted durations (40 units a second). */
export const KOKORO_SAMPLES_PER_DURATION = 600;
/** Kokoro's style matrix per speaker: one 256-wide style row for each token count up to 510. */
const STYLE_ROWS = 510;
const STYLE_WIDTH = 256;

/** The pitch a speaker of the stand-in speaks with (written into voices.bin). */
export function kokoroStandInPitch(sid: number): number {
  return 120 + 35 * (sid % 8);
}

/** Kokoro-82M's config.json "vocab": symbol → id (ids 0 and unlisted ones are unused or boundaries). */
const KOKORO_VOCABULARY: Readonly<Record<string, number>> = {
  ";": 1,
  ":": 2,
  ",": 3,
  ".": 4,
  "!": 5,
  "?": 6,
  "—": 9,
  "…": 10,
  '"': 11,
  "(": 12,
  ")": 13,
  "“": 14,
  "”": 15,
  " ": 16,
  "\u0303": 17,
  ʣ: 18,
  ʥ: 19,
  ʦ: 20,
  ʨ: 21,
  ᵝ: 22,
  "\uab67": 23,
  A: 24,
  I: 25,
  O: 31,
  Q: 33,
  S: 35,
  T: 36,
  W: 39,
  Y: 41,
  ᵊ: 42,
  a: 43,
  b: 44,
  c: 45,
  d: 46,
  e: 47,
  f: 48,
  h: 50,
  i: 51,
  j: 52,
  k: 53,
  l: 54,
  m: 55,
  n: 56,
  o: 57,
  p: 58,
  q: 59,
  r: 60,
  s: 61,
  t: 62,
  u: 63,
  v: 64,
  w: 65,
  x: 66,
  y: 67,
  z: 68,
  ɑ: 69,
  ɐ: 70,
  ɒ: 71,
  æ: 72,
  β: 75,
  ɔ: 76,
  ɕ: 77,
  ç: 78,
  ɖ: 80,
  ð: 81,
  ʤ: 82,
  ə: 83,
  ɚ: 85,
  ɛ: 86,
  ɜ: 87,
  ɟ: 90,
  ɡ: 92,
  ɥ: 99,
  ɨ: 101,
  ɪ: 102,
  ʝ: 103,
  ɯ: 110,
  ɰ: 111,
  ŋ: 112,
  ɳ: 113,
  ɲ: 114,
  ɴ: 115,
  ø: 116,
  ɸ: 118,
  θ: 119,
  œ: 120,
  ɹ: 123,
  ɾ: 125,
  ɻ: 126,
  ʁ: 128,
  ɽ: 129,
  ʂ: 130,
  ʃ: 131,
  ʈ: 132,
  ʧ: 133,
  ʊ: 135,
  ʋ: 136,
  ʌ: 138,
  ɣ: 139,
  ɤ: 140,
  χ: 142,
  ʎ: 143,
  ʒ: 147,
  ʔ: 148,
  ˈ: 156,
  ˌ: 157,
  ː: 158,
  ʰ: 162,
  ʲ: 164,
  "↓": 169,
  "→": 171,
  "↗": 172,
  "↘": 173,
  ᵻ: 177,
};
const KOKORO_VOCABULARY_SIZE = 178;

/**
 * Duration units per token before the speed, set so "Hello world. How are you?" lasts about 1.7 s, as
 * Kokoro's voices take: punctuation a pause, stress marks and spaces short, phonemes about 55 ms.
 */
function durationOf(symbol: string | undefined): number {
  if (symbol === undefined) return 1;
  if (";:,.!?—…".includes(symbol)) return 6;
  if ("ˈˌː ".includes(symbol)) return 1;
  return 2.2;
}

export function kokoroTokensText(): string {
  return Object.entries(KOKORO_VOCABULARY)
    .map(([symbol, id]) => `${symbol} ${id}\n`)
    .join("");
}

export function buildKokoroStandIn(options: Omit<KokoroStandInOptions, "dir"> = {}): Uint8Array {
  const { lang = "en-us" } = options;
  const speakers = options.speakerNames?.length ?? options.speakers ?? 3;
  const graph = new GraphBuilder();
  const symbols = new Map(Object.entries(KOKORO_VOCABULARY).map(([symbol, id]) => [id, symbol]));
  const durationTable = Array.from({ length: KOKORO_VOCABULARY_SIZE }, (_, id) =>
    durationOf(symbols.get(id)),
  );

  const tokenDurations = graph.op("Gather", [
    graph.floats("durations", [KOKORO_VOCABULARY_SIZE], durationTable),
    "tokens",
  ]);
  const perToken = graph.op("Max", [
    graph.op("Round", [graph.op("Div", [tokenDurations, "speed"])]),
    graph.floats("one", [], [1]),
  ]);
  const sampleCount = graph.op("Mul", [
    graph.op("ReduceSum", [perToken], { keepdims: 0 }),
    graph.floats("samples_per_duration", [], [KOKORO_SAMPLES_PER_DURATION]),
  ]);
  const sampleIndex = graph.op("Range", [
    graph.floats("zero", [], [0]),
    sampleCount,
    graph.floats("one", [], [1]),
  ]);
  const pitch = graph.op("Reshape", [
    graph.op("Gather", ["style", graph.ints("pitch_column", [1], [0])], { axis: 1 }),
    graph.ints("one_value", [1], [1]),
  ]);
  const wave = addHarmonicVoice(graph, sampleIndex, pitch, KOKORO_SAMPLE_RATE);
  graph.nodes.push(node("Identity", [wave], ["audio"]));

  const speakerNames =
    options.speakerNames ?? Array.from({ length: speakers }, (_, sid) => `stand_in_${sid}`);
  return encodeModel({
    name: "kokoro-stand-in",
    inputs: [
      valueInfo("tokens", DataType.INT64, [1, "sequence_length"]),
      valueInfo("style", DataType.FLOAT, [1, STYLE_WIDTH]),
      valueInfo("speed", DataType.FLOAT, [1]),
    ],
    outputs: [valueInfo("audio", DataType.FLOAT, ["audio_length"])],
    nodes: graph.nodes,
    initializers: graph.initializers,
    // sherpa-onnx requires sample_rate, n_speakers, has_espeak and style_dim, and speaker_names when debug is on.
    metadata: {
      model_type: "kokoro",
      language: "multi-lang, e.g., English, Chinese",
      has_espeak: 1,
      sample_rate: KOKORO_SAMPLE_RATE,
      version: 2,
      voice: lang,
      style_dim: `${STYLE_ROWS},1,${STYLE_WIDTH}`,
      n_speakers: speakers,
      speaker_names: speakerNames.join(","),
      id2speaker: speakerNames.map((name, sid) => `${sid}->${name}`).join(","),
      speaker2id: speakerNames.map((name, sid) => `${name}->${sid}`).join(","),
      comment: "stand-in for Kokoro v1.0: a tone, not speech",
    },
    opset: 14,
  });
}

/** voices.bin: per speaker, STYLE_ROWS rows of random style values whose first element is the pitch. */
export function kokoroVoicesBin(speakers: number): Uint8Array {
  const styles = new Float32Array(speakers * STYLE_ROWS * STYLE_WIDTH);
  for (let sid = 0; sid < speakers; sid++) {
    const speakerStyles = randomWeights(STYLE_ROWS * STYLE_WIDTH, sid + 1, 0.2);
    for (let row = 0; row < STYLE_ROWS; row++) speakerStyles[row * STYLE_WIDTH] = kokoroStandInPitch(sid);
    styles.set(speakerStyles, sid * STYLE_ROWS * STYLE_WIDTH);
  }
  return new Uint8Array(styles.buffer);
}

/** Writes model.onnx, voices.bin and tokens.txt to `dir`; `dataDir` is the system's espeak-ng-data. */
export async function writeKokoroStandIn(options: KokoroStandInOptions): Promise<KokoroStandInFiles> {
  const { dir, lang = "en-us" } = options;
  const speakers = options.speakerNames?.length ?? options.speakers ?? 3;
  await mkdir(dir, { recursive: true });
  const files = {
    model: path.join(dir, "model.onnx"),
    voices: path.join(dir, "voices.bin"),
    tokens: path.join(dir, "tokens.txt"),
    dataDir: findEspeakNgData(),
    lang,
  };
  await writeFile(files.model, buildKokoroStandIn({ ...options, speakers, lang }));
  await writeFile(files.voices, kokoroVoicesBin(speakers));
  await writeFile(files.tokens, kokoroTokensText());
  return files;
}
