/**
 * What a whisper.cpp ggml model file says about itself, read from its header before whisper.cpp loads
 * it: a clear error for files that are not whisper models, and the languages the model knows.
 */
import { open, type FileHandle } from "node:fs/promises";
import type { LanguageCode } from "../../core/contracts.js";

/** `GGML_FILE_MAGIC` ("ggml"), as whisper.cpp reads it: a little-endian uint32. */
const GGML_MAGIC = 0x67676d6c;
/** Magic plus the eleven int32 hyper-parameters whisper.cpp reads first. */
export const HEADER_BYTES = 4 + 11 * 4;

export interface WhisperModelHeader {
  readonly nVocab: number;
  readonly nAudioCtx: number;
  readonly nAudioState: number;
  readonly nAudioHead: number;
  readonly nAudioLayer: number;
  readonly nTextCtx: number;
  readonly nTextState: number;
  readonly nTextHead: number;
  readonly nTextLayer: number;
  readonly nMels: number;
  readonly ftype: number;
}

/**
 * whisper.cpp's language codes in token order (`g_lang` in whisper.cpp 1.9): a model with n languages
 * knows the first n. Multilingual models before large-v3 know 99; large-v3 adds Cantonese ("yue").
 */
// prettier-ignore
export const WHISPER_LANGUAGES: readonly string[] = [
  "en", "zh", "de", "es", "ru", "ko", "fr", "ja", "pt", "tr", "pl", "ca", "nl", "ar", "sv", "it", "id",
  "hi", "fi", "vi", "he", "uk", "el", "ms", "cs", "ro", "da", "hu", "ta", "no", "th", "ur", "hr", "bg",
  "lt", "la", "mi", "ml", "cy", "sk", "te", "fa", "lv", "bn", "sr", "az", "sl", "kn", "et", "mk", "br",
  "eu", "is", "hy", "ne", "mn", "bs", "kk", "sq", "sw", "gl", "mr", "pa", "si", "km", "sn", "yo", "so",
  "af", "oc", "ka", "be", "tg", "sd", "gu", "am", "yi", "lo", "uz", "fo", "ht", "ps", "tk", "nn", "mt",
  "sa", "lb", "my", "bo", "tl", "mg", "as", "tt", "haw", "ln", "ha", "ba", "jw", "su", "yue",
];

/** whisper.cpp spells Javanese "jw"; the service speaks ISO 639-1 ("jv"). */
const TO_ISO: Readonly<Record<string, LanguageCode>> = { jw: "jv" };
const TO_WHISPER: Readonly<Record<LanguageCode, string>> = { jv: "jw" };

export function toIsoLanguage(whisperCode: string): LanguageCode {
  return TO_ISO[whisperCode] ?? whisperCode;
}

export function toWhisperLanguage(language: LanguageCode): string {
  return TO_WHISPER[language] ?? language;
}

/** Parses the header, or says why the bytes are not a whisper.cpp model. */
export function parseModelHeader(bytes: Uint8Array): WhisperModelHeader | string {
  if (bytes.length < HEADER_BYTES) {
    return `${bytes.length} bytes is too short for a whisper.cpp model header`;
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, HEADER_BYTES);
  const magic = view.getUint32(0, true);
  if (magic !== GGML_MAGIC) {
    const hint = bytes[0] === 0x47 && bytes[1] === 0x47 && bytes[2] === 0x55 && bytes[3] === 0x46;
    return hint
      ? "it is a GGUF file; whisper.cpp reads its own ggml format (ggml-*.bin)"
      : `bad magic 0x${magic.toString(16).padStart(8, "0")} (expected 0x${GGML_MAGIC.toString(16)}, "ggml")`;
  }
  const field = (i: number): number => view.getInt32(4 + 4 * i, true);
  const header: WhisperModelHeader = {
    nVocab: field(0),
    nAudioCtx: field(1),
    nAudioState: field(2),
    nAudioHead: field(3),
    nAudioLayer: field(4),
    nTextCtx: field(5),
    nTextState: field(6),
    nTextHead: field(7),
    nTextLayer: field(8),
    nMels: field(9),
    ftype: field(10),
  };
  // The vocabulary is 51864 tokens for English-only models, 51865 for multilingual ones and one more per
  // language beyond 99 (large-v3: 51866); anything far from that is not a whisper model.
  if (header.nVocab < 51_864 || header.nVocab > 52_000) {
    return `vocabulary size ${header.nVocab} is not a whisper model's`;
  }
  if (Object.values(header).some((value) => value < 0)) return "negative hyper-parameters";
  return header;
}

