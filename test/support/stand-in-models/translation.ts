/**
 * Stand-ins for the translation models transformers.js runs: Xenova's ONNX exports of Marian (Opus-MT,
 * e.g. Xenova/opus-mt-en-es) and M2M100 (Xenova/m2m100_418M), with their file layout, configs,
 * input/output names and dim names, and the q8 files (`onnx/encoder_model_quantized.onnx`,
 * `onnx/decoder_model_merged_quantized.onnx`). The graphs are the real architecture (scaled embeddings,
 * sinusoidal positions, post-norm (Marian) or pre-norm (M2M100) attention layers, cross-attention,
 * swish/relu feed-forward, tied vocabulary projection) with int8 dynamically quantized linear layers and
 * random weights, so a real-size stand-in costs what the real model costs per token.
 *
 * On top sits a deterministic echo, so tests can see what came through:
 * - the encoder writes each input token id (id / vocab_size) into channel 0 of last_hidden_state;
 * - the decoder reads it back and, at decoder position p, adds a large constant to the logit of source
 *   token p, with the source's `</s>` replaced by a marker piece and padding (or positions past the
 *   source) by `</s>`.
 * Greedy decoding thus yields the source text followed by the marker ("hello world" → "hello world [es]"),
 * as many tokens as the source plus one. For M2M100, decoder position 0 is the forced target-language
 * token (the source's position 0 is its language token); the marker is the piece placed 100 ids below
 * that language token ("__ja__" → "▁[ja]"), read back from the self-attention cache, where layer 0
 * stores the decoder's input ids in channel 0 of head 0's values.
 */
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, writeFileSync, writeSync } from "node:fs";
import path from "node:path";
import onnxProto, { type onnx as Onnx } from "onnx-proto";
import { DataType, GraphBuilder, node, valueInfo } from "./onnx-graph.js";
import { SHARED_DIR } from "../shared.js";

const { onnx } = onnxProto;

export type TranslationFamily = "marian" | "m2m100";

export interface TranslationStandInOptions {
  readonly dir: string;
  readonly family: TranslationFamily;
  /** "small" (default) for tests; "real" has the real model's sizes (hundreds of MB, for benchmarks). */
  readonly size?: "small" | "real";
  /** Marian only: the piece appended to every translation (default "[es]"). M2M100 names the target language. */
  readonly marker?: string;
  /**
   * Marian only: the target-language tokens a multi-target model takes at the head of the text
   * (`>>pt<<`); in the vocabulary as such, and left out of what is decoded.
   */
  readonly targetTokens?: readonly string[];
}

interface Arch {
  readonly family: TranslationFamily;
  readonly dModel: number;
  readonly encoderLayers: number;
  readonly decoderLayers: number;
  readonly heads: number;
  readonly ffn: number;
  readonly vocab: number;
  readonly maxPositions: number;
}

const ARCHS: Record<TranslationFamily, Record<"small" | "real", Arch>> = {
  marian: {
    small: {
      family: "marian",
      dModel: 32,
      encoderLayers: 1,
      decoderLayers: 1,
      heads: 4,
      ffn: 64,
      vocab: 3000,
      maxPositions: 512,
    },
    real: {
      family: "marian",
      dModel: 512,
      encoderLayers: 6,
      decoderLayers: 6,
      heads: 8,
      ffn: 2048,
      vocab: 65001,
      maxPositions: 512,
    },
  },
  m2m100: {
    small: {
      family: "m2m100",
      dModel: 32,
      encoderLayers: 1,
      decoderLayers: 1,
      heads: 4,
      ffn: 64,
      vocab: 3000,
      maxPositions: 1024,
    },
    real: {
      family: "m2m100",
      dModel: 1024,
      encoderLayers: 12,
      decoderLayers: 12,
      heads: 16,
      ffn: 4096,
      vocab: 128112,
      maxPositions: 1024,
    },
  },
};

/** fairseq's M2M100 language list, in id order: `__af__` is 128004 in the real vocabulary. */
const M2M100_LANGUAGES = (
  "af am ar ast az ba be bg bn br bs ca ceb cs cy da de el en es et fa ff fi fr fy ga gd gl gu ha he hi hr " +
  "ht hu hy id ig ilo is it ja jv ka kk km kn ko lb lg ln lo lt lv mg mk ml mn mr ms my ne nl no ns oc or " +
  "pa pl ps pt ro ru sd si sk sl so sq sr ss su sv sw ta th tl tn tr uk ur uz vi wo xh yi yo zh zu"
).split(" ");
const MADEUP_WORDS = 8;
/** Each language token's marker piece sits this many ids below it. */
const MARKER_OFFSET = M2M100_LANGUAGES.length;
const MARKER_LANGUAGES = "en es fr de it pt ru ja ko zh".split(" ");
/** Added to the echoed token's logit: far above anything the random layers produce. */
const ECHO_BOOST = 1e4;
const NEG = -1e9;

interface Layout {
  readonly pieces: string[];
  readonly eos: number;
  readonly pad: number;
  readonly unk: number;
  /** Marian: the marker's id. */
  readonly marker: number;
  /** M2M100: the language tokens, in id order from `languageBase`. */
  readonly languageBase: number;
}

// ---------------------------------------------------------------------------------------------
// Vocabulary and tokenizer files

