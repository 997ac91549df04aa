import { describe, expect, it } from "vitest";
import { LocalAgreement } from "../../src/engines/whisper-cpp/agreement.js";
import type { WordTiming } from "../../src/core/contracts.js";

/** Words 300 ms apart from `startMs`, each 250 ms long. */
function words(text: string, startMs = 0): WordTiming[] {
  return text
    .split(" ")
    .map((word, i) => ({ word, startMs: startMs + i * 300, endMs: startMs + i * 300 + 250 }));
}

const OPTIONS = { holdBackMs: 400, maxWindowMs: 6_000, keepMs: 2_000 };

describe("whisper local agreement", () => {
  it("commits the words two consecutive decodes agree on, and decodes only what follows them", () => {
    const agreement = new LocalAgreement(OPTIONS);
    agreement.accept(words("the cat sat"), 0, 1_000);
    // One decode alone commits nothing.
    expect(agreement.windowStartMs).toBe(0);
    expect(agreement.committedText).toBe("");
    expect(agreement.words.map((w) => w.word)).toEqual(["the", "cat", "sat"]);

    // Case and punctuation do not count; the first disagreement stops the commit.
    agreement.accept(words("The cat, sat on the mat"), 0, 2_000);
    expect(agreement.committedText).toBe("The cat, sat");
    expect(agreement.windowStartMs).toBe(850);
    expect(agreement.pendingCount).toBe(3);

    // The next decode covers only the audio after the committed words, timed on the utterance.
    agreement.accept(words("on the mat today", 900), 850, 3_000);
    expect(agreement.committedText).toBe("The cat, sat on the mat");
    expect(agreement.words.map((w) => w.word).join(" ")).toBe("The cat, sat on the mat today");
    expect(agreement.finish(words("today", 1_800)).map((w) => w.word)).toEqual([
      "The",
      "cat,",
      "sat",
      "on",
      "the",
      "mat",
      "today",
    ]);
  });

  it("holds back words ending near the end of the audio, which may still grow", () => {
    const agreement = new LocalAgreement(OPTIONS);
    agreement.accept(words("one two three"), 0, 900);
    agreement.accept(words("one two three"), 0, 1_000);
    // "three" ends at 850 ms, within 400 ms of the audio's end.
    expect(agreement.committedText).toBe("one two");
  });

  it("ignores a decode that started before the last commit", () => {
    const agreement = new LocalAgreement(OPTIONS);
    agreement.accept(words("a b c d"), 0, 2_000);
    agreement.accept(words("a b c d"), 0, 3_000);
    const committed = agreement.committedText;
    agreement.accept(words("x y z"), 0, 3_500);
    expect(agreement.committedText).toBe(committed);
    expect(agreement.words.map((w) => w.word).join(" ")).toBe("a b c d");
  });

  it("bounds the window: without agreement the older words are forced out, and audio without words is dropped", () => {
    const agreement = new LocalAgreement(OPTIONS);
    agreement.accept(
      words(
        "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon phi",
      ),
      0,
      6_500,
    );
    // 6.5 s > 6 s: words ending before 4.5 s (the last 2 s kept) are committed.
    expect(agreement.windowStartMs).toBeLessThanOrEqual(4_500);
    expect(agreement.windowStartMs).toBeGreaterThan(4_000);
    expect(agreement.committedText.split(" ")).toHaveLength(15);

    const silent = new LocalAgreement(OPTIONS);
    silent.accept([], 0, 5_000);
    expect(silent.windowStartMs).toBe(0);
    silent.accept([], 0, 7_000);
    expect(silent.windowStartMs).toBe(5_000);
    expect(silent.committedText).toBe("");
  });
});
