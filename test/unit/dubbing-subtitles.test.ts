import { describe, expect, it } from "vitest";
import { toSrt, toWebVtt, type SubtitleSegment } from "../../src/dubbing/stages/subtitles.js";

const segments: SubtitleSegment[] = [
  { startSec: 1.5, endSec: 3.25, text: "go forward ten meters", translatedText: "Va de frente diez metros" },
  { startSec: 3723.0004, endSec: 3725.9996, text: "then stop", translatedText: "entonces para" },
];

describe("toSrt", () => {
  it("numbers cues and uses HH:MM:SS,mmm timestamps", () => {
    expect(toSrt(segments, "original")).toBe(
      "1\n00:00:01,500 --> 00:00:03,250\ngo forward ten meters\n\n" +
        "2\n01:02:03,000 --> 01:02:06,000\nthen stop\n",
    );
    expect(toSrt(segments, "translated")).toContain(
      "00:00:01,500 --> 00:00:03,250\nVa de frente diez metros\n",
    );
  });

  it("skips empty texts without a gap in the numbering and sorts by time", () => {
    const srt = toSrt(
      [
        { startSec: 9, endSec: 10, text: "last", translatedText: "" },
        { startSec: 0, endSec: 1, text: "  ", translatedText: "x" },
        { startSec: 4, endSec: 5, text: "middle", translatedText: "" },
      ],
      "original",
    );
    expect(srt).toBe("1\n00:00:04,000 --> 00:00:05,000\nmiddle\n\n2\n00:00:09,000 --> 00:00:10,000\nlast\n");
    expect(toSrt([], "original")).toBe("");
  });

  it("never emits a blank line inside a cue or a zero-length cue", () => {
    const srt = toSrt([{ startSec: 2, endSec: 2, text: "one\n\n two", translatedText: "" }], "original");
    expect(srt).toBe("1\n00:00:02,000 --> 00:00:02,001\none\ntwo\n");
  });
});

describe("toWebVtt", () => {
  it("has the WEBVTT header and HH:MM:SS.mmm timestamps", () => {
    expect(toWebVtt(segments, "translated")).toBe(
      "WEBVTT\n\n00:00:01.500 --> 00:00:03.250\nVa de frente diez metros\n\n" +
        "01:02:03.000 --> 01:02:06.000\nentonces para\n",
    );
    expect(toWebVtt([], "original")).toBe("WEBVTT\n");
  });

  it("escapes markup characters and cannot contain a cue arrow in text", () => {
    const vtt = toWebVtt(
      [{ startSec: 0, endSec: 1, text: "a <b> & c --> d", translatedText: "" }],
      "original",
    );
    expect(vtt).toBe("WEBVTT\n\n00:00:00.000 --> 00:00:01.000\na &lt;b&gt; &amp; c --&gt; d\n");
  });
});

describe("speakers in subtitles", () => {
  const spoken = [
    { startSec: 0, endSec: 1, speaker: "1", text: "hello", translatedText: "hola" },
    { startSec: 1.5, endSec: 2, speaker: "2", text: "hi <there>", translatedText: "" },
    { startSec: 3, endSec: 4, text: "unknown", translatedText: "" },
  ];

  it("names each cue's speaker only when asked: WebVTT voice spans, SubRip prefixes", () => {
    expect(toWebVtt(spoken, "original", { speakers: true })).toBe(
      "WEBVTT\n\n00:00:00.000 --> 00:00:01.000\n<v 1>hello</v>\n\n" +
        "00:00:01.500 --> 00:00:02.000\n<v 2>hi &lt;there&gt;</v>\n\n00:00:03.000 --> 00:00:04.000\nunknown\n",
    );
    expect(toSrt(spoken, "translated", { speakers: true })).toBe(
      "1\n00:00:00,000 --> 00:00:01,000\n1: hola\n",
    );
    expect(toWebVtt(spoken, "original")).not.toContain("<v ");
    expect(toSrt(spoken, "original")).not.toContain("1: ");
  });
});