/** As whisper.cpp decides it (`is_multilingual`). */
export function isMultilingual(header: WhisperModelHeader): boolean {
  return header.nVocab >= 51_865;
}

/** The languages the model was trained on, as ISO codes (English only for `*.en` models). */
export function modelLanguages(header: WhisperModelHeader): LanguageCode[] {
  if (!isMultilingual(header)) return ["en"];
  // whisper.cpp's `num_languages()`.
  const count = header.nVocab - 51_765 - 1;
  return WHISPER_LANGUAGES.slice(0, Math.min(count, WHISPER_LANGUAGES.length)).map(toIsoLanguage);
}

/** "tiny", "base", …, from the encoder depth. */
export function modelSize(header: WhisperModelHeader): string {
  const sizes: Readonly<Record<number, string>> = {
    4: "tiny",
    6: "base",
    12: "small",
    24: "medium",
    32: "large",
  };
  return sizes[header.nAudioLayer] ?? `${header.nAudioLayer}-layer`;
}

/**
 * `ftype` values whisper.cpp can load (`ggml_ftype_to_ggml_type`); any other one makes ggml abort the
 * whole process with a failed assertion instead of returning an error.
 */
const LOADABLE_FTYPES = new Set([0, 1, 2, 3, ...Array.from({ length: 18 }, (_, i) => i + 7)]);

/** [elements per block, bytes per block] of the ggml tensor types whisper.cpp models use. */
const TENSOR_TYPES: Readonly<Record<number, readonly [number, number]>> = {
  0: [1, 4], // F32
  1: [1, 2], // F16
  2: [32, 18], // Q4_0
  3: [32, 20], // Q4_1
  6: [32, 22], // Q5_0
  7: [32, 24], // Q5_1
  8: [32, 34], // Q8_0
  9: [32, 36], // Q8_1
  10: [256, 84], // Q2_K
  11: [256, 110], // Q3_K
  12: [256, 144], // Q4_K
  13: [256, 176], // Q5_K
  14: [256, 210], // Q6_K
  15: [256, 292], // Q8_K
  30: [1, 2], // BF16
};

export interface WhisperModelFile {
  readonly header: WhisperModelHeader;
  /** Weight tensors in the file; whisper.cpp's test fixtures have none (it then runs on zeros). */
  readonly tensors: number;
  readonly bytes: number;
}

/** Sequential reads over a file handle, buffered, with errors that say where the file ends. */
class FileCursor {
  private buffer = new Uint8Array(0);
  private bufferStart = 0;
  position = 0;

  constructor(
    private readonly handle: FileHandle,
    readonly size: number,
  ) {}

  get remaining(): number {
    return this.size - this.position;
  }

  async int32(what: string): Promise<number> {
    const bytes = await this.bytes(4, what);
    return new DataView(bytes.buffer, bytes.byteOffset, 4).getInt32(0, true);
  }

  async bytes(count: number, what: string): Promise<Uint8Array> {
    this.need(count, what);
    const offset = this.position - this.bufferStart;
    if (offset < 0 || offset + count > this.buffer.length) {
      this.buffer = new Uint8Array(Math.min(Math.max(count, 1 << 20), this.remaining));
      this.bufferStart = this.position;
      await this.handle.read(this.buffer, 0, this.buffer.length, this.position);
    }
    const start = this.position - this.bufferStart;
    this.position += count;
    return this.buffer.subarray(start, start + count);
  }

  skip(count: number, what: string): void {
    this.need(count, what);
    this.position += count;
  }

  private need(count: number, what: string): void {
    if (count > this.remaining) {
      throw new Error(
        `truncated: the file ends inside ${what} (${count} bytes needed at offset ${this.position}, ` +
          `${this.remaining} left)`,
      );
    }
  }
}

