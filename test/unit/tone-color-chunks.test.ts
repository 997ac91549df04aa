/** Converting a sentence in pieces (src/engines/openvoice/chunks.ts): the plan and the seams. */
import { describe, expect, it } from "vitest";
import { ChunkStitcher, planChunks } from "../../src/engines/openvoice/chunks.js";

const SETTINGS = { first: 1000, next: 2500, context: 300, fade: 10, step: 100 };

/** Converts each piece with an identity "converter" and stitches them back. */
function roundTrip(signal: Float32Array): Float32Array {
  const plans = planChunks(signal.length, SETTINGS);
  const stitcher = new ChunkStitcher(SETTINGS.fade);
  const parts = plans.map((plan, k) => stitcher.push(plan, plans[k + 1], signal.slice(plan.from, plan.to)));
  return Float32Array.from(parts.flatMap((part) => [...part]));
}

describe("planChunks", () => {
  it("cuts a short first piece, then longer ones, with context on both sides", () => {
    const plans = planChunks(6000, SETTINGS);
    expect(plans.map(({ start, end }) => [start, end])).toEqual([
      [0, 990],
      [990, 3490],
      [3490, 6000],
    ]);
    expect(plans.map(({ from, to }) => [from, to])).toEqual([
      [0, 1300],
      [700, 3800],
      [3200, 6000],
    ]);
  });

  it("joins a short remainder to the last piece, and leaves a short sentence whole", () => {
    expect(planChunks(4200, SETTINGS).map(({ start, end }) => [start, end])).toEqual([
      [0, 990],
      [990, 4200],
    ]);
    expect(planChunks(800, SETTINGS)).toEqual([{ from: 0, to: 800, start: 0, end: 800 }]);
  });
});

describe("ChunkStitcher", () => {
  it("gives back every sample once, in order, the seams cross-faded", () => {
    for (const length of [800, 4200, 6000, 12_345]) {
      const signal = Float32Array.from({ length }, (_, i) => Math.sin(i / 7));
      const back = roundTrip(signal);
      expect(back.length).toBe(length);
      // Identical pieces cross-fade into themselves.
      for (let i = 0; i < length; i++) expect(back[i]).toBeCloseTo(signal[i]!, 5);
    }
  });
});
