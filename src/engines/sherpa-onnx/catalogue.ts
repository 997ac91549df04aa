/**
 * The sherpa-onnx models relay can pull: neural voices (Kokoro, Piper VITS), the streaming English
 * recognizer and its punctuation model, and a speaker-embedding model, as k2-fsa/sherpa-onnx
 * publishes them on its GitHub releases (tags `tts-models`, `asr-models`, `punctuation-models`,
 * `speaker-recongition-models` [sic]).
 *
 * Source: k2-fsa/sherpa-onnx at 634265c9b57642fdd158120148785c89aa281c4b (2026-08-08): the release
 * URLs and the files inside each archive are those its scripts and examples use. What each archive
 * really holds (file names, inner directory, metadata keys, sizes, licences), with the source of
 * each fact, is recorded in test/fixtures/upstream-layouts.json, which the tests build their
 * stand-in archives from. Upstream publishes no checksum for these files: entries carry no
 * SHA-256, so a pull records the archive's and `verify` checks the files against that record and
 * against the metadata sherpa-onnx needs. Sizes are download sizes (for the table, never a check).
 *
 * Licences, as a user must read them: most Piper voices are fine-tuned from the `lessac` voice,
 * whose training data (Blizzard 2013) is licensed for research only; whether that reaches the
 * fine-tuned weights is unsettled, so those voices are "unclear" for commercial use even where their
 * own dataset is CC0 or CC BY (rhasspy/piper-voices model cards). The recognizer, punctuation and
 * speaker models state no licence for their weights (trained on CC BY 4.0 data with Apache-2.0
 * code). Every Piper and Kokoro archive carries eSpeak NG's data (GPL-3.0), read by sherpa-onnx in
 * its own process.
 */
import type { LanguageCode } from "../../core/contracts.js";

const RELEASES = "https://github.com/k2-fsa/sherpa-onnx/releases/download";
const KOKORO = "kokoro-multi-lang-v1_0";
const ZIPFORMER_EN = "sherpa-onnx-streaming-zipformer-en-2023-06-26";
const PUNCT_EN = "sherpa-onnx-online-punct-en-2024-08-06";
const CAMPPLUS_EN = "3dspeaker_speech_campplus_sv_en_voxceleb_16k";

/** What a TTS model needs from its directory (paths relative to it). */
export type TtsLayout =
  | {
      /** Piper's VITS export. */
      readonly kind: "vits";
      readonly model: string;
      readonly tokens: string;
      /** Speaker genders by speaker id, where published (single-speaker voices); others are measured. */
      readonly genders?: readonly ("female" | "male")[];
    }
  | {
      /**
       * Kokoro v1.0: its speakers' names say their language and gender ("af_bella": American English,
       * female), read from the model's `speaker_names`.
       */
      readonly kind: "kokoro";
      readonly model: string;
      readonly tokens: string;
      /** The style vectors of its speakers. */
      readonly voices: string;
      /** Lexicons (Chinese words; English goes through eSpeak NG). */
      readonly lexicons: readonly string[];
    };

/** A streaming transducer's files (paths relative to its directory). */
export interface StreamingAsrLayout {
  readonly encoder: string;
  readonly decoder: string;
  readonly joiner: string;
  readonly tokens: string;
  /**
   * The BPE vocabulary hotwords are encoded with. Upstream's archive has none: a pull derives it
   * from `bpeModel` (src/engines/sherpa-onnx/bpe-vocab.ts), as k2-fsa's hotwords docs say to.
   */
  readonly bpeVocab: string;
  /** The SentencePiece model the archive ships. */
  readonly bpeModel: string;
}

export interface PunctuationLayout {
  readonly model: string;
  readonly bpeVocab: string;
}

/** What a model's licence lets a user do, as far as its publishers state it. */
export interface SherpaLicence {
  /** As a user must read it: the weights' licence, the dataset's, what they derive from. */
  readonly text: string;
  /** "no": not for commercial use; "unclear": no clear statement, or a restricted parent. */
  readonly commercialUse: "yes" | "no" | "unclear";
}

interface EntryBase {
  readonly name: string;
  /** The file downloaded: a `.tar.bz2` archive (unpacked into `dir`) or a single `.onnx` model. */
  readonly file: string;
  readonly url: string;
  /** The model's directory under the models directory (what an archive unpacks into). */
  readonly dir: string;
  /** Languages served (none for speaker models: they serve every language). */
  readonly languages: readonly LanguageCode[];
  /** Approximate download size, MiB (upstream's listings; test/fixtures/upstream-layouts.json). */
  readonly approxMiB: number;
  readonly licence: SherpaLicence;
  /** Pulled by `npm run setup` when the network allows. */
  readonly default: boolean;
  readonly description: string;
}

