/**
 * bpe.vocab from bpe.model, for sherpa-onnx hotwords (`modelingUnit: "bpe"`, `bpeVocab`). Some model
 * archives (sherpa-onnx-streaming-zipformer-en-2023-06-26 among them) ship the SentencePiece model
 * `bpe.model` but not `bpe.vocab`; k2-fsa's docs say to export it with sherpa-onnx's
 * scripts/export_bpe_vocab.py. This module writes the same text without Python.
 *
 * What upstream writes (k2-fsa/sherpa-onnx 634265c9b57642fdd158120148785c89aa281c4b,
 * scripts/export_bpe_vocab.py): it loads the model with sentencepiece's SentencePieceProcessor, then,
 * for every id from 0 to get_piece_size() - 1 in order, one line `piece`, a tab, the score, "\n"
 * (codecs.open in "w" mode: UTF-8, no newline translation). Every piece is written whatever its type:
 * <unk>, control pieces (<s>, </s>), user-defined ones (<blk>, <sos/eos> in icefall's models), byte
 * pieces. The score is `sp.get_score(sp.piece_to_id(piece))`, formatted by an f-string: the model's
 * float32 widened to a double and printed as Python's repr does ("0.0", "-3.237640857696533",
 * "1e-05"). sentencepiece's processor (google/sentencepiece 273449044caa593c2fd7eb7550cb3ab2cff93f1a,
 * src/model_interface.{h,cc}) returns the piece's stored string and score for an id, and maps a piece
 * back to an id through its control/unknown/byte pieces first, then the others.
 *
 * What sherpa-onnx reads: it builds an ssentencepiece::Ssentencepiece from the file (sherpa-onnx's
 * cmake/simple-sentencepiece.cmake pins pkufool/simple-sentencepiece v0.7,
 * 62dd423df1d51da5ea06f1c3a046fc04f01b4f39, ssentencepiece/csrc/ssentencepiece.cc, LoadVocab): each
 * line is read with `iss >> token >> score` (any whitespace separates; a float score), the line number
 * is the piece's id, a line that does not parse ends the process. Pieces are matched by their text, and
 * a hotword's pieces are then looked up in tokens.txt. So a piece with ASCII whitespace in it cannot be
 * written (upstream's script would write a file sherpa-onnx then refuses), nor can a score that is not
 * finite ("inf"/"nan" do not parse as a C++ float): both are errors here.
 *
 * The model is a protobuf ModelProto (google/sentencepiece, src/sentencepiece_model.proto): field 1
 * `pieces` (repeated SentencePiece: piece = 1 string, score = 2 float, type = 3 enum, NORMAL by
 * default), trainer_spec = 2 (model_type = 3, byte_fallback = 35), other fields ignored. It is checked
 * as sentencepiece's loader checks it (ModelInterface::InitializePieces), since upstream's script fails
 * on what that loader refuses.
 */
import { constants } from "node:fs";
import { open, rename, rm, writeFile } from "node:fs/promises";
import protobuf from "protobufjs/minimal.js";

/** SentencePiece.Type (sentencepiece_model.proto). */
export const PieceType = {
  NORMAL: 1,
  UNKNOWN: 2,
  CONTROL: 3,
  USER_DEFINED: 4,
  UNUSED: 5,
  BYTE: 6,
} as const;

const PIECE_TYPES = new Set<number>(Object.values(PieceType));

/** TrainerSpec.ModelType (sentencepiece_model.proto); UNIGRAM is the default. */
export const ModelType = { UNIGRAM: 1, BPE: 2, WORD: 3, CHAR: 4 } as const;

export interface SentencePiece {
  readonly piece: string;
  /** The model's float32 score, as a JS number (exactly the float32's value). */
  readonly score: number;
  readonly type: number;
}

export interface SentencePieceModel {
  /** In id order. */
  readonly pieces: readonly SentencePiece[];
  readonly modelType: number;
  readonly byteFallback: boolean;
}

/**
 * The most a bpe.model may hold. The file comes from a model archive (a mirror's, in principle), and
 * decoding keeps every piece in memory: unbounded, 9 kB of archive unpacking to 256 MiB of empty
 * pieces took 5.9 GiB and ended the process. The largest SentencePiece models published are a few
 * MB (Gemma's 256,000 pieces: 4.2 MB; the zipformer's 500: 240 kB), so the bounds leave room for
 * those and refuse the rest before it is read (the size) or as soon as it is seen (the pieces).
 */
export const MAX_BPE_MODEL_BYTES = 16 * 1024 * 1024;
export const MAX_PIECES = 262_144;

const WIRE_VARINT = 0;
const WIRE_BYTES = 2;
const WIRE_FIXED32 = 5;

const utf8 = new TextDecoder("utf-8", { fatal: true });

class NotASentencePieceModel extends Error {
  constructor(reason: string) {
    super(`not a SentencePiece model (bpe.model): ${reason}`);
    this.name = "NotASentencePieceModel";
  }
}

