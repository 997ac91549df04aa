/**
 * `relay live`'s transcript printing (src/cli/transcript-view.ts): one line per utterance, whether
 * its text comes as one final (`finalizeMode=sentence`) or as finals that grow (`stable`).
 */
import { describe, expect, it } from "vitest";
import type { ServerMessage } from "../../src/cli/recording-socket.js";
import { TranscriptView } from "../../src/cli/transcript-view.js";

function output(isTTY: boolean) {
  const written: string[] = [];
  const stream = {
    isTTY,
    columns: 200,
    write: (text: string) => written.push(text),
  } as unknown as NodeJS.WriteStream;
  return { stream, text: () => written.join("") };
}

const original = (id: string, text: string, final: boolean): ServerMessage => ({
  type: "original_transcript",
  correlation_id: id,
  text,
  is_final: final,
  source_language: "en",
});
const translated = (id: string, text: string, final: boolean): ServerMessage => ({
  type: "translated_transcript",
  correlation_id: id,
  text,
  is_final: final,
  target_language: "es",
});

/** Two utterances as a stable-mode session sends them: finals that grow, interims between. */
const SESSION: ServerMessage[] = [
  original("a", "go", false),
  original("a", "go forward", true),
  translated("a", "Va", true),
  original("a", "go forward ten", false),
  original("a", "go forward ten meters", true),
  translated("a", "Va de frente diez metros", true),
  original("b", "and", false),
  original("b", "and stop", true),
  translated("b", "y para", true),
];

function play(view: TranscriptView): void {
  const messages: ServerMessage[] = [];
  for (const message of SESSION) {
    messages.push(message);
    view.show(messages, messages.length - 1);
  }
  view.finish();
}

describe("relay live's transcript", () => {
  it("piped: each utterance once, when it is over, with its whole final text", () => {
    const out = output(false);
    play(new TranscriptView(out.stream, false));
    expect(out.text()).toBe(
      "[en] go forward ten meters\n[es] Va de frente diez metros\n[en] and stop\n[es] y para\n",
    );
  });

  it("on a terminal: the utterance in progress is redrawn in place, and printed once when it is over", () => {
    const out = output(true);
    play(new TranscriptView(out.stream, false));
    const lines = out
      .text()
      .split("\n")
      .map((line) => line.split("\r\u001b[2K").at(-1));
    // What stays on screen: one line per utterance, nothing of the growing text above it.
    expect(lines.filter(Boolean)).toEqual([
      "[en] go forward ten meters",
      "[es] Va de frente diez metros",
      "[en] and stop",
      "[es] y para",
    ]);
    // While it grew, it was shown in place (the status line), not printed line by line.
    expect(out.text()).toContain("\r\u001b[2K[en] go forward ten  ·  [es] Va");
    expect(out.text().match(/\[en\] go forward ten meters\n/gu)).toHaveLength(1);
  });

  it("with --json, every message as it came", () => {
    const out = output(false);
    play(new TranscriptView(out.stream, true));
    expect(out.text().trim().split("\n")).toHaveLength(SESSION.length);
  });
});
