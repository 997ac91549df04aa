/**
 * The SDK's `speakableLines` (packages/client/src/speak-lines.ts), which `relay speak` and the
 * LiveKit plugin's TTS cut long texts with: every line within what the service takes, cut after
 * sentences where one fits, nothing lost.
 */
import { describe, expect, it } from "vitest";
import { MAX_SPEAK_CHARACTERS } from "../../packages/client/src/messages.js";
import { speakableLines } from "../../packages/client/src/speak-lines.js";

/** The service's bound on one WebSocket message (src/app-http.ts). */
const MAX_MESSAGE_BYTES = 64 * 1024;
const characters = (text: string) => [...text].length;
const words = (text: string) => text.split(/\s+/u).filter(Boolean);

describe("speakableLines", () => {
  it("cuts 120 kB of text into lines the service takes, each after a sentence, losing no word", () => {
    const text = "Is this the line that closed the socket with 1009? It was, before. ".repeat(1800);
    expect(text.length).toBeGreaterThan(120_000);
    const lines = speakableLines(text);
    expect(lines.length).toBeGreaterThan(20);
    for (const line of lines) {
      expect(characters(line)).toBeLessThanOrEqual(MAX_SPEAK_CHARACTERS);
      expect(line).toMatch(/[.?]$/u);
      expect(Buffer.byteLength(JSON.stringify({ type: "speak", text: line }))).toBeLessThan(
        MAX_MESSAGE_BYTES,
      );
    }
    expect(words(lines.join(" "))).toEqual(words(text));
  });

  it("counts characters as the service does (code points) and cuts where nothing else fits", () => {
    // Emoji are two UTF-16 units and one character; no space and no sentence end: cut at the bound.
    const emoji = "😀".repeat(MAX_SPEAK_CHARACTERS + 10);
    expect(speakableLines(emoji).map(characters)).toEqual([MAX_SPEAK_CHARACTERS, 10]);
    // No sentence end: at the last space.
    const spaced = "word ".repeat(1200);
    expect(speakableLines(spaced).map(characters)).toEqual([4999, 999]);
    // CJK full stops end sentences with no space after them.
    const chinese = "我们明天见。".repeat(1000);
    const lines = speakableLines(chinese);
    expect(lines.every((line) => line.endsWith("。") && characters(line) <= MAX_SPEAK_CHARACTERS)).toBe(true);
    expect(lines.join("")).toBe(chinese);
  });

  it("keeps a short text as it is and gives no line for blank text", () => {
    expect(speakableLines("  Bonjour à tous.  ")).toEqual(["Bonjour à tous."]);
    expect(speakableLines(" \n\t ")).toEqual([]);
  });
});