/** Reads one field's tag; field number 0 never occurs in a valid message. */
function readTag(reader: protobuf.Reader): { field: number; wire: number } {
  const tag = reader.uint32();
  const field = tag >>> 3;
  if (field === 0) throw new NotASentencePieceModel(`field number 0 at byte ${reader.pos}`);
  return { field, wire: tag & 7 };
}

function expectWire(what: string, wire: number, expected: number): void {
  if (wire !== expected)
    throw new NotASentencePieceModel(`${what} has wire type ${wire}, expected ${expected}`);
}

function decodePiece(reader: protobuf.Reader, end: number, index: number): SentencePiece {
  // proto2 defaults: empty piece, score 0, type NORMAL.
  let piece = "";
  let score = 0;
  let type: number = PieceType.NORMAL;
  while (reader.pos < end) {
    const { field, wire } = readTag(reader);
    if (field === 1) {
      expectWire(`pieces[${index}].piece`, wire, WIRE_BYTES);
      const raw = reader.bytes();
      try {
        piece = utf8.decode(raw);
      } catch {
        throw new NotASentencePieceModel(`pieces[${index}].piece is not valid UTF-8`);
      }
    } else if (field === 2) {
      expectWire(`pieces[${index}].score`, wire, WIRE_FIXED32);
      score = reader.float();
    } else if (field === 3) {
      expectWire(`pieces[${index}].type`, wire, WIRE_VARINT);
      const value = reader.int32();
      // proto2: an enum value the schema does not know leaves the field at its default.
      if (PIECE_TYPES.has(value)) type = value;
    } else {
      reader.skipType(wire);
    }
  }
  if (reader.pos !== end) throw new NotASentencePieceModel(`pieces[${index}] overruns its length`);
  return { piece, score, type };
}

function decodeTrainerSpec(
  reader: protobuf.Reader,
  end: number,
  spec: { modelType: number; byteFallback: boolean },
): void {
  while (reader.pos < end) {
    const { field, wire } = readTag(reader);
    if (field === 3) {
      expectWire("trainer_spec.model_type", wire, WIRE_VARINT);
      spec.modelType = reader.int32();
    } else if (field === 35) {
      expectWire("trainer_spec.byte_fallback", wire, WIRE_VARINT);
      spec.byteFallback = reader.bool();
    } else {
      reader.skipType(wire);
    }
  }
  if (reader.pos !== end) throw new NotASentencePieceModel("trainer_spec overruns its length");
}

function decode(bytes: Uint8Array): SentencePieceModel {
  const reader = protobuf.Reader.create(bytes);
  const pieces: SentencePiece[] = [];
  const spec = { modelType: ModelType.UNIGRAM as number, byteFallback: false };
  while (reader.pos < reader.len) {
    const { field, wire } = readTag(reader);
    if (field === 1) {
      expectWire("field 1 (pieces)", wire, WIRE_BYTES);
      if (pieces.length === MAX_PIECES)
        throw new NotASentencePieceModel(`it has more than ${MAX_PIECES} pieces`);
      const length = reader.uint32();
      pieces.push(decodePiece(reader, reader.pos + length, pieces.length));
    } else if (field === 2) {
      expectWire("field 2 (trainer_spec)", wire, WIRE_BYTES);
      const length = reader.uint32();
      decodeTrainerSpec(reader, reader.pos + length, spec);
    } else {
      reader.skipType(wire);
    }
  }
  return { pieces, ...spec };
}

/** `<0x00>` … `<0xFF>` (upper-case hex, as sentencepiece's ByteToPiece prints them) → the byte. */
function pieceToByte(piece: string): number | undefined {
  const match = /^<0x([0-9A-F]{2})>$/.exec(piece);
  return match ? parseInt(match[1]!, 16) : undefined;
}

/** sentencepiece's own checks on load (ModelInterface::InitializePieces). */
function check(model: SentencePieceModel): void {
  if (model.pieces.length === 0) throw new NotASentencePieceModel("it has no pieces");
  const normal = new Set<string>();
  const reserved = new Set<string>();
  const bytesFound = new Set<number>();
  let unknowns = 0;
  model.pieces.forEach(({ piece, type }, id) => {
    if (piece === "") throw new NotASentencePieceModel(`piece ${id} is empty`);
    const isNormal =
      type === PieceType.NORMAL || type === PieceType.USER_DEFINED || type === PieceType.UNUSED;
    const seen = isNormal ? normal : reserved;
    if (seen.has(piece)) throw new NotASentencePieceModel(`piece ${JSON.stringify(piece)} is defined twice`);
    seen.add(piece);
    if (type === PieceType.UNKNOWN) unknowns++;
    if (type === PieceType.BYTE) {
      if (!model.byteFallback)
        throw new NotASentencePieceModel(`byte piece ${piece} although byte_fallback is false`);
      const byte = pieceToByte(piece);
      if (byte === undefined)
        throw new NotASentencePieceModel(`byte piece ${JSON.stringify(piece)} is invalid`);
      bytesFound.add(byte);
    }
  });
  if (unknowns !== 1)
    throw new NotASentencePieceModel(unknowns === 0 ? "no <unk> piece" : "more than one <unk> piece");
  if (model.byteFallback && bytesFound.size !== 256)
    throw new NotASentencePieceModel("byte_fallback is true but not all 256 byte pieces are there");
}

