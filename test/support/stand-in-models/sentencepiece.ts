/**
 * SentencePiece models (`bpe.model`) for the tests: the real file format, a protobuf ModelProto
 * (google/sentencepiece 273449044caa593c2fd7eb7550cb3ab2cff93f1a, src/sentencepiece_model.proto), with
 * the pieces given and the little else a model file has: a trainer_spec (model_type BPE, vocab_size,
 * the special pieces' ids) and a normalizer_spec ("identity": no precompiled character map to carry).
 * So stand-in archives can ship a bpe.model, as sherpa-onnx-streaming-zipformer-en-2023-06-26 does,
 * and the service derive bpe.vocab from it (src/engines/sherpa-onnx/bpe-vocab.ts).
 */
import { pieceScore } from "./streaming-transducer.js";
import protobuf from "protobufjs/minimal.js";
import { ModelType, PieceType } from "../../../src/engines/sherpa-onnx/bpe-vocab.js";

export interface PieceSpec {
  piece: string;
  score: number;
  /** SentencePiece.Type (PieceType in src/engines/sherpa-onnx/bpe-vocab.ts); NORMAL when left out. */
  type?: number;
}

const WIRE_VARINT = 0;
const WIRE_FIXED32 = 5;
const WIRE_BYTES = 2;
const tag = (field: number, wire: number): number => ((field << 3) | wire) >>> 0;

/** A ModelProto with these pieces, in id order. Scores are stored as float32, as in real models. */
export function buildSentencePieceModel(pieces: readonly PieceSpec[]): Uint8Array {
  const writer = protobuf.Writer.create();
  for (const { piece, score, type } of pieces) {
    writer.uint32(tag(1, WIRE_BYTES)).fork();
    writer.uint32(tag(1, WIRE_BYTES)).string(piece);
    writer.uint32(tag(2, WIRE_FIXED32)).float(score);
    writer.uint32(tag(3, WIRE_VARINT)).int32(type ?? PieceType.NORMAL);
    writer.ldelim();
  }
  const idOf = (type: number): number => pieces.findIndex((p) => p.type === type);
  const byteFallback = pieces.some((p) => p.type === PieceType.BYTE);
  // trainer_spec: model_type = 3, vocab_size = 4, byte_fallback = 35, unk_id = 40, bos_id = 41,
  // eos_id = 42 (-1: none, as icefall trains its models).
  writer.uint32(tag(2, WIRE_BYTES)).fork();
  writer.uint32(tag(3, WIRE_VARINT)).int32(ModelType.BPE);
  writer.uint32(tag(4, WIRE_VARINT)).int32(pieces.length);
  if (byteFallback) writer.uint32(tag(35, WIRE_VARINT)).bool(true);
  writer.uint32(tag(40, WIRE_VARINT)).int32(idOf(PieceType.UNKNOWN));
  writer.uint32(tag(41, WIRE_VARINT)).int32(pieces.findIndex((p) => p.piece === "<s>"));
  writer.uint32(tag(42, WIRE_VARINT)).int32(pieces.findIndex((p) => p.piece === "</s>"));
  writer.ldelim();
  // normalizer_spec: name = 1; add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces keep
  // their defaults (true).
  writer.uint32(tag(3, WIRE_BYTES)).fork();
  writer.uint32(tag(1, WIRE_BYTES)).string("identity");
  writer.ldelim();
  return writer.finish();
}

/** The special pieces of icefall's BPE models: user-defined <blk> and <sos/eos>, then <unk>. */
const SPECIAL_TYPES: Readonly<Record<string, number>> = {
  "<blk>": PieceType.USER_DEFINED,
  "<sos/eos>": PieceType.USER_DEFINED,
  "<unk>": PieceType.UNKNOWN,
  "<s>": PieceType.CONTROL,
  "</s>": PieceType.CONTROL,
};

/**
 * A bpe.model whose pieces are tokens.txt's ("<piece> <id>" a line, ids 0…n-1), as icefall's
 * tokens.txt lists its bpe.model's pieces: <blk>, <sos/eos> and <unk> first, then the BPE pieces.
 * Scores come from `score` (the stand-in recognizer's by default).
 */
export function bpeModelForTokens(
  tokensTxt: string,
  score: (piece: string, id: number) => number = pieceScore,
): Uint8Array {
  const byId = new Map<number, string>();
  for (const line of tokensTxt.split("\n")) {
    if (line.trim() === "") continue;
    const space = line.lastIndexOf(" ");
    const id = Number(line.slice(space + 1));
    if (space <= 0 || !Number.isInteger(id) || id < 0 || byId.has(id))
      throw new Error(`tokens.txt: bad line ${JSON.stringify(line)}`);
    byId.set(id, line.slice(0, space));
  }
  const pieces: PieceSpec[] = [];
  for (let id = 0; id < byId.size; id++) {
    const piece = byId.get(id);
    if (piece === undefined) throw new Error(`tokens.txt: no token with id ${id}`);
    pieces.push({ piece, score: score(piece, id), type: SPECIAL_TYPES[piece] ?? PieceType.NORMAL });
  }
  return buildSentencePieceModel(pieces);
}
