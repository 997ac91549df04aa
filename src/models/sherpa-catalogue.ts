/**
 * The sherpa-onnx models relay can pull: neural voices (Kokoro, Piper VITS), the streaming English
 * recognizer and its punctuation model, and a speaker-embedding model, as k2-fsa/sherpa-onnx
 * publishes them on its GitHub releases (tags `tts-models`, `asr-models`, `punctuation-models`,
 * `speaker-recongition-models` [sic]).
 *
 * Source: k2-fsa/sherpa-onnx at 634265c9b57642fdd158120148785c89aa281c4b (2026-08-08): the release
 * URLs and the files inside each archive are those its scripts and examples use. Upstream publishes
 * no checksum for these files, and none could be fetched from this network: entries carry no
 * SHA-256, so a pull records the archive's and `verify` checks the files against that record and
 * against the metadata sherpa-onnx needs. Sizes are approximate model sizes (for the table, never a
 * check). Licences differ per voice: a pull reads the one the archive's model card states and
 * `relay models list` shows it (src/models/sherpa-pull.ts).
 */
import type { LanguageCode } from "../engines/types.js";

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
  /** The BPE vocabulary hotwords are encoded with. */
  readonly bpeVocab: string;
}

export interface PunctuationLayout {
  readonly model: string;
  readonly bpeVocab: string;
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
  /** Approximate size of what is loaded, MiB. */
  readonly approxMiB: number;
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

function piper(
  voice: string,
  options: {
    language: LanguageCode;
    genders?: readonly ("female" | "male")[];
    approxMiB?: number;
    default?: boolean;
    description: string;
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
    approxMiB: options.approxMiB ?? 63,
    default: options.default ?? false,
    description: options.description,
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
    approxMiB: 70,
    default: true,
    description: "Streaming English recognition (zipformer transducer, int8; LibriSpeech WER 3.1 / 7.8 %)",
    asr: {
      encoder: "encoder-epoch-99-avg-1-chunk-16-left-128.int8.onnx",
      decoder: "decoder-epoch-99-avg-1-chunk-16-left-128.onnx",
      joiner: "joiner-epoch-99-avg-1-chunk-16-left-128.int8.onnx",
      tokens: "tokens.txt",
      bpeVocab: "bpe.vocab",
    },
  },
  {
    name: "punct-en",
    kind: "punctuation",
    file: `${PUNCT_EN}.tar.bz2`,
    url: `${RELEASES}/punctuation-models/${PUNCT_EN}.tar.bz2`,
    dir: PUNCT_EN,
    languages: ["en"],
    approxMiB: 7,
    default: true,
    description: "English punctuation and casing for the streaming recognizer (CNN-BiLSTM, int8)",
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
    approxMiB: 330,
    default: false,
    description:
      "Kokoro v1.0: English and Chinese, 53 voices; more natural than Piper, several times its cost",
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
    approxMiB: 75,
    default: true,
    description: "English (US), 904 speakers (LibriTTS-R): many distinct voices",
  }),
  piper("en_US-amy-medium", { language: "en", genders: ["female"], description: "English (US), a woman" }),
  piper("en_US-ryan-medium", { language: "en", genders: ["male"], description: "English (US), a man" }),
  piper("es_ES-sharvard-medium", {
    language: "es",
    default: true,
    description: "Spanish (Spain), two speakers",
  }),
  piper("es_ES-davefx-medium", { language: "es", genders: ["male"], description: "Spanish (Spain), a man" }),
  piper("fr_FR-upmc-medium", { language: "fr", description: "French, two speakers" }),
  piper("fr_FR-siwis-medium", { language: "fr", genders: ["female"], description: "French, a woman" }),
  piper("de_DE-thorsten-medium", { language: "de", genders: ["male"], description: "German, a man" }),
  piper("de_DE-kerstin-low", {
    language: "de",
    genders: ["female"],
    approxMiB: 20,
    description: "German, a woman",
  }),
  piper("it_IT-paola-medium", { language: "it", genders: ["female"], description: "Italian, a woman" }),
  piper("it_IT-riccardo-x_low", {
    language: "it",
    genders: ["male"],
    approxMiB: 20,
    description: "Italian, a man",
  }),
  piper("pt_BR-faber-medium", {
    language: "pt",
    genders: ["male"],
    description: "Portuguese (Brazil), a man",
  }),
  piper("ru_RU-irina-medium", { language: "ru", genders: ["female"], description: "Russian, a woman" }),
  piper("ru_RU-denis-medium", { language: "ru", genders: ["male"], description: "Russian, a man" }),
  piper("zh_CN-huayan-medium", {
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
