/**
 * bpe.vocab derived from bpe.model (src/engines/sherpa-onnx/bpe-vocab.ts), as sherpa-onnx's
 * scripts/export_bpe_vocab.py writes it: every piece in id order, "piece\tscore\n", the score as
 * Python prints the model's float32.
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, truncate, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  bpeVocabFromModel,
  ModelType,
  PieceType,
  pythonFloatRepr,
  readSentencePieceModel,
  writeBpeVocab,
} from "../../src/engines/sherpa-onnx/bpe-vocab.js";
import { DataType, encodeModel, node, valueInfo } from "../support/stand-in-models/onnx-graph.js";
import {
  bpeModelForTokens,
  buildSentencePieceModel,
  type PieceSpec,
} from "../support/stand-in-models/sentencepiece.js";
import { writeStreamingTransducerStandIn } from "../support/stand-in-models/streaming-transducer.js";

/** A model as sentencepiece trains one with its defaults: <unk>, <s>, </s>, then the pieces. */
const SPM_DEFAULTS: PieceSpec[] = [
  { piece: "<unk>", score: 0, type: PieceType.UNKNOWN },
  { piece: "<s>", score: 0, type: PieceType.CONTROL },
  { piece: "</s>", score: 0, type: PieceType.CONTROL },
  { piece: "▁T", score: -0 },
  { piece: "HE", score: -1 },
  { piece: "▁THE", score: -2.5 },
  { piece: "▁", score: -3.4 },
  { piece: "E", score: -1e-5 },
];

const byteFallbackPieces = (): PieceSpec[] => [
  { piece: "<unk>", score: 0, type: PieceType.UNKNOWN },
  ...Array.from({ length: 256 }, (_, b) => ({
    piece: `<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`,
    score: 0,
    type: PieceType.BYTE,
  })),
  { piece: "▁A", score: -1 },
];

const lines = (vocab: string): string[] => vocab.split("\n").slice(0, -1);

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "relay-bpe-vocab-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("reading a SentencePiece model", () => {
  it("decodes the pieces in id order, their float32 scores and types, and the model type", () => {
    const model = readSentencePieceModel(buildSentencePieceModel(SPM_DEFAULTS));
    expect(model.modelType).toBe(ModelType.BPE);
    expect(model.byteFallback).toBe(false);
    expect(model.pieces.map((p) => p.piece)).toEqual(SPM_DEFAULTS.map((p) => p.piece));
    expect(model.pieces.map((p) => p.type)).toEqual([
      PieceType.UNKNOWN,
      PieceType.CONTROL,
      PieceType.CONTROL,
      ...Array<number>(5).fill(PieceType.NORMAL),
    ]);
    expect(model.pieces.map((p) => p.score)).toEqual(SPM_DEFAULTS.map((p) => Math.fround(p.score)));
  });
});

describe("bpe.vocab from bpe.model", () => {
  it("writes every piece, special ones included, as piece, tab, Python's repr of the score", () => {
    expect(bpeVocabFromModel(buildSentencePieceModel(SPM_DEFAULTS))).toBe(
      [
        "<unk>\t0.0",
        "<s>\t0.0",
        "</s>\t0.0",
        "▁T\t-0.0",
        "HE\t-1.0",
        "▁THE\t-2.5",
        // float32(-3.4) widened to a double, as sp.get_score hands it to Python.
        "▁\t-3.4000000953674316",
        "E\t-9.999999747378752e-06",
        "",
      ].join("\n"),
    );
  });

  it("keeps icefall's user-defined <blk> and <sos/eos> and byte pieces", () => {
    const icefall = buildSentencePieceModel([
      { piece: "<blk>", score: 0, type: PieceType.USER_DEFINED },
      { piece: "<sos/eos>", score: 0, type: PieceType.USER_DEFINED },
      { piece: "<unk>", score: 0, type: PieceType.UNKNOWN },
      { piece: "S", score: -3.237640857696533 },
    ]);
    // The score is the real LibriSpeech 500-piece model's, as its exported bpe.vocab has it.
    expect(lines(bpeVocabFromModel(icefall))).toEqual([
      "<blk>\t0.0",
      "<sos/eos>\t0.0",
      "<unk>\t0.0",
      "S\t-3.237640857696533",
    ]);
    const withBytes = bpeVocabFromModel(buildSentencePieceModel(byteFallbackPieces()));
    expect(lines(withBytes)).toHaveLength(258);
    expect(lines(withBytes).slice(0, 3)).toEqual(["<unk>\t0.0", "<0x00>\t0.0", "<0x01>\t0.0"]);
    expect(lines(withBytes).at(-1)).toBe("▁A\t-1.0");
  });

  it("takes a piece's score through piece_to_id, as the script does (control pieces first)", () => {
    const model = buildSentencePieceModel([
      { piece: "<unk>", score: 0, type: PieceType.UNKNOWN },
      { piece: "<s>", score: -7, type: PieceType.CONTROL },
      // sentencepiece allows the same text once among control pieces and once among the others.
      { piece: "<s>", score: -1, type: PieceType.USER_DEFINED },
    ]);
    expect(lines(bpeVocabFromModel(model))).toEqual(["<unk>\t0.0", "<s>\t-7.0", "<s>\t-7.0"]);
  });

  it("prints scores as Python's repr does", () => {
    const cases: [number, string][] = [
      [0, "0.0"],
      [-0, "-0.0"],
      [1, "1.0"],
      [-20, "-20.0"],
      [0.1, "0.1"],
      [0.0001, "0.0001"],
      [0.00012, "0.00012"],
      [1e-5, "1e-05"],
      [-1.5e-5, "-1.5e-05"],
      [123456789, "123456789.0"],
      [1e15, "1000000000000000.0"],
      [1e16, "1e+16"],
      [1.2345e22, "1.2345e+22"],
      [5e-324, "5e-324"],
      [Number.MAX_VALUE, "1.7976931348623157e+308"],
      [Math.fround(-9.5004), "-9.500399589538574"],
      [Infinity, "inf"],
      [NaN, "nan"],
    ];
    expect(cases.map(([value]) => pythonFloatRepr(value))).toEqual(cases.map(([, text]) => text));
  });

  it("writes bpe.vocab beside the model, and names the file it cannot read", async () => {
    const model = path.join(dir, "bpe.model");
    const vocab = path.join(dir, "bpe.vocab");
    await writeFile(model, buildSentencePieceModel(SPM_DEFAULTS));
    await writeBpeVocab(model, vocab);
    expect(await readFile(vocab, "utf8")).toBe(bpeVocabFromModel(buildSentencePieceModel(SPM_DEFAULTS)));

    const bad = path.join(dir, "bad.model");
    await writeFile(bad, "not a model");
    await expect(writeBpeVocab(bad, path.join(dir, "bad.vocab"))).rejects.toThrow(
      `${bad}: not a SentencePiece model`,
    );
  });
});

