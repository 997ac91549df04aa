/**
 * The sherpa-onnx models relay can pull: neural voices (Piper VITS), as k2-fsa/sherpa-onnx
 * publishes them on its GitHub releases (tag `tts-models`).
 *
 * Source: k2-fsa/sherpa-onnx at 634265c9b57642fdd158120148785c89aa281c4b (2026-08-08): the release
 * URLs and the files inside each archive are those its scripts and examples use. Upstream publishes
 * no checksum for these files, and none could be fetched from this network: entries carry no
 * SHA-256, so a pull records the archive's and `verify` checks the files against that record and
 * against the metadata sherpa-onnx needs. Sizes are approximate model sizes (for the table, never a
 * check). Licences differ per voice (each archive's MODEL_CARD states its own): read it before
 * offering a voice commercially.
 */
import type { LanguageCode } from "../engines/types.js";

const RELEASES = "https://github.com/k2-fsa/sherpa-onnx/releases/download";

/** Voices today; the streaming recognizer, punctuation and speaker models join as their engines land. */
export type SherpaModelKind = "tts";

/** What a TTS model needs from its directory (paths relative to it). */
export interface TtsLayout {
  /** Piper's VITS export; Kokoro joins when its engine path is tested (test/support/stand-in-models/kokoro.ts). */
  readonly kind: "vits";
  readonly model: string;
  readonly tokens: string;
  /** Speaker genders by speaker id, where published (single-speaker voices); others are measured. */
  readonly genders?: readonly ("female" | "male")[];
}

export interface SherpaModelEntry {
  readonly name: string;
  readonly kind: SherpaModelKind;
  /** The file downloaded: a `.tar.bz2` archive (unpacked into `dir`) or a single `.onnx` model. */
  readonly file: string;
  readonly url: string;
  /** The directory the archive unpacks into, under the models directory. */
  readonly dir: string;
  readonly languages: readonly LanguageCode[];
  /** Upstream's approximate size of what is loaded, MiB. */
  readonly approxMiB: number;
  /** Pulled by `npm run setup` when the network allows. */
  readonly default: boolean;
  readonly description: string;
  readonly tts: TtsLayout;
}

function piper(
  voice: string,
  options: {
    language: LanguageCode;
    genders?: TtsLayout["genders"];
    approxMiB?: number;
    default?: boolean;
    description: string;
  },
): SherpaModelEntry {
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
