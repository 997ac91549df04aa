import { describe, expect, it } from "vitest";
import { shapeClip, trimSilence } from "../../src/dubbing/media/clips.js";
import { assertDubbable } from "../../src/dubbing/media/input-checks.js";
import { overallProgress, DUB_STAGES } from "../../src/dubbing/stages/progress.js";
import { MediaTooShortError, UnsupportedFormatError } from "../../src/dubbing/media/errors.js";
import { isAcceptedFormat, type MediaInfo } from "../../src/dubbing/media/ffmpeg.js";
import { OFFLINE_SEGMENTER_OPTIONS, padSpans, SpanCollector } from "../../src/dubbing/stages/segments.js";

const WINDOW_MS = 32;
const options = { ...OFFLINE_SEGMENTER_OPTIONS, windowMs: WINDOW_MS };

/** Spans from a string of windows: "#" speech (0.9), "-" silence (0.05), "~" uncertain (0.4). */
function spansOf(pattern: string): { startSec: number; endSec: number }[] {
  const collector = new SpanCollector(options);
  for (const c of pattern) collector.push(c === "#" ? 0.9 : c === "~" ? 0.4 : 0.05);
  return collector.finish();
}

const w = (windows: number): number => (windows * WINDOW_MS) / 1000;

describe("SpanCollector", () => {
  const silenceToEnd = "-".repeat(Math.ceil(OFFLINE_SEGMENTER_OPTIONS.endSilenceMs / WINDOW_MS));

  it("spans from the first speech window to the last voiced one, not through the closing silence", () => {
    const spans = spansOf(`-----######~~-#${silenceToEnd}---`);
    expect(spans).toHaveLength(1);
    expect(spans[0]!.startSec).toBeCloseTo(w(5), 9);
    // "~" (0.4) is above the negative threshold, so it counts as voiced; the last "#" ends the span.
    expect(spans[0]!.endSec).toBeCloseTo(w(15), 9);
  });

  it("keeps short pauses inside one utterance and splits at the end silence", () => {
    const spans = spansOf(`###---###${silenceToEnd}####${silenceToEnd}`);
    expect(spans).toHaveLength(2);
    expect(spans[0]!.startSec).toBe(0);
    expect(spans[0]!.endSec).toBeCloseTo(w(9), 9);
    expect(spans[1]!.startSec).toBeCloseTo(w(9 + silenceToEnd.length), 9);
  });

  it("ignores a single speech window and closes an utterance still open at the end", () => {
    expect(spansOf("--#--")).toEqual([]);
    const spans = spansOf("--####");
    expect(spans).toHaveLength(1);
    expect(spans[0]!.endSec).toBeCloseTo(w(6), 9);
  });

  it("cuts continuous speech at the maximum utterance length", () => {
    const maxWindows = Math.ceil(OFFLINE_SEGMENTER_OPTIONS.maxUtteranceMs / WINDOW_MS);
    const spans = spansOf("#".repeat(maxWindows * 2 + 10));
    expect(spans.length).toBeGreaterThanOrEqual(2);
    for (const span of spans) {
      expect(span.endSec - span.startSec).toBeLessThanOrEqual(
        OFFLINE_SEGMENTER_OPTIONS.maxUtteranceMs / 1000 + 1e-9,
      );
    }
  });
});

describe("padSpans", () => {
  it("pads by up to 100 ms without crossing the middle of a pause or the media bounds", () => {
    const padded = padSpans(
      [
        { startSec: 0.05, endSec: 1 },
        { startSec: 1.1, endSec: 2 },
        { startSec: 3, endSec: 4.95 },
      ],
      0.1,
      5,
    );
    expect(padded[0]!.startSec).toBe(0);
    expect(padded[0]!.endSec).toBeCloseTo(1.05, 9);
    expect(padded[1]!.startSec).toBeCloseTo(1.05, 9);
    expect(padded[1]!.endSec).toBeCloseTo(2.1, 9);
    expect(padded[2]!.startSec).toBeCloseTo(2.9, 9);
    expect(padded[2]!.endSec).toBe(5);
  });
});

describe("clip shaping", () => {
  it("trims leading and trailing silence, keeping a small margin", () => {
    const samples = new Float32Array(1000);
    samples.fill(0.5, 300, 600);
    const trimmed = trimSilence(samples, 1000, 0.02);
    expect(trimmed.length).toBe(300 + 40);
    expect(trimSilence(new Float32Array(100), 1000)).toHaveLength(0);
  });

  it("cuts to the allowed length and fades both ends", () => {
    const shaped = shapeClip(new Float32Array(100).fill(1), 60, 5, 20);
    expect(shaped).toHaveLength(60);
    expect(shaped[0]).toBe(0);
    expect(shaped[30]).toBe(1);
    expect(shaped[59]).toBe(0);
    expect(shaped[50]).toBeCloseTo(9 / 20, 6); // inside the 20-sample trim fade
  });
});

describe("overallProgress", () => {
  it("weights add up to 1 and overall progress only grows through the stages", () => {
    expect(DUB_STAGES.reduce((sum, s) => sum + s.weight, 0)).toBeCloseTo(1, 9);
    let previous = 0;
    for (const { stage } of DUB_STAGES) {
      for (const fraction of [0, 0.5, 1]) {
        const value = overallProgress(stage, fraction);
        expect(value).toBeGreaterThanOrEqual(previous);
        previous = value;
      }
    }
    expect(previous).toBeCloseTo(1, 9);
  });
});

describe("input checks", () => {
  const media: MediaInfo = {
    durationSec: 10,
    hasAudio: true,
    hasVideo: true,
    videoCodec: "h264",
    audioCodec: "aac",
    formatName: "mov,mp4,m4a,3gp,3g2,mj2",
    audioStreamIndex: 1,
    videoStreamIndex: 0,
    audioChannels: 2,
    audioSampleRate: 48_000,
  };

  it("accepts plain containers and refuses formats that reference other files", () => {
    for (const name of ["mov,mp4,m4a,3gp,3g2,mj2", "matroska,webm", "wav", "mp3", "ogg", "mpegts"]) {
      expect(isAcceptedFormat(name), name).toBe(true);
    }
    for (const name of ["hls", "concat", "image2", "dash", "tty", "lavfi", ""]) {
      expect(isAcceptedFormat(name), name).toBe(false);
    }
  });

  it("needs an accepted format, an audio track and at least one second", () => {
    expect(() => assertDubbable(media)).not.toThrow();
    expect(() => assertDubbable({ ...media, formatName: "concat" })).toThrow(UnsupportedFormatError);
    expect(() => assertDubbable({ ...media, hasAudio: false })).toThrow(/no audio track/);
    expect(() => assertDubbable({ ...media, durationSec: 0.99 })).toThrow(MediaTooShortError);
  });
});
