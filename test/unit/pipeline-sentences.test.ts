import { describe, expect, it } from "vitest";
import { SentenceSplitter } from "../../src/core/sentence-splitter.js";

/** Feeds the pieces one by one; returns the sentences each push completed, then the flush. */
function split(...pieces: string[]): { pushes: string[][]; rest: string[] } {
  const splitter = new SentenceSplitter();
  const pushes = pieces.map((piece) => splitter.push(piece));
  return { pushes, rest: splitter.flush() };
}

describe("SentenceSplitter", () => {
  it("completes a sentence once white space follows its end mark, not before", () => {
    const { pushes, rest } = split("Hola", ".", " ¿Qué", " tal?", " Bien!", " Y tú");
    expect(pushes).toEqual([[], [], ["Hola."], [], ["¿Qué tal?"], ["Bien!"]]);
    expect(rest).toEqual(["Y tú"]);
  });

  it("keeps closing quotes and brackets with their sentence, and splits several at once", () => {
    const { pushes, rest } = split('He said "stop." They left (at last.) Gone? ');
    expect(pushes).toEqual([['He said "stop."', "They left (at last.)", "Gone?"]]);
    expect(rest).toEqual([]);
  });

  it("does not end a sentence inside a number or after a common abbreviation", () => {
    const { pushes, rest } = split("It costs 3.5 euros, Dr. Smith said, e.g. now. Done");
    expect(pushes).toEqual([["It costs 3.5 euros, Dr. Smith said, e.g. now."]]);
    expect(rest).toEqual(["Done"]);
  });

  it("ends CJK sentences at 。！？ without white space", () => {
    const { pushes, rest } = split("你好。我很", "好！你呢？", "再见");
    expect(pushes).toEqual([["你好。"], ["我很好！", "你呢？"], []]);
    expect(rest).toEqual(["再见"]);
  });

  it("an ellipsis followed by white space ends a sentence; flush of nothing is nothing", () => {
    expect(split("Bueno... vale").pushes).toEqual([["Bueno..."]]);
    expect(split("", "   ").rest).toEqual([]);
  });
});
