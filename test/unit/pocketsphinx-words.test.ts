import { describe, expect, it } from "vitest";
import {
  baseWord,
  cleanText,
  isFiller,
  segmentsToWords,
  toHypothesis,
  type Segment,
} from "../../src/engines/pocketsphinx/words.js";
import { cmuPhones } from "../../src/engines/pocketsphinx/pronunciation.js";

describe("PocketSphinx hypothesis cleaning", () => {
  it("recognizes sentence markers, silence and noise words as fillers", () => {
    for (const word of ["<s>", "</s>", "<sil>", "[NOISE]", "[SPEECH]", "++BREATH++", "<null>", ""]) {
      expect(isFiller(word), word).toBe(true);
    }
    for (const word of ["go", "i'm", "mr", "forward(2)"]) expect(isFiller(word), word).toBe(false);
  });

  it("strips alternate-pronunciation suffixes only at the end", () => {
    expect(baseWord("the(2)")).toBe("the");
    expect(baseWord("leisure(12)")).toBe("leisure");
    expect(baseWord("go")).toBe("go");
    expect(baseWord("(2)x")).toBe("(2)x");
  });

  it("cleans hypothesis strings", () => {
    expect(cleanText(null)).toBe("");
    expect(cleanText("")).toBe("");
    expect(cleanText("<s> go <sil> forward(2) [NOISE] ten meters </s>")).toBe("go forward ten meters");
  });

  it("turns inclusive frame ranges into milliseconds and drops fillers", () => {
    const segments: Segment[] = [
      { word: "<s>", startFrame: 0, endFrame: 24 },
      { word: "<sil>", startFrame: 25, endFrame: 45 },
      { word: "go", startFrame: 46, endFrame: 63 },
      { word: "forward(2)", startFrame: 64, endFrame: 116 },
      { word: "[NOISE]", startFrame: 117, endFrame: 120 },
      { word: "ten", startFrame: 121, endFrame: 152 },
      { word: "</s>", startFrame: 153, endFrame: 160 },
    ];
    expect(segmentsToWords(segments, 2000)).toEqual([
      { word: "go", startMs: 460, endMs: 640 },
      { word: "forward", startMs: 640, endMs: 1170 },
      { word: "ten", startMs: 1210, endMs: 1530 },
    ]);
  });

  it("clamps timings to the audio written", () => {
    const segments: Segment[] = [
      { word: "go", startFrame: 10, endFrame: 19 },
      { word: "on", startFrame: 20, endFrame: 40 },
    ];
    expect(segmentsToWords(segments, 300)).toEqual([
      { word: "go", startMs: 100, endMs: 200 },
      { word: "on", startMs: 200, endMs: 300 },
    ]);
    expect(segmentsToWords([{ word: "late", startFrame: 50, endFrame: 60 }], 300)).toEqual([
      { word: "late", startMs: 300, endMs: 300 },
    ]);
  });

  it("derives the text from the words, or from the hypothesis string when there are none", () => {
    const segments: Segment[] = [
      { word: "<s>", startFrame: 0, endFrame: 3 },
      { word: "hello", startFrame: 4, endFrame: 30 },
    ];
    expect(toHypothesis("hello", segments, 1000)).toEqual({
      text: "hello",
      words: [{ word: "hello", startMs: 40, endMs: 310 }],
    });
    expect(toHypothesis("hello there", [], 1000)).toEqual({ text: "hello there", words: [] });
    expect(toHypothesis(null, [], 0)).toEqual({ text: "", words: [] });
  });
});

describe("pronunciations for added words", () => {
  it("maps eSpeak NG's American IPA to the model's CMU phones", () => {
    expect(cmuPhones("skˈoʊfɚ")).toBe("S K OW F ER");
    expect(cmuPhones("kjˈuːbɚnˌiːts")).toBe("K Y UW B ER N IY T S");
    expect(cmuPhones("dˈɔɪtʃlənd")).toBe("D OY CH L AH N D");
    // A flap and a syllabic consonant as the dictionary writes them ("butter", "button").
    expect(cmuPhones("bˈʌɾɚ")).toBe("B AH T ER");
    expect(cmuPhones("bˈʌʔn̩")).toBe("B AH T AH N");
    expect(cmuPhones("ʁ")).toBeUndefined();
  });
});