describe("what is not a SentencePiece model", () => {
  const refuse = (bytes: Uint8Array, reason: RegExp | string): void => {
    expect(() => bpeVocabFromModel(bytes)).toThrow(reason);
  };

  it("refuses garbage, an empty file, a truncated model and an ONNX model", () => {
    refuse(new TextEncoder().encode("this is not a sentencepiece model\n"), /not a SentencePiece model/);
    refuse(
      Uint8Array.from([0xff, 0xff, 0xff]),
      /not a SentencePiece model \(bpe.model\): malformed protobuf \(index out of range/,
    );
    refuse(new Uint8Array(), "not a SentencePiece model (bpe.model): it has no pieces");
    const model = buildSentencePieceModel(SPM_DEFAULTS);
    refuse(model.subarray(0, 20), /malformed protobuf|overruns/);
    const onnx = encodeModel({
      name: "identity",
      inputs: [valueInfo("x", DataType.FLOAT, [1])],
      outputs: [valueInfo("y", DataType.FLOAT, [1])],
      nodes: [node("Identity", ["x"], ["y"])],
    });
    refuse(onnx, "not a SentencePiece model (bpe.model): field 1 (pieces) has wire type 0, expected 2");
  });

  it("refuses what sentencepiece's loader refuses", () => {
    const unk = { piece: "<unk>", score: 0, type: PieceType.UNKNOWN };
    refuse(buildSentencePieceModel([{ piece: "A", score: 0 }]), "no <unk> piece");
    refuse(buildSentencePieceModel([unk, { ...unk, piece: "<unk2>" }]), "more than one <unk> piece");
    refuse(buildSentencePieceModel([unk, { piece: "", score: 0 }]), "piece 1 is empty");
    refuse(
      buildSentencePieceModel([unk, { piece: "A", score: 0 }, { piece: "A", score: -1 }]),
      'piece "A" is defined twice',
    );
    // Byte pieces need byte_fallback (the builder sets it when there are some), and all 256 of them.
    refuse(buildSentencePieceModel(byteFallbackPieces().slice(0, 10)), "not all 256 byte pieces");
    refuse(buildSentencePieceModel([unk, { piece: "<0xZZ>", score: 0, type: PieceType.BYTE }]), "byte piece");
  });

  it("refuses invalid UTF-8, and what sherpa-onnx could not read back from bpe.vocab", () => {
    const model = buildSentencePieceModel([{ piece: "<unk>", score: 0, type: PieceType.UNKNOWN }]);
    // The piece's text is at bytes 4…8 ("<unk>"): make it a lone continuation byte.
    const broken = Uint8Array.from(model);
    expect(new TextDecoder().decode(broken.subarray(4, 9))).toBe("<unk>");
    broken[5] = 0x80;
    refuse(broken, "pieces[0].piece is not valid UTF-8");
    const unk = { piece: "<unk>", score: 0, type: PieceType.UNKNOWN };
    refuse(buildSentencePieceModel([unk, { piece: "A B", score: 0 }]), /contains whitespace/);
    refuse(buildSentencePieceModel([unk, { piece: "A", score: NaN }]), /has score NaN/);
  });
});

describe("the stand-in recognizer's bpe.model", () => {
  it("gives the vocabulary its bpe.vocab has: same pieces in order, same float32 scores", async () => {
    const standIn = writeStreamingTransducerStandIn({ dir: path.join(dir, "transducer") });
    const tokens = await readFile(standIn.tokens, "utf8");
    const derived = lines(bpeVocabFromModel(bpeModelForTokens(tokens)));
    const written = lines(await readFile(standIn.bpeVocab, "utf8"));
    // As ssentencepiece reads a line: `iss >> token >> score`, the score a float.
    const parse = (line: string): [string, number] => {
      const [piece, score] = line.split(/[ \t]+/) as [string, string];
      return [piece, Math.fround(Number(score))];
    };
    expect(derived.map(parse)).toEqual(written.map(parse));
    expect(derived.map(parse).map(([piece]) => piece)).toEqual(
      tokens
        .trimEnd()
        .split("\n")
        .map((line) => line.split(" ")[0]),
    );
    // Only the text of the scores differs: Python's repr of the float32 against JS's of the double.
    expect(written.slice(2, 4)).toEqual(["<unk>\t0", "▁\t-20"]);
    expect(derived.slice(2, 4)).toEqual(["<unk>\t0.0", "▁\t-20.0"]);
  });
});

const python = spawnSync("python3", ["-c", "import sentencepiece"], { encoding: "utf8" });
const sentencepieceMissing = python.status !== 0;

describe("against the Python sentencepiece module", () => {
  it.skipIf(sentencepieceMissing)(
    `matches export_bpe_vocab.py for a model sentencepiece trains, and sentencepiece loads ours${
      sentencepieceMissing ? " (skipped: python3 cannot import sentencepiece)" : ""
    }`,
    async () => {
      const text = path.join(dir, "corpus.txt");
      await writeFile(
        text,
        [
          "GO FORWARD TEN METERS",
          "TURN LEFT THEN GO BACK",
          "THE SISTER SAID GOOD MORNING TO HER MOTHER",
          "THANK YOU VERY MUCH FOR THE WATER",
          "HELLO WORLD THIS IS A TEST OF THE SPEECH SERVICE",
        ].join("\n"),
      );
      const ours = path.join(dir, "ours.model");
      await writeFile(ours, buildSentencePieceModel(SPM_DEFAULTS));
      // What scripts/export_bpe_vocab.py does, for a model trained here and for ours.
      const script = [
        "import sys, sentencepiece as spm",
        "text, prefix, ours = sys.argv[1:4]",
        "spm.SentencePieceTrainer.train(input=text, model_prefix=prefix, model_type='bpe',",
        "    vocab_size=50, hard_vocab_limit=False, character_coverage=1.0,",
        "    user_defined_symbols=['<blk>', '<sos/eos>'], unk_id=2, bos_id=-1, eos_id=-1)",
        "for model in (prefix + '.model', ours):",
        "    sp = spm.SentencePieceProcessor()",
        "    sp.Load(model)",
        "    with open(model + '.vocab', 'w', encoding='utf-8', newline='') as f:",
        "        for v in [sp.id_to_piece(i) for i in range(sp.get_piece_size())]:",
        "            f.write(f'{v}\\t{sp.get_score(sp.piece_to_id(v))}\\n')",
      ].join("\n");
      const prefix = path.join(dir, "trained");
      const run = spawnSync("python3", ["-c", script, text, prefix, ours], { encoding: "utf8" });
      expect(run.status, run.stderr).toBe(0);
      const trained = await readFile(`${prefix}.model`);
      expect(readSentencePieceModel(trained).modelType).toBe(ModelType.BPE);
      expect(bpeVocabFromModel(trained)).toBe(await readFile(`${prefix}.model.vocab`, "utf8"));
      expect(bpeVocabFromModel(await readFile(ours))).toBe(await readFile(`${ours}.vocab`, "utf8"));
    },
  );
});

describe("a crafted bpe.model (a mirror's): bounded before it is read, refused fast", () => {
  it("refuses a file over 16 MiB before reading it, writing no bpe.vocab", async () => {
    const model = path.join(dir, "huge-bpe.model");
    const vocab = path.join(dir, "huge-bpe.vocab");
    // 256 MiB, sparse: what the 9 kB archive of issue 48 unpacked to, without the disk it took.
    await writeFile(model, "");
    await truncate(model, 256 * 1024 * 1024);
    await expect(writeBpeVocab(model, vocab)).rejects.toThrow(
      `${model}: not a SentencePiece model (bpe.model): it is 268435456 bytes, more than the 16777216 a SentencePiece model may have`,
    );
    expect(existsSync(vocab)).toBe(false);
    expect(existsSync(`${vocab}.partial`)).toBe(false);
  });

  it("stops decoding at the 262,144th piece rather than decoding every piece first", () => {
    // 262,145 empty pieces (two bytes each: the field's tag and a zero length), 512 kB.
    const pieces = Buffer.alloc(2 * 262_145);
    for (let at = 0; at < pieces.length; at += 2) pieces[at] = 0x0a;
    expect(() => readSentencePieceModel(pieces)).toThrow(
      "not a SentencePiece model (bpe.model): it has more than 262144 pieces",
    );
  });
});
