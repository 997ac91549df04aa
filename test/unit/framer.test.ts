import { describe, expect, it } from "vitest";
import { frameAudio, Framer, OUTPUT_FRAME_SAMPLES } from "../../src/pipeline/framer.js";

describe("frameAudio", () => {
  it("cuts 80 ms frames and keeps the remainder unpadded", () => {
    const samples = Float32Array.from({ length: OUTPUT_FRAME_SAMPLES * 2 + 100 }, (_, i) => i);
    const frames = frameAudio(samples);
    expect(frames.map((f) => f.length)).toEqual([1920, 1920, 100]);
    expect(frames[1]![0]).toBe(1920);
    expect(frames[2]!.at(-1)).toBe(samples.length - 1);
  });

  it("gives standalone copies", () => {
    const samples = new Float32Array(OUTPUT_FRAME_SAMPLES);
    const [frame] = frameAudio(samples);
    frame![0] = 1;
    expect(samples[0]).toBe(0);
    expect(frame!.byteOffset).toBe(0);
  });

  it("returns nothing for empty audio", () => {
    expect(frameAudio(new Float32Array(0))).toEqual([]);
  });
});

describe("Framer", () => {
  it("cuts chunks of any length into the same frames as the whole clip", () => {
    const samples = Float32Array.from({ length: OUTPUT_FRAME_SAMPLES * 3 + 7 }, (_, i) => i);
    const framer = new Framer();
    const frames: Float32Array[] = [];
    for (const [start, end] of [
      [0, 100],
      [100, 100],
      [100, 4000],
      [4000, samples.length],
    ] as const)
      frames.push(...framer.push(samples.subarray(start, end)));
    frames.push(...framer.flush());
    expect(frames).toEqual(frameAudio(samples));
    expect(frames.every((frame) => frame.byteOffset === 0)).toBe(true);
    expect(framer.flush()).toEqual([]);
  });
});
