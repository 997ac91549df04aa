import { describe, expect, it } from "vitest";
import { joinWords, TranscriptStabilizer, type StableWord } from "../../src/pipeline/stabilizer.js";

const words = (text: string): StableWord[] =>
  text
    .split(" ")
    .filter(Boolean)
    .map((t) => ({ text: t }));
const texts = (commits: StableWord[][]) => commits.map(joinWords);

describe("TranscriptStabilizer, stable mode", () => {
  it("commits words two hypotheses agree on, never the newest word", () => {
    const s = new TranscriptStabilizer("stable");
    expect(s.update(words("go for")).commits).toEqual([]);
    const second = s.update(words("go forward ten"));
    expect(texts(second.commits)).toEqual([]); // only "go" agrees: below the 2-word minimum
    const third = s.update(words("go forward ten meters"));
    expect(texts(third.commits)).toEqual(["go forward ten"]);
    expect(joinWords(third.pending)).toBe("meters");
  });

  it("keeps committed words when later hypotheses revise them, and finish commits the rest", () => {
    const s = new TranscriptStabilizer("stable");
    s.update(words("the cat sat on"));
    expect(texts(s.update(words("the cat sat on the")).commits)).toEqual(["the cat sat on"]);
    // the recognizer changes its mind about committed words: they stay, alignment is by position
    const revised = s.update(words("a cat sat on the mat"));
    expect(texts(revised.commits)).toEqual([]);
    expect(texts(s.finish(words("a cat sat on the mat today")).commits)).toEqual(["the mat today"]);
  });

  it("each final is a prefix extension when accumulated", () => {
    const s = new TranscriptStabilizer("stable");
    const hyps = ["one two", "one two three", "one two three four five", "one two three four five six"];
    const committed: string[] = [];
    for (const h of hyps) for (const c of s.update(words(h)).commits) committed.push(joinWords(c));
    for (const c of s.finish(words("one two three four five six seven")).commits)
      committed.push(joinWords(c));
    const cumulative = committed.map((_, i) => committed.slice(0, i + 1).join(" "));
    for (let i = 1; i < cumulative.length; i++)
      expect(cumulative[i]!.startsWith(cumulative[i - 1]!)).toBe(true);
    expect(cumulative.at(-1)).toBe("one two three four five six seven");
  });

  it("compares case-insensitively and resets after finish", () => {
    const s = new TranscriptStabilizer("stable");
    s.update(words("Hello there friend"));
    expect(texts(s.update(words("hello There friend now")).commits)).toEqual(["hello There friend"]);
    s.finish(words("hello There friend now"));
    expect(s.update(words("new words here")).commits).toEqual([]);
  });
});

describe("TranscriptStabilizer, sentence mode", () => {
  it("commits only up to a sentence end, one commit per sentence", () => {
    const s = new TranscriptStabilizer("sentence");
    s.update(words("Hello there. How are"));
    const update = s.update(words("Hello there. How are you? I am"));
    expect(texts(update.commits)).toEqual(["Hello there."]);
    const next = s.update(words("Hello there. How are you? I am fine. Thanks"));
    expect(texts(next.commits)).toEqual(["How are you?"]); // "I am" agreed too, but is no sentence yet
    const later = s.update(words("Hello there. How are you? I am fine. Thanks a lot"));
    expect(texts(later.commits)).toEqual(["I am fine."]);
    expect(texts(s.finish(words("Hello there. How are you? I am fine. Thanks a lot")).commits)).toEqual([
      "Thanks a lot",
    ]);
  });

  it("without punctuation the whole utterance is one sentence at finish", () => {
    const s = new TranscriptStabilizer("sentence");
    for (const h of ["go", "go forward", "go forward ten", "go forward ten meters"]) {
      expect(s.update(words(h)).commits).toEqual([]);
    }
    expect(texts(s.finish(words("go forward ten meters")).commits)).toEqual(["go forward ten meters"]);
  });
});

describe("TranscriptStabilizer, safeguards", () => {
  it("holds back words that end close to the audio head when word timings are known", () => {
    const s = new TranscriptStabilizer("stable", { holdBackMs: 500 });
    const timed = (text: string) => text.split(" ").map((t, i) => ({ text: t, endMs: (i + 1) * 300 }));
    s.update(timed("a b c d e"), 1500);
    // words end at 300..1500 ms; only those ending by 1000 ms (a, b, c) may be committed
    expect(texts(s.update(timed("a b c d e f"), 1500).commits)).toEqual(["a b c"]);
  });

  it("treats periods as sentence ends only for punctuating recognizers", () => {
    const s = new TranscriptStabilizer("sentence", { punctuated: false });
    s.update(words("mr john s. went home"));
    expect(s.update(words("mr john s. went home today")).commits).toEqual([]);
    expect(texts(s.finish(words("mr john s. went home today")).commits)).toEqual([
      "mr john s. went home today",
    ]);
  });
});
