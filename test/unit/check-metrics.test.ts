/**
 * The scores and limits of `relay models check` (src/engines/kit/models/check-metrics.ts): word error rate,
 * chrF2 as sacrebleu computes it, and the floors each installed model is held to.
 */
import { describe, expect, it } from "vitest";
import {
  chrF,
  chrfFloor,
  MEASURED_ROUND_TRIP_WER,
  measuredWerLimit,
  PUBLISHED_WER,
  scoringWords,
  werLimit,
  prefixWordEdits,
  wordEdits,
  wordErrorRate,
} from "../../src/engines/kit/models/check-metrics.js";
import { findMtModel, type MtQuality } from "../../src/engines/transformers-js/catalogue.js";
import { findSherpaModel } from "../../src/engines/sherpa-onnx/catalogue.js";

describe("word error rate", () => {
  it("scores words without case or punctuation, keeping apostrophes inside words", () => {
    expect(scoringWords("Don’t stop, 'Bob'!  The END.")).toEqual(["don't", "stop", "bob", "the", "end"]);
    expect(scoringWords(" ... ")).toEqual([]);
  });

  it("counts substitutions, deletions and insertions", () => {
    const words = (text: string) => text.split(" ");
    expect(wordEdits(words("the cat sat"), words("the cat sat"))).toBe(0);
    expect(wordEdits(words("the cat sat"), words("the dog sat"))).toBe(1);
    expect(wordEdits(words("the cat sat"), words("the sat"))).toBe(1);
    expect(wordEdits(words("the cat sat"), words("the cat sat down"))).toBe(1);
    expect(wordEdits(words("a b c d"), words("b c d e"))).toBe(2);
    expect(wordEdits(words("a b"), [])).toBe(2);
    // Every prefix of the hypothesis at once; with one leading word free, an extra first word costs nothing.
    expect(prefixWordEdits(words("b c"), words("a b c d"))).toEqual([2, 2, 2, 1, 2]);
    expect(prefixWordEdits(words("b c"), words("a b c d"), 1)).toEqual([2, 2, 1, 0, 1]);
  });

  it("is a corpus rate: all edits over all reference words, in percent", () => {
    expect(wordErrorRate(["The cat sat."], ["the cat sat"])).toBe(0);
    // 1 edit over 4 reference words, then 1 over 4 + 0 over 4.
    expect(wordErrorRate(["one two three four"], ["one two three"])).toBe(25);
    expect(
      wordErrorRate(
        ["one two three four", "five six seven eight"],
        ["one two three", "five six seven eight"],
      ),
    ).toBe(12.5);
    // Nothing heard: every word deleted; words made up: more than 100 %.
    expect(wordErrorRate(["one two"], [""])).toBe(100);
    expect(wordErrorRate(["one two"], ["a b c d"])).toBe(200);
    expect(() => wordErrorRate(["one"], [])).toThrow();
  });
});

describe("chrF2 (sacrebleu's definition)", () => {
  it("is 100 for identical texts and 0 for texts without a character in common", () => {
    expect(chrF(["Hello, world."], ["Hello, world."])).toBe(100);
    expect(chrF(["abc def"], ["xyz uvw"])).toBe(0);
    expect(chrF(["abc"], [""])).toBe(0);
  });

  it("matches a worked example, whitespace removed", () => {
    // Hypothesis "ab", reference "abc":
    //   1-grams: hypothesis a b (2), reference a b c (3), matches 2 → P = 1, R = 2/3
    //   2-grams: hypothesis ab (1), reference ab bc (2), matches 1 → P = 1, R = 1/2
    //   3-grams: the hypothesis has none → the order does not count (nor do 4 to 6)
    //   average P = 1, R = (2/3 + 1/2) / 2 = 7/12
    //   chrF2 = (1 + 4)·P·R / (4·P + R) = (35/12) / (55/12) = 7/11 → 63.64
    expect(chrF(["abc"], ["ab"])).toBeCloseTo((100 * 7) / 11, 10);
    expect(chrF(["a b c"], ["a  b"])).toBeCloseTo((100 * 7) / 11, 10);
    // Hypothesis "abc", reference "abd": P = R = (2/3 + 1/2 + 0) / 3 = 7/18 → chrF = 7/18 → 38.89.
    expect(chrF(["abd"], ["abc"])).toBeCloseTo((100 * 7) / 18, 10);
    // Case counts: "A" and "a" are different characters.
    expect(chrF(["a"], ["A"])).toBe(0);
  });

  it("counts characters, not UTF-16 units", () => {
    // "😀😀x" against "😀😀" is "abc" against "ab" when counted in characters (7/11); in UTF-16
    // units (5 against 4, the emoji halves as n-grams) it would be another figure.
    expect(chrF(["😀😀x"], ["😀😀"])).toBeCloseTo((100 * 7) / 11, 10);
    expect(chrF(["日本語"], ["日本"])).toBeCloseTo((100 * 7) / 11, 10);
  });

  it("gives sacrebleu's own figures (sacrebleu 2 CHRF(), as its metric card shows them)", () => {
    expect(
      chrF(
        ["The ties between Obama and Netanyahu are not particularly friendly."],
        ["The relationship between Obama and Netanyahu is not exactly friendly."],
      ),
    ).toBeCloseTo(61.576379378113785, 9);
    // A corpus: the n-gram counts of both sentences are added up before precision and recall.
    expect(
      chrF(
        [
          "The relationship between dogs and cats is not exactly friendly.",
          "A good bookshop is just a genteel Black Hole that knows how to read.",
        ],
        [
          "The relationship between cats and dogs is not exactly friendly.",
          "a good bookshop is just a genteel black hole that knows how to read.",
        ],
      ),
    ).toBeCloseTo(84.64214891738334, 9);
  });
});

