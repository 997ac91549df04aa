/**
 * The neural translation models relay can pull, run through transformers.js (int8 "q8" ONNX:
 * `onnx/encoder_model_quantized.onnx` + `onnx/decoder_model_merged_quantized.onnx`). Opus-MT
 * (Marian, one model per direction, English as the pivot) serves every direction it has a usable
 * model for; M2M100 418M (MIT) serves only en→ja and en→ko, which have none. NLLB is never used
 * (CC-BY-NC). Any other pair X→Y is X→en then en→Y.
 *
 * Sources (read 2026-11-26):
 * - Which Xenova conversions exist: huggingface/transformers.js scripts/extra/marian.py at
 *   9a3339239e65e0cbc31d07377f79e98bbfdc23d8 (the Helsinki-NLP models its conversion script
 *   supports) and its translation pipeline docs (Xenova/m2m100_418M); file sizes from third-party
 *   records of the Hub's tree API (Xenova/opus-mt-en-ROMANCE, -ROMANCE-en, -es-en: 52.90 + 60.21
 *   MB; en-fr 107.5 MB, de-en 106.0 MB; Xenova/m2m100_418M encoder 287,856,370 bytes, unmerged
 *   decoder 339,181,945, tokenizer.json 7,988,527) and levitatingflyfisher/Trellis
 *   docs/reference/mt-models.md (onnx-community and Xenova Opus-MT repos, licences, why en-jap and
 *   en-pt are unusable).
 * - Quality: Helsinki-NLP model cards on huggingface.co (newstest / Tatoeba BLEU) and Mozilla's
 *   FLORES-101 devtest evaluation of the same Helsinki-NLP models (mozilla/firefox-translations-
 *   models at e7957fc407441a5e3e35bbcbf9d60d9b35764618, evaluation/<pair>/flores-test.opusmt.*).
 *
 * Not established here (no access to huggingface.co): that every listed Xenova repo holds every
 * listed file (shown for en-ROMANCE, ROMANCE-en, es-en, en-fr, de-en, en-es, en-zh, zh-en, ja-en,
 * m2m100_418M by third-party code and measurements, inferred for the rest from the conversion
 * list); `generation_config.json` in each repo (transformers.js treats it as optional, so a pull
 * should tolerate its absence); sizes of the repos not measured (estimated from the same
 * architecture); published en→ja, en→ko or en→pt figures for M2M100 418M (the Helsinki-NLP
 * leaderboard scores it only into English) and pt figures for the ROMANCE models (their cards
 * report none). No SHA-256 here: a pull verifies against the SHA-256 Hugging Face serves for each
 * LFS file.
 */
import type { LanguageCode } from "../../core/contracts.js";
import type { MtQuality } from "../kit/models/check-metrics.js";

export type { MtQuality };

export interface MtDirection {
  readonly from: LanguageCode;
  readonly to: LanguageCode;
  /**
   * The sentence-initial token a multi-target Marian model needs to pick the target language
   * (`>>pt<<`); transformers.js's MarianTokenizer maps a leading `>>xx<<` to that vocabulary entry.
   */
  readonly targetToken?: string;
}

export interface MtModelEntry {
  /** The name `relay models pull mt <name>` uses: "opus-mt-en-es", "m2m100-418m". */
  readonly name: string;
  /** "Xenova/opus-mt-en-es". */
  readonly repo: string;
  readonly family: "marian" | "m2m100";
  /** The directions relay uses this model for. */
  readonly directions: readonly MtDirection[];
  /** Paths inside the repo to download. */
  readonly files: readonly string[];
  /** Approximate total download size, MiB (for the table, never a check). */
  readonly approxMiB: number;
  readonly licence: string;
  /** Pulled by setup. */
  readonly default: boolean;
  readonly quality: readonly MtQuality[];
  readonly description: string;
}

/** What transformers.js loads for a q8 encoder-decoder model (generation_config.json is optional). */
const FILES = [
  "config.json",
  "generation_config.json",
  "tokenizer.json",
  "tokenizer_config.json",
  "onnx/encoder_model_quantized.onnx",
  "onnx/decoder_model_merged_quantized.onnx",
] as const;