const range = (from: number, to: number): string[] =>
  Array.from({ length: to - from + 1 }, (_, i) => String.fromCodePoint(from + i));

/** Characters any text should tokenize into: ASCII, Latin-1 and Extended-A letters, Cyrillic, kana. */
const FIXED_CHARACTERS = [
  ...range(0x21, 0x7e),
  ...range(0xa1, 0xff),
  ...range(0x100, 0x17f),
  ...range(0x401, 0x401),
  ...range(0x410, 0x44f),
  ...range(0x451, 0x451),
  ...range(0x3041, 0x3096),
  ...range(0x30a1, 0x30fc),
  ..."、。「」・！？（）",
];
const FIXED_WORDS =
  "the hello world a of and to in is that it for on with as was good morning thank you".split(" ");

interface TextStats {
  readonly characters: Map<string, number>;
  readonly words: Map<string, number>;
  readonly suffixes: Map<string, number>;
}

function textFiles(dir: string): string[] {
  let files: string[] = [];
  try {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) files = files.concat(textFiles(full));
      else if (!entry.name.endsWith(".labels")) files.push(full);
    }
  } catch {
    // No shared text: the vocabulary is then characters and the fixed words only.
  }
  return files.sort();
}

function bump(map: Map<string, number>, key: string): void {
  map.set(key, (map.get(key) ?? 0) + 1);
}

let cachedStats: TextStats | undefined;

/** Character, word and word-ending counts over the shared test texts (the ten languages' dev sets). */
function textStats(): TextStats {
  if (cachedStats) return cachedStats;
  const stats: TextStats = { characters: new Map(), words: new Map(), suffixes: new Map() };
  cachedStats = stats;
  for (const file of textFiles(path.join(SHARED_DIR, "data/text"))) {
    const text = readFileSync(file, "utf8").normalize("NFKC");
    for (const ch of text) if (!/\s/u.test(ch)) bump(stats.characters, ch);
    for (const token of text.split(/\s+/u)) {
      const word = /^[\p{L}\p{M}\p{N}]+/u.exec(token)?.[0];
      // Whole words only for space-separated scripts; CJK runs are sentences, covered by characters.
      if (
        !word ||
        [...word].length > 16 ||
        /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}]/u.test(word)
      )
        continue;
      bump(stats.words, `▁${word}`);
      const chars = [...word];
      for (let n = 2; n <= 4 && n < chars.length; n++) bump(stats.suffixes, chars.slice(-n).join(""));
    }
  }
  return stats;
}

const byCount = (map: Map<string, number>): string[] =>
  [...map.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).map(([key]) => key);

/**
 * The pieces in id order. Marian (opus-mt): `</s>` 0, `<unk>` 1, ..., `<pad>` last. M2M100: `<s>`,
 * `<pad>`, `</s>`, `<unk>`, ..., markers, the 100 language tokens, 8 made-up words (real ids).
 */
function buildLayout(arch: Arch, markerText: string, targetTokens: readonly string[]): Layout {
  const stats = textStats();
  const marian = arch.family === "marian";
  const head = marian ? ["</s>", "<unk>"] : ["<s>", "<pad>", "</s>", "<unk>"];
  const languageBase = arch.vocab - MADEUP_WORDS - M2M100_LANGUAGES.length;
  const regularEnd = marian ? arch.vocab - 1 : languageBase - MARKER_OFFSET;
  const pieces = [...head];
  const seen = new Set(pieces);
  const add = (piece: string): void => {
    if (pieces.length < regularEnd && !seen.has(piece)) {
      seen.add(piece);
      pieces.push(piece);
    }
  };
  add("▁");
  const marker = `▁${markerText}`;
  if (marian) {
    add(marker);
    MARKER_LANGUAGES.forEach((code) => add(`▁[${code}]`));
    targetTokens.forEach(add);
  }
  FIXED_CHARACTERS.forEach(add);
  // Hangul and CJK characters by frequency in the texts: all of them in the real size, a few in the small.
  const otherCharacters = byCount(stats.characters).filter((ch) => !seen.has(ch));
  otherCharacters.slice(0, arch.vocab > 10_000 ? undefined : 300).forEach(add);
  FIXED_WORDS.forEach((word) => add(`▁${word}`));
  // Words and word endings alternate, so rarer words split into a few pieces rather than letters.
  // Words seen once are left to split, as a trained vocabulary would (English: ~1.3 pieces a word).
  const words = byCount(stats.words).filter((word) => stats.words.get(word)! > 1);
  const suffixes = byCount(stats.suffixes);
  for (let i = 0; pieces.length < regularEnd && (i < words.length || i < suffixes.length); i++) {
    if (i < words.length) add(words[i]!);
    if (i % 4 === 0 && i / 4 < suffixes.length) add(suffixes[i / 4]!);
  }
  // Unused filler to reach the real vocabulary size if the texts run out.
  for (let i = 0; pieces.length < regularEnd; i++) add(`▁filler${i}`);
  if (marian) {
    pieces.push("<pad>");
    return {
      pieces,
      eos: 0,
      unk: 1,
      pad: arch.vocab - 1,
      marker: pieces.indexOf(marker),
      languageBase: -1,
    };
  }
  M2M100_LANGUAGES.forEach((code) => pieces.push(`▁[${code}]`));
  M2M100_LANGUAGES.forEach((code) => pieces.push(`__${code}__`));
  for (let i = 0; i < MADEUP_WORDS; i++) pieces.push(`madeupword${i}`);
  if (pieces.length !== arch.vocab) throw new Error(`stand-in vocabulary has ${pieces.length} pieces`);
  return { pieces, eos: 2, unk: 3, pad: 1, marker: -1, languageBase };
}