describe("limits", () => {
  it("holds whisper base's round trip to 2 × the round trip measured on real weights + 15 points", () => {
    expect(measuredWerLimit(MEASURED_ROUND_TRIP_WER["whisper base"]!)).toBeCloseTo(23, 10);
  });

  it("holds the round trip to 3 × the published test-other WER + 10 points", () => {
    const zipformer = PUBLISHED_WER["streaming-zipformer-en"]!;
    expect(werLimit(zipformer)).toBeCloseTo(33.4, 10);
    // The figures are the ones the catalogue quotes.
    expect(findSherpaModel("streaming-zipformer-en")!.description).toContain(
      `LibriSpeech WER ${zipformer.testClean} / ${zipformer.testOther} %`,
    );
  });

  it("takes a published chrF less 15 points, reading a value up to 1 as a fraction", () => {
    const quality: MtQuality[] = [
      { direction: "en-xx", metric: "chrF", value: 0.5, testSet: "T", source: "s" },
      { direction: "en-yy", metric: "chrF", value: 55, testSet: "T", source: "s" },
    ];
    expect(chrfFloor(quality, "en-xx", 2).floor).toBeCloseTo(35, 10);
    expect(chrfFloor(quality, "en-yy", 2).floor).toBe(40);
    expect(chrfFloor(quality, "en-yy", 2).basis).toMatch(/published chrF 55\.0 \(T\) − 15/u);
  });

  it("takes a published FLORES BLEU as the chrF floor where only BLEU is published", () => {
    const enFr = findMtModel("opus-mt-en-fr")!;
    const floor = chrfFloor(enFr.quality, "en-fr", 24.7);
    expect(floor.floor).toBe(47.8);
    expect(floor.basis).toMatch(/only BLEU published: chrF ≥ BLEU 47.8 \(FLORES-101 devtest\)/u);
  });

  it("never passes a translation no better than the untranslated source + 10", () => {
    // en-es: FLORES BLEU 26.7, but English left as it is already scores 24 against Spanish.
    const enEs = findMtModel("opus-mt-en-es")!;
    expect(chrfFloor(enEs.quality, "en-es", 24).floor).toBe(34);
    expect(chrfFloor(enEs.quality, "en-es", 24).basis).toMatch(/untranslated source 24\.0 \+ 10/u);
    // en-zh publishes a Tatoeba chrF of 0.268: 26.8 − 15.
    const enZh = findMtModel("opus-mt-en-zh")!;
    expect(chrfFloor(enZh.quality, "en-zh", 0).floor).toBeCloseTo(11.8, 10);
    // Nothing published (M2M100 into Japanese): the untranslated source alone.
    const m2m = findMtModel("m2m100-418m")!;
    const nothing = chrfFloor(m2m.quality, "en-ja", 1);
    expect(nothing).toEqual({ floor: 11, basis: "nothing published: untranslated source 1.0 + 10" });
    // BLEU into a language written without spaces says nothing about chrF.
    const bleuOnly: MtQuality[] = [
      { direction: "en-ja", metric: "BLEU", value: 30, testSet: "FLORES-101 devtest", source: "s" },
    ];
    expect(chrfFloor(bleuOnly, "en-ja", 1).floor).toBe(11);
  });
});