const MOZILLA_EVAL =
  "https://github.com/mozilla/firefox-translations-models/tree/e7957fc407441a5e3e35bbcbf9d60d9b35764618/evaluation";
const HF = "https://huggingface.co";

/** Mozilla's FLORES-101 devtest BLEU and COMET for Helsinki-NLP/opus-mt-<from>-<to>. */
function flores(direction: string, bleu: number, comet: number): MtQuality[] {
  const testSet = "FLORES-101 devtest";
  const source = `${MOZILLA_EVAL}/${direction}`;
  return [
    { direction, metric: "BLEU", value: bleu, testSet, source },
    { direction, metric: "COMET", value: comet, testSet, source },
  ];
}

/** A BLEU figure from the Helsinki-NLP model card. */
function card(direction: string, value: number, testSet: string, repo = `opus-mt-${direction}`): MtQuality {
  return { direction, metric: "BLEU", value, testSet, source: `${HF}/Helsinki-NLP/${repo}` };
}

function opus(options: {
  pair: string;
  directions?: readonly MtDirection[];
  approxMiB?: number;
  licence: string;
  default?: boolean;
  quality: readonly MtQuality[];
  description: string;
}): MtModelEntry {
  const [from, to] = options.pair.split("-") as [string, string];
  return {
    name: `opus-mt-${options.pair.toLowerCase()}`,
    repo: `Xenova/opus-mt-${options.pair}`,
    family: "marian",
    directions: options.directions ?? [{ from, to }],
    files: FILES,
    approxMiB: options.approxMiB ?? 110,
    licence: options.licence,
    default: options.default ?? false,
    quality: options.quality,
    description: options.description,
  };
}

const APACHE = "Apache-2.0 (Helsinki-NLP model card)";