/** Decodes and checks a SentencePiece ModelProto; throws an Error saying why for anything else. */
export function readSentencePieceModel(bytes: Uint8Array): SentencePieceModel {
  let model: SentencePieceModel;
  try {
    model = decode(bytes);
  } catch (error) {
    if (error instanceof NotASentencePieceModel) throw error;
    // protobufjs's Reader: truncated input ("index out of range"), a wire type that does not exist…
    throw new NotASentencePieceModel(`malformed protobuf (${(error as Error).message})`);
  }
  check(model);
  return model;
}

/**
 * A double as Python's repr prints it (CPython's float_repr: the shortest digits that read back as the
 * same double, in positional notation unless the decimal exponent is below -4 or above 15, and then
 * with a signed exponent of at least two digits; integers keep a ".0").
 */
export function pythonFloatRepr(value: number): string {
  if (Number.isNaN(value)) return "nan";
  if (!Number.isFinite(value)) return value > 0 ? "inf" : "-inf";
  const sign = value < 0 || Object.is(value, -0) ? "-" : "";
  // toExponential() with no argument: the shortest round-tripping digits, as repr uses.
  const [mantissa, exponentText] = Math.abs(value).toExponential().split("e") as [string, string];
  const digits = mantissa.replace(".", "");
  const exponent = Number(exponentText);
  // value = 0.digits × 10^point
  const point = exponent + 1;
  if (point <= -4 || point > 16) {
    const shown = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    const absExponent = String(Math.abs(exponent)).padStart(2, "0");
    return `${sign}${shown}e${exponent < 0 ? "-" : "+"}${absExponent}`;
  }
  if (point <= 0) return `${sign}0.${"0".repeat(-point)}${digits}`;
  if (point >= digits.length) return `${sign}${digits}${"0".repeat(point - digits.length)}.0`;
  return `${sign}${digits.slice(0, point)}.${digits.slice(point)}`;
}

/** Whitespace as a C++ `istream >> std::string` sees it in the "C" locale. */
const CPP_WHITESPACE = /[ \t\n\v\f\r]/;

/** The bpe.vocab text for a SentencePiece model (bpe.model), as sherpa-onnx's export script writes it. */
export function bpeVocabFromModel(modelBytes: Uint8Array): string {
  const { pieces } = readSentencePieceModel(modelBytes);
  // sp.piece_to_id: control/unknown/byte pieces first, then the others (a valid model has each piece
  // once per group, so this is the piece's own id unless a piece is in both groups).
  const reservedIds = new Map<string, number>();
  const normalIds = new Map<string, number>();
  pieces.forEach(({ piece, type }, id) => {
    const isNormal =
      type === PieceType.NORMAL || type === PieceType.USER_DEFINED || type === PieceType.UNUSED;
    (isNormal ? normalIds : reservedIds).set(piece, id);
  });
  return pieces
    .map(({ piece }, id) => {
      if (CPP_WHITESPACE.test(piece))
        throw new Error(
          `piece ${id} (${JSON.stringify(piece)}) contains whitespace: sherpa-onnx cannot read it from bpe.vocab`,
        );
      const scoreId = reservedIds.get(piece) ?? normalIds.get(piece) ?? id;
      const score = pieces[scoreId]!.score;
      if (!Number.isFinite(score))
        throw new Error(
          `piece ${id} (${JSON.stringify(piece)}) has score ${score}: sherpa-onnx cannot read it`,
        );
      return `${piece}\t${pythonFloatRepr(score)}\n`;
    })
    .join("");
}

/** The bytes of `file` (never through a link), refused before they are read when over MAX_BPE_MODEL_BYTES. */
async function readBounded(file: string): Promise<Buffer> {
  const handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    const { size } = await handle.stat();
    if (size > MAX_BPE_MODEL_BYTES)
      throw new NotASentencePieceModel(
        `it is ${size} bytes, more than the ${MAX_BPE_MODEL_BYTES} a SentencePiece model may have`,
      );
    // Exactly the size seen: a file growing meanwhile is not read further.
    const bytes = Buffer.alloc(size);
    let read = 0;
    while (read < size) {
      const { bytesRead } = await handle.read(bytes, read, size - read, read);
      if (bytesRead === 0) break;
      read += bytesRead;
    }
    return bytes.subarray(0, read);
  } finally {
    await handle.close();
  }
}

/**
 * Reads `modelFile` (bpe.model) and writes its bpe.vocab to `vocabFile` (via a temporary file beside
 * it, removed if writing fails).
 */
export async function writeBpeVocab(modelFile: string, vocabFile: string): Promise<void> {
  let vocab: string;
  try {
    vocab = bpeVocabFromModel(await readBounded(modelFile));
  } catch (error) {
    throw new Error(`${modelFile}: ${(error as Error).message}`, { cause: error });
  }
  const partial = `${vocabFile}.partial`;
  try {
    await writeFile(partial, vocab, "utf8");
    await rename(partial, vocabFile);
  } catch (error) {
    await rm(partial, { force: true });
    throw error;
  }
}