/** Unigram scores: whole words beat word + ending, which beats letters. */
function pieceScore(piece: string): number {
  const length = [...piece.replace("▁", "")].length;
  if (piece.startsWith("▁") && length > 1) return -5 - 1 / length;
  return length > 1 ? -8 : -12;
}

function isSpecial(piece: string, layout: Layout): boolean {
  return (
    /^<.*>$/.test(piece) ||
    /^>>\w+<<$/.test(piece) ||
    /^__\w+__$/.test(piece) ||
    (layout.languageBase >= 0 && piece.startsWith("madeupword"))
  );
}

function tokenizerJson(layout: Layout, family: TranslationFamily): unknown {
  const addedTokens = layout.pieces.flatMap((content, id) =>
    isSpecial(content, layout)
      ? [{ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }]
      : [],
  );
  const special = (id: string): unknown => ({ SpecialToken: { id, type_id: 0 } });
  const sequence = (id: string): unknown => ({ Sequence: { id, type_id: 0 } });
  const specialEntry = (token: string): [string, unknown] => [
    token,
    { id: token, ids: [layout.pieces.indexOf(token)], tokens: [token] },
  ];
  const postProcessor =
    family === "marian"
      ? {
          type: "TemplateProcessing",
          single: [sequence("A"), special("</s>")],
          pair: [sequence("A"), sequence("B"), special("</s>")],
          special_tokens: Object.fromEntries([specialEntry("</s>")]),
        }
      : {
          // M2M100Tokenizer swaps "__en__" for the source language's token.
          type: "TemplateProcessing",
          single: [special("__en__"), sequence("A"), special("</s>")],
          pair: [special("__en__"), sequence("A"), sequence("B"), special("</s>")],
          special_tokens: Object.fromEntries([specialEntry("__en__"), specialEntry("</s>")]),
        };
  const metaspace = { replacement: "▁", prepend_scheme: "always", split: true };
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: addedTokens,
    normalizer: { type: "NFKC" },
    pre_tokenizer: { type: "Metaspace", ...metaspace },
    post_processor: postProcessor,
    decoder: { type: "Metaspace", ...metaspace },
    model: {
      type: "Unigram",
      unk_id: layout.unk,
      vocab: layout.pieces.map((piece) => [piece, isSpecial(piece, layout) ? 0 : pieceScore(piece)]),
      byte_fallback: false,
    },
  };
}