export type SherpaModelEntry =
  | (EntryBase & { readonly kind: "tts"; readonly tts: TtsLayout })
  | (EntryBase & { readonly kind: "streaming-asr"; readonly asr: StreamingAsrLayout })
  | (EntryBase & { readonly kind: "punctuation"; readonly punctuation: PunctuationLayout })
  /** `model`: the `.onnx` file, downloaded as it is into `dir`. */
  | (EntryBase & { readonly kind: "speaker"; readonly speaker: { readonly model: string } });

export type SherpaModelKind = SherpaModelEntry["kind"];
export type SherpaEntryOf<K extends SherpaModelKind> = Extract<SherpaModelEntry, { kind: K }>;

const LESSAC = "fine-tuned from Piper's lessac voice, whose Blizzard 2013 data is licensed for research only";

/** A Piper voice's licence: its dataset's, and the research-only parent most are fine-tuned from. */
function piperLicence(
  dataset: string,
  parent: string | undefined = LESSAC,
  commercialUse: SherpaLicence["commercialUse"] = "unclear",
): SherpaLicence {
  return { text: `dataset ${dataset}${parent ? `; ${parent}` : ""}; eSpeak NG data GPL-3.0`, commercialUse };
}

function piper(
  voice: string,
  options: {
    language: LanguageCode;
    genders?: readonly ("female" | "male")[];
    approxMiB?: number;
    default?: boolean;
    description: string;
    licence: SherpaLicence;
  },
): SherpaEntryOf<"tts"> {
  const dir = `vits-piper-${voice}`;
  return {
    name: `piper-${voice}`,
    kind: "tts",
    file: `${dir}.tar.bz2`,
    url: `${RELEASES}/tts-models/${dir}.tar.bz2`,
    dir,
    languages: [options.language],
    approxMiB: options.approxMiB ?? 62,
    default: options.default ?? false,
    description: options.description,
    licence: options.licence,
    tts: {
      kind: "vits",
      model: `${voice}.onnx`,
      tokens: "tokens.txt",
      ...(options.genders ? { genders: options.genders } : {}),
    },
  };
}

