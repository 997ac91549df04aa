import { describe, expect, it } from "vitest";
import { LocalAgreement } from "../../src/engines/whisper-cpp/agreement.js";
import type { WordTiming } from "../../src/core/contracts.js";

/** Words 300 ms apart from `startMs`, each 250 ms long. */
function words(text: string, startMs = 0): WordTiming[] {
  return text
    .split(" ")
    .map((word, i) => ({ word, startMs: startMs + i * 300, endMs: startMs + i * 300 + 250 }));
}

const OPTIONS = { holdBackMs: 400, maxWindowMs: 6_000, keepMs: 2_000, overlapMs: 400 };

describe("whisper local agreement", () => {
  it("commits the words two consecutive decodes agree on, and decodes again only the newest of them", () => {
    const agreement = new LocalAgreement(OPTIONS);
    agreement.accept(words("the cat sat"), 0, 1_000);
    // One decode alone commits nothing.
    expect(agreement.windowStartMs).toBe(0);
    expect(agreement.committedText).toBe("");
    expect(agreement.words.map((w) => w.word)).toEqual(["the", "cat", "sat"]);

    // Case and punctuation do not count; the first disagreement stops the commit.
    agreement.accept(words("The cat, sat on the mat"), 0, 2_000);
    expect(agreement.committedText).toBe("The cat, sat");
    expect(agreement.pendingCount).toBe(3);
    // The next decode starts 200 ms before "sat" (600–850 ms), the only committed word within 400 ms
    // of the last commit: it hears "sat" again, and the words before it are its prompt.
    expect(agreement.windowStartMs).toBe(400);
    expect(agreement.promptText).toBe("The cat,");

    // Words that heard the overlap again are not taken twice; what follows is compared as before.
    agreement.accept(words("sat on the mat today", 500), 400, 3_000);
    expect(agreement.committedText).toBe("The cat, sat on the mat");
    expect(agreement.words.map((w) => w.word).join(" ")).toBe("The cat, sat on the mat today");
    expect(agreement.finish(words("mat today", 1_400)).map((w) => w.word)).toEqual([
      "The",
      "cat,",
      "sat",
      "on",
      "the",
      "mat",
      "today",
    ]);
  });

  it("aligns a decode to the overlap by its words, not by whisper's word times", () => {
    const agreement = new LocalAgreement(OPTIONS);
    agreement.accept(words("go forward ten meters"), 0, 2_000);
    agreement.accept(words("go forward ten meters"), 0, 2_000);
    expect(agreement.committedText).toBe("go forward ten meters");
    expect(agreement.promptText).toBe("go forward ten");
    const start = agreement.windowStartMs;
    // The window starts just before "meters" as whisper timed it, but whisper had timed it early:
    // the decode hears "ten meters" again, timed from the window's start, then a new word.
    expect(agreement.finish(words("ten meters now", start)).map((w) => w.word)).toEqual([
      "go",
      "forward",
      "ten",
      "meters",
      "now",
    ]);
    // One that hears only new words keeps them all.
    expect(
      agreement
        .finish(words("and back", start))
        .map((w) => w.word)
        .join(" "),
    ).toBe("go forward ten meters and back");
  });

  it("holds back words ending near the end of the audio, which may still grow", () => {
    const agreement = new LocalAgreement(OPTIONS);
    agreement.accept(words("one two three"), 0, 900);
    agreement.accept(words("one two three"), 0, 1_000);
    // "three" ends at 850 ms, within 400 ms of the audio's end.
    expect(agreement.committedText).toBe("one two");
  });

  it("ignores a decode of a window that has moved since", () => {
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
    // 6.5 s > 6 s: words ending before 4.5 s (the last 2 s kept) are committed, and the next decode
    // starts before the newest of them (4.2–4.45 s), to hear it again.
    expect(agreement.windowStartMs).toBeLessThanOrEqual(4_200);
    expect(agreement.windowStartMs).toBeGreaterThan(3_500);
    expect(agreement.committedText.split(" ")).toHaveLength(15);

    const silent = new LocalAgreement(OPTIONS);
    silent.accept([], 0, 5_000);
    expect(silent.windowStartMs).toBe(0);
    silent.accept([], 0, 7_000);
    expect(silent.windowStartMs).toBe(5_000);
    expect(silent.committedText).toBe("");
  });
});