function configFiles(arch: Arch, layout: Layout): Record<string, unknown> {
  const shared = {
    d_model: arch.dModel,
    encoder_layers: arch.encoderLayers,
    decoder_layers: arch.decoderLayers,
    num_hidden_layers: arch.encoderLayers,
    encoder_attention_heads: arch.heads,
    decoder_attention_heads: arch.heads,
    encoder_ffn_dim: arch.ffn,
    decoder_ffn_dim: arch.ffn,
    vocab_size: arch.vocab,
    max_position_embeddings: arch.maxPositions,
    scale_embedding: true,
    is_encoder_decoder: true,
    use_cache: true,
    dropout: 0.1,
    attention_dropout: 0.0,
    activation_dropout: 0.0,
    init_std: 0.02,
    transformers_version: "4.34.0.dev0",
  };
  if (arch.family === "marian") {
    const ids = {
      bos_token_id: 0,
      eos_token_id: 0,
      pad_token_id: layout.pad,
      decoder_start_token_id: layout.pad,
      forced_eos_token_id: 0,
      bad_words_ids: [[layout.pad]],
      max_length: 512,
      num_beams: 4,
    };
    return {
      "config.json": {
        _name_or_path: "Helsinki-NLP/opus-mt-en-es",
        architectures: ["MarianMTModel"],
        model_type: "marian",
        activation_function: "swish",
        add_bias_logits: false,
        add_final_layer_norm: false,
        classif_dropout: 0.0,
        classifier_dropout: 0.0,
        decoder_layerdrop: 0.0,
        encoder_layerdrop: 0.0,
        decoder_vocab_size: arch.vocab,
        normalize_before: false,
        normalize_embedding: false,
        share_encoder_decoder_embeddings: true,
        static_position_embeddings: true,
        ...shared,
        ...ids,
      },
      "generation_config.json": {
        ...ids,
        renormalize_logits: true,
        transformers_version: shared.transformers_version,
      },
      "tokenizer_config.json": {
        tokenizer_class: "MarianTokenizer",
        eos_token: "</s>",
        unk_token: "<unk>",
        pad_token: "<pad>",
        model_max_length: 512,
        source_lang: "eng",
        target_lang: "spa",
        separate_vocabs: false,
        sp_model_kwargs: {},
        clean_up_tokenization_spaces: true,
      },
      "special_tokens_map.json": { eos_token: "</s>", unk_token: "<unk>", pad_token: "<pad>" },
    };
  }
  const ids = { bos_token_id: 0, eos_token_id: 2, pad_token_id: 1, decoder_start_token_id: 2 };
  const languages = M2M100_LANGUAGES.map((code) => `__${code}__`);
  return {
    "config.json": {
      _name_or_path: "hf_models/m2m100_418M",
      architectures: ["M2M100ForConditionalGeneration"],
      model_type: "m2m_100",
      activation_function: "relu",
      decoder_layerdrop: 0.05,
      encoder_layerdrop: 0.05,
      early_stopping: true,
      gradient_checkpointing: false,
      max_length: 200,
      num_beams: 5,
      ...shared,
      ...ids,
    },
    "generation_config.json": {
      ...ids,
      early_stopping: true,
      max_length: 200,
      num_beams: 5,
      transformers_version: shared.transformers_version,
    },
    "tokenizer_config.json": {
      tokenizer_class: "M2M100Tokenizer",
      bos_token: "<s>",
      eos_token: "</s>",
      sep_token: "</s>",
      pad_token: "<pad>",
      unk_token: "<unk>",
      src_lang: "en",
      tgt_lang: "es",
      language_codes: "m2m100",
      num_madeup_words: MADEUP_WORDS,
      model_max_length: 1024,
      additional_special_tokens: languages,
      clean_up_tokenization_spaces: true,
    },
    "special_tokens_map.json": {
      bos_token: "<s>",
      eos_token: "</s>",
      sep_token: "</s>",
      pad_token: "<pad>",
      unk_token: "<unk>",
      additional_special_tokens: languages,
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Graphs

/** A large int8 weight, generated only while the file is written (real sizes do not fit twice in memory). */
interface LazyTensor {
  readonly name: string;
  readonly dims: readonly number[];
  readonly seed: number;
}

function int8Weights(count: number, seed: number): Uint8Array {
  const out = new Uint8Array(count);
  let state = seed >>> 0 || 1;
  for (let i = 0; i < count; i++) {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    // Uniform in [-127, 127], stored as int8.
    out[i] = (((state >>> 0) % 255) - 127) & 0xff;
  }
  return out;
}

/** A builder whose value names carry a prefix: an `If` branch's names must not clash with the outer graph's. */
class ScopedBuilder extends GraphBuilder {
  constructor(private readonly prefix: string) {
    super();
  }

  override name(prefix: string): string {
    return super.name(`${this.prefix}${prefix}`);
  }
}

class Net {
  /** Constants and weights live here (the outer graph), also for ops inside `If` branches. */
  readonly g = new GraphBuilder();
  readonly lazy: LazyTensor[] = [];
  private seed = 1000;
  readonly int8Zero: string;
  private readonly constants = new Map<string, string>();

  constructor(readonly arch: Arch) {
    this.int8Zero = this.g.name("int8_zero");
    this.g.initializers.push({
      name: this.int8Zero,
      dims: [],
      dataType: DataType.INT8,
      rawData: new Uint8Array(1),
    });
  }

  /** A shared int64 constant (shapes, axes, indices). */
  int(values: readonly number[], scalar = false): string {
    const key = `i${scalar ? "s" : ""}${values.join(",")}`;
    let name = this.constants.get(key);
    if (!name) {
      name = this.g.ints("const", scalar ? [] : [values.length], values);
      this.constants.set(key, name);
    }
    return name;
  }

  float(value: number): string {
    const key = `f${value}`;
    let name = this.constants.get(key);
    if (!name) {
      name = this.g.floats("const", [], [value]);
      this.constants.set(key, name);
    }
    return name;
  }

  /** An int8 weight [rows, cols] uniform in ±amplitude, and its scale. */
  quantized(rows: number, cols: number, amplitude: number): { weight: string; scale: string } {
    const weight = this.g.name("w_int8");
    this.lazy.push({ name: weight, dims: [rows, cols], seed: this.seed++ });
    return { weight, scale: this.g.floats("w_scale", [], [amplitude / 127]) };
  }
}

function outputs(ops: GraphBuilder, opType: string, inputs: readonly string[], count: number): string[] {
  const names = Array.from({ length: count }, () => ops.name(opType));
  ops.nodes.push(node(opType, inputs, names));
  return names;
}

/** A linear layer as onnxruntime's dynamic quantization writes it: u8 activations × s8 weights. */
function linear(net: Net, ops: GraphBuilder, x: string, inDim: number, outDim: number, bias = true): string {
  const { weight, scale } = net.quantized(inDim, outDim, 1 / Math.sqrt(inDim));
  const [xq, xScale, xZero] = outputs(ops, "DynamicQuantizeLinear", [x], 3) as [string, string, string];
  const product = ops.op("MatMulInteger", [xq, weight, xZero, net.int8Zero]);
  const scaled = ops.op("Mul", [
    ops.op("Cast", [product], { to: DataType.FLOAT }),
    ops.op("Mul", [xScale, scale]),
  ]);
  return bias ? ops.op("Add", [scaled, net.g.weights("bias", [outDim], inDim * 16)]) : scaled;
}

function layerNorm(net: Net, ops: GraphBuilder, x: string): string {
  const d = net.arch.dModel;
  const gamma = net.g.floats("ln_gamma", [d], new Array<number>(d).fill(1));
  const beta = net.g.floats("ln_beta", [d], new Array<number>(d).fill(0));
  return ops.op("LayerNormalization", [x, gamma, beta], { axis: -1, epsilon: 1e-5 });
}

/** [B, T, D] → [B, H, T, D/H]. */
function splitHeads(net: Net, ops: GraphBuilder, x: string): string {
  const { heads, dModel } = net.arch;
  const split = ops.op("Reshape", [x, net.int([0, -1, heads, dModel / heads])]);
  return ops.op("Transpose", [split], { perm: [0, 2, 1, 3] });
}

/** Scaled dot-product attention over [B, H, *, Dh] heads, `bias` added to the scores; back to [B, T, D]. */
function attend(net: Net, ops: GraphBuilder, q: string, k: string, v: string, bias: string): string {
  const scores = ops.op("MatMul", [q, ops.op("Transpose", [k], { perm: [0, 1, 3, 2] })]);
  const weights = ops.op("Softmax", [ops.op("Add", [scores, bias])], { axis: -1 });
  const merged = ops.op("Transpose", [ops.op("MatMul", [weights, v])], { perm: [0, 2, 1, 3] });
  return ops.op("Reshape", [merged, net.int([0, 0, net.arch.dModel])]);
}

function query(net: Net, ops: GraphBuilder, x: string): string {
  const { dModel, heads } = net.arch;
  const q = linear(net, ops, x, dModel, dModel);
  return splitHeads(net, ops, ops.op("Mul", [q, net.float(1 / Math.sqrt(dModel / heads))]));
}

function feedForward(net: Net, ops: GraphBuilder, x: string): string {
  const { dModel, ffn, family } = net.arch;
  const hidden = linear(net, ops, x, dModel, ffn);
  const activated =
    family === "marian" ? ops.op("Mul", [hidden, ops.op("Sigmoid", [hidden])]) : ops.op("Relu", [hidden]);
  return linear(net, ops, activated, ffn, dModel);
}

/** Post-norm (Marian) or pre-norm (M2M100) residual block. */
function residual(net: Net, ops: GraphBuilder, x: string, block: (input: string) => string): string {
  if (net.arch.family === "marian") return layerNorm(net, ops, ops.op("Add", [x, block(x)]));
  return ops.op("Add", [x, block(layerNorm(net, ops, x))]);
}

/** Sinusoidal position table: Marian's (no offset) or M2M100's (rows offset by padding_idx + 1 = 2). */
function positionTable(arch: Arch): Float32Array {
  const half = arch.dModel / 2;
  const rows = arch.family === "marian" ? arch.maxPositions : arch.maxPositions + 2;
  const table = new Float32Array(rows * arch.dModel);
  for (let pos = 0; pos < rows; pos++) {
    if (arch.family === "m2m100" && pos === 1) continue;
    for (let i = 0; i < half; i++) {
      const frequency =
        arch.family === "marian"
          ? 1 / Math.pow(10000, (2 * i) / arch.dModel)
          : Math.exp((-i * Math.log(10000)) / (half - 1));
      table[pos * arch.dModel + i] = Math.sin(pos * frequency);
      table[pos * arch.dModel + half + i] = Math.cos(pos * frequency);
    }
  }
  return table;
}

interface Embeddings {
  readonly table: string;
  readonly scale: string;
  readonly positions: string;
}

/** Token embeddings (int8, dequantized after the Gather, as quantized exports do) times sqrt(d_model). */
function embed(net: Net, embeddings: Embeddings, ids: string): string {
  const { g } = net;
  const rows = g.op("DequantizeLinear", [
    g.op("Gather", [embeddings.table, ids]),
    embeddings.scale,
    net.int8Zero,
  ]);
  return g.op("Mul", [rows, net.float(Math.sqrt(net.arch.dModel))]);
}

function embeddings(net: Net): Embeddings {
  const { arch, g } = net;
  const { weight, scale } = net.quantized(arch.vocab, arch.dModel, 1 / Math.sqrt(arch.dModel));
  const table = positionTable(arch);
  const positions = g.name("positions");
  g.initializers.push({
    name: positions,
    dims: [table.length / arch.dModel, arch.dModel],
    dataType: DataType.FLOAT,
    rawData: new Uint8Array(table.buffer),
  });
  return { table: weight, scale, positions };
}

/** Size of `x` along `axis`, as an int64 scalar. */
function dim(net: Net, x: string, axis: number): string {
  return net.g.op("Gather", [net.g.op("Shape", [x]), net.int([axis], true)], { axis: 0 });
}

/** [B, S] int64 mask → additive [B, 1, 1, S] score bias. */
function maskBias(net: Net, mask: string): string {
  const { g } = net;
  const masked = g.op("Sub", [net.float(1), g.op("Cast", [mask], { to: DataType.FLOAT })]);
  return g.op("Unsqueeze", [g.op("Mul", [masked, net.float(NEG)]), net.int([1, 2])]);
}

function encoderModel(arch: Arch, layout: Layout): { net: Net; spec: Onnx.IGraphProto } {
  const net = new Net(arch);
  const { g } = net;
  const emb = embeddings(net);
  const length = dim(net, "input_ids", 1);
  let positions: string;
  if (arch.family === "marian") {
    positions = g.op("Range", [net.int([0], true), length, net.int([1], true)]);
  } else {
    // M2M100 numbers non-padding tokens from padding_idx + 1; padding gets padding_idx.
    const notPad = g.op("Cast", [g.op("Not", [g.op("Equal", ["input_ids", net.int([layout.pad], true)])])], {
      to: DataType.INT64,
    });
    positions = g.op("Add", [
      g.op("Mul", [g.op("CumSum", [notPad, net.int([1], true)]), notPad]),
      net.int([layout.pad], true),
    ]);
  }
  let h = g.op("Add", [embed(net, emb, "input_ids"), g.op("Gather", [emb.positions, positions])]);
  const bias = maskBias(net, "attention_mask");
  for (let layer = 0; layer < arch.encoderLayers; layer++) {
    h = residual(net, g, h, (x) => {
      const k = splitHeads(net, g, linear(net, g, x, arch.dModel, arch.dModel));
      const v = splitHeads(net, g, linear(net, g, x, arch.dModel, arch.dModel));
      const attended = attend(net, g, query(net, g, x), k, v, bias);
      return linear(net, g, attended, arch.dModel, arch.dModel);
    });
    h = residual(net, g, h, (x) => feedForward(net, g, x));
  }
  if (arch.family === "m2m100") h = layerNorm(net, g, h);
  // Echo: channel 0 carries the token id.
  const keep = g.floats("echo_keep", [arch.dModel], [0, ...new Array<number>(arch.dModel - 1).fill(1)]);
  const channel0 = g.floats(
    "echo_channel",
    [arch.dModel],
    [1, ...new Array<number>(arch.dModel - 1).fill(0)],
  );
  const ids = g.op("Div", [g.op("Cast", ["input_ids"], { to: DataType.FLOAT }), net.float(arch.vocab)]);
  const echo = g.op("Mul", [g.op("Unsqueeze", [ids, net.int([2])]), channel0]);
  g.nodes.push(node("Add", [g.op("Mul", [h, keep]), echo], ["last_hidden_state"]));
  return {
    net,
    spec: {
      name: `${arch.family}_encoder`,
      input: [
        valueInfo("input_ids", DataType.INT64, ["batch_size", "encoder_sequence_length"]),
        valueInfo("attention_mask", DataType.INT64, ["batch_size", "encoder_sequence_length"]),
      ],
      output: [
        valueInfo("last_hidden_state", DataType.FLOAT, [
          "batch_size",
          "encoder_sequence_length",
          arch.dModel,
        ]),
      ],
    },
  };
}

function decoderModel(arch: Arch, layout: Layout): { net: Net; spec: Onnx.IGraphProto } {
  const net = new Net(arch);
  const { g } = net;
  const { dModel, heads } = arch;
  const headDim = dModel / heads;
  const emb = embeddings(net);

  const past = dim(net, "past_key_values.0.decoder.key", 2);
  const total = g.op("Add", [past, dim(net, "input_ids", 1)]);
  const one = net.int([1], true);
  const queryPositions = g.op("Range", [past, total, one]);
  const keyPositions = g.op("Range", [net.int([0], true), total, one]);
  const future = g.op("Greater", [
    g.op("Unsqueeze", [keyPositions, net.int([0])]),
    g.op("Unsqueeze", [queryPositions, net.int([1])]),
  ]);
  const causal = g.op("Mul", [g.op("Cast", [future], { to: DataType.FLOAT }), net.float(NEG)]);
  const positionIds =
    arch.family === "marian" ? queryPositions : g.op("Add", [queryPositions, net.int([2], true)]);
  let h = g.op("Add", [embed(net, emb, "input_ids"), g.op("Gather", [emb.positions, positionIds])]);
  const crossBias = maskBias(net, "encoder_attention_mask");

  // Cross-attention keys/values: reused from the cache, or computed from the encoder output (first step).
  const cached = new ScopedBuilder("then_");
  const fresh = new ScopedBuilder("else_");
  const branchOutputs = (builder: GraphBuilder, names: string[]): Onnx.IGraphProto => ({
    name: builder === cached ? "with_past" : "without_past",
    node: builder.nodes,
    output: names.map((name) =>
      valueInfo(name, DataType.FLOAT, ["batch_size", heads, "encoder_sequence_length_out", headDim]),
    ),
  });
  const thenNames: string[] = [];
  const elseNames: string[] = [];
  const presentEncoder: string[] = [];
  for (let layer = 0; layer < arch.decoderLayers; layer++) {
    for (const kind of ["key", "value"]) {
      thenNames.push(cached.op("Identity", [`past_key_values.${layer}.encoder.${kind}`]));
      elseNames.push(
        fresh.op("Identity", [
          splitHeads(net, fresh, linear(net, fresh, "encoder_hidden_states", dModel, dModel)),
        ]),
      );
      presentEncoder.push(`present.${layer}.encoder.${kind}`);
    }
  }
  const A = onnx.AttributeProto.AttributeType;
  g.nodes.push({
    ...node("If", ["use_cache_branch"], presentEncoder),
    attribute: [
      { name: "then_branch", type: A.GRAPH, g: branchOutputs(cached, thenNames) },
      { name: "else_branch", type: A.GRAPH, g: branchOutputs(fresh, elseNames) },
    ],
  });

  let tokens: string | undefined;
  for (let layer = 0; layer < arch.decoderLayers; layer++) {
    h = residual(net, g, h, (x) => {
      const k = splitHeads(net, g, linear(net, g, x, dModel, dModel));
      let v = splitHeads(net, g, linear(net, g, x, dModel, dModel));
      if (layer === 0 && arch.family === "m2m100") {
        // Layer 0, head 0, channel 0 of the values carries the input token id: the cache remembers the
        // forced language token, which picks the marker at the end.
        const keep = new Array<number>(heads * headDim).fill(1);
        keep[0] = 0;
        const ids = g.op("Div", [g.op("Cast", ["input_ids"], { to: DataType.FLOAT }), net.float(arch.vocab)]);
        v = g.op("Add", [
          g.op("Mul", [v, g.floats("stash_keep", [1, heads, 1, headDim], keep)]),
          g.op("Mul", [
            g.op("Unsqueeze", [ids, net.int([1, 3])]),
            g.floats(
              "stash_channel",
              [1, heads, 1, headDim],
              keep.map((x) => 1 - x),
            ),
          ]),
        ]);
      }
      const keys = `present.${layer}.decoder.key`;
      const values = `present.${layer}.decoder.value`;
      g.nodes.push(node("Concat", [`past_key_values.${layer}.decoder.key`, k], [keys], { axis: 2 }));
      g.nodes.push(node("Concat", [`past_key_values.${layer}.decoder.value`, v], [values], { axis: 2 }));
      if (layer === 0 && arch.family === "m2m100") {
        const channel = g.op(
          "Gather",
          [g.op("Gather", [values, net.int([0], true)], { axis: 1 }), net.int([0], true)],
          {
            axis: 2,
          },
        );
        tokens = g.op("Round", [g.op("Mul", [channel, net.float(arch.vocab)])]);
      }
      const attended = attend(net, g, query(net, g, x), keys, values, causal);
      return linear(net, g, attended, dModel, dModel);
    });
    h = residual(net, g, h, (x) => {
      const k = presentEncoder[2 * layer]!;
      const v = presentEncoder[2 * layer + 1]!;
      return linear(net, g, attend(net, g, query(net, g, x), k, v, crossBias), dModel, dModel);
    });
    h = residual(net, g, h, (x) => feedForward(net, g, x));
  }
  if (arch.family === "m2m100") h = layerNorm(net, g, h);
  let logits = linear(net, g, h, dModel, arch.vocab, false);
  if (arch.family === "marian")
    logits = g.op("Add", [logits, g.weights("final_logits_bias", [1, arch.vocab], 1e4)]);

  // Echo: boost the logit of source token p (its `</s>` → marker, padding and beyond → `</s>`).
  let marker: string;
  if (tokens) {
    // The decoder's token at position 1 is the target language; its marker is MARKER_OFFSET below.
    const atOne = g.op("Cast", [g.op("Equal", [keyPositions, one])], { to: DataType.FLOAT });
    const language = g.op("ReduceSum", [g.op("Mul", [tokens, atOne]), net.int([1])], { keepdims: 1 });
    marker = g.op("Sub", [language, net.float(MARKER_OFFSET)]);
  } else {
    marker = net.float(layout.marker);
  }
  const eos = net.float(layout.eos);
  const source = g.op("Round", [
    g.op("Mul", [
      g.op("Gather", ["encoder_hidden_states", net.int([0], true)], { axis: 2 }),
      net.float(arch.vocab),
    ]),
  ]);
  const mapped = g.op("Where", [
    g.op("Equal", [source, eos]),
    marker,
    g.op("Where", [g.op("Equal", [source, net.float(layout.pad)]), eos, source]),
  ]);
  const sourceLength = dim(net, "encoder_hidden_states", 1);
  const sourcePositions = g.op("Range", [net.int([0], true), sourceLength, one]);
  const select = g.op(
    "Cast",
    [
      g.op("Equal", [
        g.op("Unsqueeze", [queryPositions, net.int([1])]),
        g.op("Unsqueeze", [sourcePositions, net.int([0])]),
      ]),
    ],
    { to: DataType.FLOAT },
  );
  const picked = g.op("Squeeze", [
    g.op("MatMul", [select, g.op("Unsqueeze", [mapped, net.int([2])])]),
    net.int([2]),
  ]);
  const beyond = g.op("Mul", [
    g.op("Cast", [g.op("GreaterOrEqual", [queryPositions, sourceLength])], { to: DataType.FLOAT }),
    eos,
  ]);
  const target = g.op("Cast", [g.op("Round", [g.op("Add", [picked, beyond])])], { to: DataType.INT64 });
  const boost = g.op(
    "OneHot",
    [target, net.int([arch.vocab]), g.floats("echo_boost", [2], [0, ECHO_BOOST])],
    {
      axis: -1,
    },
  );
  g.nodes.push(node("Add", [logits, boost], ["logits"]));

  const cacheInfo = (prefix: string, kind: "decoder" | "encoder", length: string): Onnx.IValueInfoProto[] =>
    Array.from({ length: arch.decoderLayers }, (_, layer) =>
      ["key", "value"].map((part) =>
        valueInfo(`${prefix}.${layer}.${kind}.${part}`, DataType.FLOAT, [
          "batch_size",
          heads,
          length,
          headDim,
        ]),
      ),
    ).flat();
  const pastInputs: Onnx.IValueInfoProto[] = [];
  const presentOutputs: Onnx.IValueInfoProto[] = [];
  const pastDecoder = cacheInfo("past_key_values", "decoder", "past_decoder_sequence_length");
  const pastEncoder = cacheInfo("past_key_values", "encoder", "encoder_sequence_length_out");
  const presentDecoder = cacheInfo("present", "decoder", "past_decoder_sequence_length + 1");
  const presentEncoderInfo = cacheInfo("present", "encoder", "encoder_sequence_length_out");
  for (let i = 0; i < arch.decoderLayers; i++) {
    pastInputs.push(...pastDecoder.slice(2 * i, 2 * i + 2), ...pastEncoder.slice(2 * i, 2 * i + 2));
    presentOutputs.push(
      ...presentDecoder.slice(2 * i, 2 * i + 2),
      ...presentEncoderInfo.slice(2 * i, 2 * i + 2),
    );
  }
  return {
    net,
    spec: {
      name: `${arch.family}_decoder_merged`,
      input: [
        valueInfo("encoder_attention_mask", DataType.INT64, ["batch_size", "encoder_sequence_length"]),
        valueInfo("input_ids", DataType.INT64, ["batch_size", "decoder_sequence_length"]),
        valueInfo("encoder_hidden_states", DataType.FLOAT, ["batch_size", "encoder_sequence_length", dModel]),
        ...pastInputs,
        valueInfo("use_cache_branch", DataType.BOOL, [1]),
      ],
      output: [
        valueInfo("logits", DataType.FLOAT, ["batch_size", "decoder_sequence_length", arch.vocab]),
        ...presentOutputs,
      ],
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Writing

function varint(value: number): number[] {
  const bytes: number[] = [];
  let v = value;
  while (v >= 0x80) {
    bytes.push((v % 0x80) | 0x80);
    v = Math.floor(v / 0x80);
  }
  bytes.push(v);
  return bytes;
}

/** Protobuf field tags (wire type 2): GraphProto.initializer 5, ModelProto.graph 7, TensorProto.raw_data 9. */
const TAG_INITIALIZER = (5 << 3) | 2;
const TAG_GRAPH = (7 << 3) | 2;
const TAG_RAW_DATA = (9 << 3) | 2;

/**
 * Writes the model with its large weights streamed in: protobuf lets repeated fields and sub-messages be
 * written piecewise, so each weight is generated, written and dropped in turn.
 */
function writeModel(file: string, net: Net, spec: Onnx.IGraphProto): void {
  const graphHead = onnx.GraphProto.encode({
    ...spec,
    node: net.g.nodes,
    initializer: net.g.initializers,
  }).finish();
  const tensors = net.lazy.map((tensor) => {
    const header = onnx.TensorProto.encode({
      name: tensor.name,
      dims: [...tensor.dims],
      dataType: DataType.INT8,
    }).finish();
    const count = tensor.dims.reduce((a, b) => a * b, 1);
    const size = header.length + 1 + varint(count).length + count;
    return { tensor, header, count, size };
  });
  const graphSize = tensors.reduce((sum, t) => sum + 1 + varint(t.size).length + t.size, graphHead.length);
  const modelHead = onnx.ModelProto.encode({
    irVersion: 8,
    producerName: "relay stand-in",
    opsetImport: [{ domain: "", version: 17 }],
  }).finish();
  const fd = openSync(file, "w");
  try {
    writeSync(fd, modelHead);
    writeSync(fd, Uint8Array.from([TAG_GRAPH, ...varint(graphSize)]));
    writeSync(fd, graphHead);
    for (const { tensor, header, count, size } of tensors) {
      writeSync(fd, Uint8Array.from([TAG_INITIALIZER, ...varint(size)]));
      writeSync(fd, header);
      writeSync(fd, Uint8Array.from([TAG_RAW_DATA, ...varint(count)]));
      writeSync(fd, int8Weights(count, tensor.seed));
    }
  } finally {
    closeSync(fd);
  }
}

/**
 * Writes a translation stand-in into `dir` (synchronously): the configs, tokenizer and q8 ONNX files of
 * Xenova/opus-mt-* (`family: "marian"`) or Xenova/m2m100_418M (`"m2m100"`), for transformers.js with
 * `dtype: "q8"`. The small size takes ~0.1 s (plus ~0.5 s once per process to read the shared texts for
 * the vocabulary); the real size a few seconds and 150 MB (Marian) or 760 MB (M2M100) of files.
 */
export function writeTranslationStandIn(options: TranslationStandInOptions): void {
  const arch = ARCHS[options.family][options.size ?? "small"];
  if (options.family === "m2m100" && options.marker !== undefined)
    throw new Error("the m2m100 stand-in's marker names the target language; it takes no marker option");
  const layout = buildLayout(arch, options.marker ?? "[es]", options.targetTokens ?? []);
  mkdirSync(path.join(options.dir, "onnx"), { recursive: true });
  for (const [name, content] of Object.entries(configFiles(arch, layout)))
    writeFileSync(path.join(options.dir, name), `${JSON.stringify(content, null, 2)}\n`);
  writeFileSync(path.join(options.dir, "tokenizer.json"), JSON.stringify(tokenizerJson(layout, arch.family)));
  const encoder = encoderModel(arch, layout);
  writeModel(path.join(options.dir, "onnx/encoder_model_quantized.onnx"), encoder.net, encoder.spec);
  const decoder = decoderModel(arch, layout);
  writeModel(path.join(options.dir, "onnx/decoder_model_merged_quantized.onnx"), decoder.net, decoder.spec);
}