/**
 * Walks the file as whisper.cpp's loader will — header, mel filters, vocabulary, then every tensor's
 * header and data — without reading the weights. whisper.cpp itself reads past the end of a truncated
 * file into uninitialised values (huge allocations, or a "model" with half its weights) and aborts the
 * process on some invalid values, so a damaged file must be caught here.
 */
async function walkModel(cursor: FileCursor): Promise<WhisperModelFile> {
  const parsed = parseModelHeader(await cursor.bytes(HEADER_BYTES, "the header"));
  if (typeof parsed === "string") throw new Error(parsed);
  const header = parsed;
  if (!LOADABLE_FTYPES.has(header.ftype % 1000))
    throw new Error(`unknown weight type (ftype ${header.ftype})`);

  const nMel = await cursor.int32("the mel filters");
  const nFft = await cursor.int32("the mel filters");
  if (nMel < 1 || nMel > 512 || nFft < 1 || nFft > 4096) {
    throw new Error(`implausible mel filter bank ${nMel}×${nFft}`);
  }
  cursor.skip(nMel * nFft * 4, "the mel filters");

  const nVocab = await cursor.int32("the vocabulary");
  if (nVocab < 1 || nVocab > 1_000_000) throw new Error(`implausible vocabulary size ${nVocab}`);
  for (let i = 0; i < nVocab; i++) {
    const length = await cursor.int32("the vocabulary");
    if (length < 0 || length > 4096) throw new Error(`implausible length ${length} of token ${i}`);
    cursor.skip(length, "the vocabulary");
  }

  let tensors = 0;
  // whisper.cpp stops at the first tensor header it cannot read whole (end of file).
  while (cursor.remaining >= 12) {
    const what = `tensor ${tensors}`;
    const dims = await cursor.int32(what);
    const nameLength = await cursor.int32(what);
    const type = await cursor.int32(what);
    if (dims < 0 || dims > 4) throw new Error(`${what}: invalid number of dimensions ${dims}`);
    if (nameLength < 1 || nameLength > 4096) throw new Error(`${what}: invalid name length ${nameLength}`);
    const layout = TENSOR_TYPES[type];
    if (layout === undefined) throw new Error(`${what}: unsupported tensor type ${type}`);
    let elements = 1;
    const shape: number[] = [];
    for (let d = 0; d < dims; d++) {
      const extent = await cursor.int32(what);
      if (extent < 1) throw new Error(`${what}: invalid shape`);
      shape.push(extent);
      elements *= extent;
    }
    const name = new TextDecoder().decode(await cursor.bytes(nameLength, what));
    const [blockElements, blockBytes] = layout;
    if (elements > 0x7fffffff || (shape[0] ?? 1) % blockElements !== 0) {
      throw new Error(`tensor ${name}: invalid shape [${shape.join(", ")}] for type ${type}`);
    }
    cursor.skip((elements / blockElements) * blockBytes, `the data of tensor ${name}`);
    tensors++;
  }
  return { header, tensors, bytes: cursor.size };
}

/** Checks that `file` is a complete whisper.cpp model, with errors that name the file. */
export async function inspectModelFile(file: string): Promise<WhisperModelFile> {
  let handle: FileHandle;
  try {
    handle = await open(file, "r");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const message =
      code === "ENOENT"
        ? `whisper.cpp model file missing: ${file}`
        : `whisper.cpp model file unreadable: ${file} (${(error as Error).message})`;
    throw new Error(message, { cause: error });
  }
  try {
    const stat = await handle.stat();
    if (stat.isDirectory()) throw new Error(`whisper.cpp model path is a directory, not a file: ${file}`);
    if (!stat.isFile()) throw new Error(`whisper.cpp model path is not a regular file: ${file}`);
    try {
      return await walkModel(new FileCursor(handle, stat.size));
    } catch (error) {
      const reason = (error as Error).message;
      const unreadable = (error as NodeJS.ErrnoException).code !== undefined;
      throw new Error(
        unreadable
          ? `whisper.cpp model file unreadable: ${file} (${reason})`
          : `not a whisper.cpp model file: ${file}: ${reason}`,
        { cause: error },
      );
    }
  } finally {
    await handle.close();
  }
}