export const SHERPA_CATALOGUE: readonly SherpaModelEntry[] = [
  {
    name: "streaming-zipformer-en",
    kind: "streaming-asr",
    file: `${ZIPFORMER_EN}.tar.bz2`,
    url: `${RELEASES}/asr-models/${ZIPFORMER_EN}.tar.bz2`,
    dir: ZIPFORMER_EN,
    languages: ["en"],
    // The archive also holds the float32 models (the encoder alone 250 MB): ~323 MB unpacked.
    approxMiB: 300,
    default: true,
    description: "Streaming English recognition (zipformer transducer, int8; LibriSpeech WER 3.1 / 7.8 %)",
    licence: {
      text: "no licence stated with the weights (k2-fsa icefall, Apache-2.0 code; LibriSpeech, CC BY 4.0)",
      commercialUse: "unclear",
    },
    asr: {
      encoder: "encoder-epoch-99-avg-1-chunk-16-left-128.int8.onnx",
      decoder: "decoder-epoch-99-avg-1-chunk-16-left-128.onnx",
      joiner: "joiner-epoch-99-avg-1-chunk-16-left-128.int8.onnx",
      tokens: "tokens.txt",
      bpeVocab: "bpe.vocab",
      bpeModel: "bpe.model",
    },
  },
  {
    name: "punct-en",
    kind: "punctuation",
    file: `${PUNCT_EN}.tar.bz2`,
    url: `${RELEASES}/punctuation-models/${PUNCT_EN}.tar.bz2`,
    dir: PUNCT_EN,
    languages: ["en"],
    approxMiB: 33,
    default: true,
    description: "English punctuation and casing for the streaming recognizer (CNN-BiLSTM, int8)",
    licence: {
      text: "no licence stated with the weights (Edge-Punct-Casing, arXiv 2407.13142)",
      commercialUse: "unclear",
    },
    punctuation: { model: "model.int8.onnx", bpeVocab: "bpe.vocab" },
  },
  {
    name: "speaker-campplus-en",
    kind: "speaker",
    file: `${CAMPPLUS_EN}.onnx`,
    url: `${RELEASES}/speaker-recongition-models/${CAMPPLUS_EN}.onnx`,
    dir: CAMPPLUS_EN,
    languages: [],
    approxMiB: 28,
    default: true,
    description: "Speaker embeddings (3D-Speaker CAM++, VoxCeleb; 7 M parameters, VoxCeleb-O EER 0.73 %)",
    licence: {
      text: "no licence stated with the weights (3D-Speaker, Apache-2.0 code; VoxCeleb, CC BY 4.0)",
      commercialUse: "unclear",
    },
    speaker: { model: `${CAMPPLUS_EN}.onnx` },
  },
  // Before the Piper voices: where it is pulled, its languages are spoken by it first.
  {
    name: "kokoro-multi-lang",
    kind: "tts",
    file: `${KOKORO}.tar.bz2`,
    url: `${RELEASES}/tts-models/${KOKORO}.tar.bz2`,
    dir: KOKORO,
    languages: ["en", "zh"],
    approxMiB: 350,
    default: false,
    description:
      "Kokoro v1.0: English and Chinese, 53 voices; more natural than Piper, several times its cost",
    licence: { text: "Apache-2.0 (hexgrad/Kokoro-82M); eSpeak NG data GPL-3.0", commercialUse: "yes" },
    tts: {
      kind: "kokoro",
      model: "model.onnx",
      tokens: "tokens.txt",
      voices: "voices.bin",
      lexicons: ["lexicon-us-en.txt", "lexicon-zh.txt"],
    },
  },
  piper("en_US-libritts_r-medium", {
    language: "en",
    approxMiB: 78,
    licence: piperLicence("LibriTTS-R, CC BY 4.0"),
    default: true,
    description: "English (US), 904 speakers (LibriTTS-R): many distinct voices",
  }),
  piper("en_US-amy-medium", {
    licence: piperLicence('mimic3 amy, licence not stated ("see URL")'),
    language: "en",
    genders: ["female"],
    description: "English (US), a woman",
  }),
  piper("en_US-ryan-medium", {
    licence: piperLicence("RyanSpeech, CC BY-NC-SA 4.0: non-commercial", LESSAC, "no"),
    language: "en",
    genders: ["male"],
    description: "English (US), a man",
  }),
  piper("es_ES-sharvard-medium", {
    licence: piperLicence("Sharvard, CC BY 3.0"),
    language: "es",
    approxMiB: 73,
    default: true,
    description: "Spanish (Spain), two speakers",
  }),
  piper("es_ES-davefx-medium", {
    licence: piperLicence("NabuCasa voice-datasets, CC0"),
    language: "es",
    genders: ["male"],
    description: "Spanish (Spain), a man",
  }),
  piper("fr_FR-upmc-medium", {
    licence: piperLicence("UPMC Pierre, CC BY-SA 4.0"),
    approxMiB: 73,
    language: "fr",
    description: "French, two speakers",
  }),
  piper("fr_FR-siwis-medium", {
    licence: piperLicence("SIWIS, CC BY 4.0"),
    language: "fr",
    genders: ["female"],
    description: "French, a woman",
  }),
  piper("de_DE-thorsten-medium", {
    licence: piperLicence("Thorsten-Voice, CC0"),
    language: "de",
    genders: ["male"],
    description: "German, a man",
  }),
  piper("de_DE-kerstin-low", {
    licence: piperLicence(
      "kerstin, CC0",
      "fine-tuned from Piper's ryan voice, whose RyanSpeech data is CC BY-NC-SA 4.0 (non-commercial)",
      "no",
    ),
    language: "de",
    genders: ["female"],
    approxMiB: 60,
    description: "German, a woman",
  }),
  piper("it_IT-paola-medium", {
    licence: piperLicence('paolapersico1 Voice-Dataset-Italian, licence not stated ("see URL")'),
    language: "it",
    genders: ["female"],
    description: "Italian, a woman",
  }),
  piper("it_IT-riccardo-x_low", {
    licence: piperLicence('M-AILABS, licence not stated ("see URL")', undefined),
    language: "it",
    genders: ["male"],
    approxMiB: 27,
    description: "Italian, a man",
  }),
  piper("pt_BR-faber-medium", {
    licence: piperLicence("NabuCasa voice-datasets, CC0"),
    language: "pt",
    genders: ["male"],
    description: "Portuguese (Brazil), a man",
  }),
  piper("ru_RU-irina-medium", {
    licence: piperLicence("RHVoice, licence unknown"),
    language: "ru",
    genders: ["female"],
    description: "Russian, a woman",
  }),
  piper("ru_RU-denis-medium", {
    licence: piperLicence("OHF-Voice voice-datasets, CC0"),
    language: "ru",
    genders: ["male"],
    description: "Russian, a man",
  }),
  piper("zh_CN-huayan-medium", {
    licence: piperLicence("HuaYan_TTS, licence unknown"),
    language: "zh",
    genders: ["female"],
    description: "Chinese (Mandarin), a woman",
  }),
];

export function findSherpaModel(name: string): SherpaModelEntry | undefined {
  return SHERPA_CATALOGUE.find((entry) => entry.name === name);
}

/** The catalogue's models of one kind, in catalogue order. */
export function sherpaModelsOf<K extends SherpaModelKind>(kind: K): SherpaEntryOf<K>[] {
  return SHERPA_CATALOGUE.filter((entry): entry is SherpaEntryOf<K> => entry.kind === kind);
}

/** The model of that kind by name, if the catalogue has one. */
export function findSherpaModelOf<K extends SherpaModelKind>(
  kind: K,
  name: string,
): SherpaEntryOf<K> | undefined {
  return sherpaModelsOf(kind).find((entry) => entry.name === name);
}