export const MT_CATALOGUE: readonly MtModelEntry[] = [
  opus({
    pair: "en-es",
    licence: APACHE,
    default: true,
    quality: [
      ...flores("en-es", 26.7, 0.8499),
      card("en-es", 35.0, "newstest2013"),
      card("en-es", 54.9, "Tatoeba-test"),
    ],
    description: "English → Spanish (Opus-MT, Tatoeba-Challenge eng-spa 2020-08-18)",
  }),
  opus({
    pair: "es-en",
    licence: APACHE,
    default: true,
    quality: [
      ...flores("es-en", 27.6, 0.8599),
      card("es-en", 35.3, "newstest2013"),
      card("es-en", 59.6, "Tatoeba-test"),
    ],
    description: "Spanish → English (Opus-MT, Tatoeba-Challenge spa-eng 2020-08-18)",
  }),
  opus({
    pair: "en-fr",
    approxMiB: 103,
    licence: APACHE,
    default: true,
    quality: [
      ...flores("en-fr", 47.8, 0.8617),
      card("en-fr", 33.2, "newstest2013"),
      card("en-fr", 50.5, "Tatoeba"),
    ],
    description: "English → French (Opus-MT 2020-02-26)",
  }),
  opus({
    pair: "fr-en",
    licence: APACHE,
    default: true,
    quality: [
      ...flores("fr-en", 41.7, 0.8835),
      card("fr-en", 37.8, "newstest2014"),
      card("fr-en", 57.5, "Tatoeba"),
    ],
    description: "French → English (Opus-MT 2020-02-26)",
  }),
  opus({
    pair: "en-de",
    licence: "CC-BY-4.0 (current Helsinki-NLP card; earlier revisions said Apache-2.0)",
    default: true,
    quality: [
      ...flores("en-de", 36.1, 0.847),
      card("en-de", 40.9, "newstest2019"),
      card("en-de", 47.3, "Tatoeba"),
    ],
    description: "English → German (Opus-MT 2020-02-26)",
  }),
  opus({
    pair: "de-en",
    approxMiB: 101,
    licence: APACHE,
    default: true,
    quality: [
      ...flores("de-en", 40.6, 0.8827),
      card("de-en", 40.1, "newstest2019"),
      card("de-en", 55.4, "Tatoeba"),
    ],
    description: "German → English (Opus-MT 2020-02-26)",
  }),
  opus({
    pair: "en-it",
    licence: APACHE,
    quality: [
      ...flores("en-it", 27.5, 0.852),
      card("en-it", 31.9, "newstest2009"),
      card("en-it", 48.2, "Tatoeba"),
    ],
    description: "English → Italian (Opus-MT 2019-12-04)",
  }),
  opus({
    pair: "it-en",
    licence: APACHE,
    quality: [
      ...flores("it-en", 29.4, 0.8656),
      card("it-en", 34.0, "newstest2009"),
      card("it-en", 70.9, "Tatoeba"),
    ],
    description: "Italian → English (Opus-MT 2019-12-18)",
  }),
  opus({
    pair: "en-ROMANCE",
    directions: [{ from: "en", to: "pt", targetToken: ">>pt<<" }],
    licence: APACHE,
    quality: [],
    description:
      "English → Portuguese (multi-target Opus-MT en-ROMANCE, >>pt<<): no dedicated en-pt Opus-MT exists; " +
      "no Portuguese figure is published for it",
  }),
  opus({
    pair: "ROMANCE-en",
    directions: [{ from: "pt", to: "en" }],
    licence: APACHE,
    quality: [],
    description:
      "Portuguese → English (multi-source Opus-MT ROMANCE-en): no dedicated pt-en Opus-MT exists; " +
      "no Portuguese figure is published for it",
  }),
  opus({
    pair: "en-ru",
    licence: APACHE,
    quality: [
      ...flores("en-ru", 25.5, 0.8478),
      card("en-ru", 27.1, "newstest2019"),
      card("en-ru", 48.4, "Tatoeba"),
    ],
    description: "English → Russian (Opus-MT 2020-02-11)",
  }),
  opus({
    pair: "ru-en",
    licence: "CC-BY-4.0 (current Helsinki-NLP card)",
    quality: [
      ...flores("ru-en", 29.4, 0.8391),
      card("ru-en", 31.4, "newstest2019"),
      card("ru-en", 61.1, "Tatoeba"),
    ],
    description: "Russian → English (Opus-MT 2020-02-26)",
  }),
  opus({
    pair: "en-zh",
    // The card says a target token is required; Mozilla's FLORES run (below) passed none.
    directions: [{ from: "en", to: "zh", targetToken: ">>cmn_Hans<<" }],
    licence: APACHE,
    quality: [
      ...flores("en-zh", 32.2, 0.8244),
      card("en-zh", 31.4, "Tatoeba-test"),
      { ...card("en-zh", 0.268, "Tatoeba-test"), metric: "chrF" },
    ],
    description: "English → Chinese (Opus-MT, Tatoeba-Challenge eng-zho 2020-07-17)",
  }),
  opus({
    pair: "zh-en",
    licence: "CC-BY-4.0 (current Helsinki-NLP card; earlier revisions said Apache-2.0)",
    quality: [...flores("zh-en", 23.5, 0.8439), card("zh-en", 36.1, "Tatoeba-test")],
    description: "Chinese → English (Opus-MT, Tatoeba-Challenge zho-eng 2020-07-17)",
  }),
  opus({
    pair: "ja-en",
    licence: APACHE,
    quality: [...flores("ja-en", 19.2, 0.8259), card("ja-en", 41.7, "Tatoeba")],
    description:
      "Japanese → English (Opus-MT 2019-12-18; about M2M100 418M's 18.7 FLORES BLEU at a fifth of its size)",
  }),
  opus({
    pair: "ko-en",
    licence: APACHE,
    quality: [...flores("ko-en", 20.6, 0.8269), card("ko-en", 41.3, "Tatoeba-test")],
    description: "Korean → English (Opus-MT, Tatoeba-Challenge kor-eng 2020-06-17)",
  }),
  {
    name: "m2m100-418m",
    repo: "Xenova/m2m100_418M",
    family: "m2m100",
    // Opus-MT has no usable en→ja (en-jap is Bible-only) or en→ko model.
    directions: [
      { from: "en", to: "ja" },
      { from: "en", to: "ko" },
    ],
    files: FILES,
    approxMiB: 610,
    licence: "MIT (facebook/m2m100_418M model card)",
    default: false,
    quality: [],
    description:
      "English → Japanese and Korean (M2M100 418M, many-to-many); no per-direction figure is published for these",
  },
];

export function findMtModel(name: string): MtModelEntry | undefined {
  return MT_CATALOGUE.find((entry) => entry.name === name);
}
