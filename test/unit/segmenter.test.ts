import { describe, expect, it } from "vitest";
import { DEFAULT_SEGMENTER_OPTIONS, SpeechSegmenter } from "../../src/pipeline/segmenter.js";

const options = { ...DEFAULT_SEGMENTER_OPTIONS, windowMs: 32 };

function run(segmenter: SpeechSegmenter, probabilities: number[]) {
  return probabilities.map((p) => segmenter.update(p));
}

describe("SpeechSegmenter", () => {
  it("opens after startWindows consecutive speech windows", () => {
    const events = run(new SpeechSegmenter(options), [0.1, 0.9, 0.2, 0.9, 0.9, 0.9]);
    expect(events).toEqual([undefined, undefined, undefined, undefined, "start", undefined]);
  });

  it("closes only after endSilenceMs of silence, ignoring short dips", () => {
    const segmenter = new SpeechSegmenter(options);
    run(segmenter, [0.9, 0.9]);
    const silenceWindows = Math.ceil(options.endSilenceMs / options.windowMs);
    // a dip shorter than the end silence, then speech again: no end
    expect(run(segmenter, [...Array(silenceWindows - 1).fill(0.05), 0.9])).not.toContain("end");
    const events = run(segmenter, Array(silenceWindows).fill(0.05));
    expect(events.indexOf("end")).toBe(silenceWindows - 1);
    expect(segmenter.inUtterance).toBe(false);
  });

  it("tells how much more silence closes an utterance once it has started ending", () => {
    const segmenter = new SpeechSegmenter(options);
    expect(segmenter.silenceToEndMs).toBeUndefined();
    run(segmenter, [0.9, 0.9]);
    expect(segmenter.silenceToEndMs).toBeUndefined(); // speaking
    run(segmenter, [0.05, 0.05, 0.05]);
    expect(segmenter.silenceToEndMs).toBe(options.endSilenceMs - 3 * options.windowMs);
    run(segmenter, [0.9]);
    expect(segmenter.silenceToEndMs).toBeUndefined(); // speech again
  });

  it("treats probabilities between the thresholds as neither new speech nor silence", () => {
    const segmenter = new SpeechSegmenter(options);
    run(segmenter, [0.9, 0.9]);
    expect(run(segmenter, Array(100).fill(0.4))).not.toContain("end");
  });

  it("caps utterance length", () => {
    const segmenter = new SpeechSegmenter({ ...options, maxUtteranceMs: 320 });
    const events = run(segmenter, Array(12).fill(0.9));
    expect(events.filter((e) => e === "end")).toHaveLength(1);
    expect(events.indexOf("end")).toBe(9);
  });

  it("reset forgets the open utterance", () => {
    const segmenter = new SpeechSegmenter(options);
    run(segmenter, [0.9, 0.9]);
    segmenter.reset();
    expect(segmenter.inUtterance).toBe(false);
    expect(run(segmenter, [0.9, 0.9])).toEqual([undefined, "start"]);
  });
});
