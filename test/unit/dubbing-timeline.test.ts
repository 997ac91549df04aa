import { describe, expect, it } from "vitest";
import {
  DEFAULT_DUCK_OPTIONS,
  DEFAULT_FIT_OPTIONS,
  duckingExpression,
  duckingGain,
  fitClip,
  fitTimeline,
  mergeSpans,
  type SlotInput,
} from "../../src/dubbing/stages/timeline.js";

const { maxNaturalTempo, maxTempo, minTempo } = DEFAULT_FIT_OPTIONS;
const EPS = 1e-9;

/** Deterministic PRNG (mulberry32) so a failing layout can be reproduced from its seed. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Random segments (some adjacent, some with long pauses) and clips from much shorter to much longer. */
function randomLayout(rand: () => number): { inputs: SlotInput[]; duration: number } {
  const inputs: SlotInput[] = [];
  let t = rand() * 2;
  const count = 1 + Math.floor(rand() * 12);
  for (let i = 0; i < count; i++) {
    const length = 0.2 + rand() * 8;
    const clipSec = rand() < 0.05 ? 0 : length * (0.3 + rand() * 2.5);
    inputs.push({ startSec: t, endSec: t + length, clipSec });
    const pause = rand() < 0.3 ? 0 : rand() * 3;
    t += length + pause;
  }
  return { inputs, duration: t + rand() * 2 };
}

describe("fitClip", () => {
  const segment = { startSec: 10, endSec: 12 };

  it("plays a clip that fits at natural speed, slowing it by at most 0.9×", () => {
    expect(fitClip({ ...segment, clipSec: 1.99 }, 15)).toMatchObject({ tempo: 1, durationSec: 1.99 });
    const slowed = fitClip({ ...segment, clipSec: 1.9 }, 15);
    expect(slowed.tempo).toBeCloseTo(0.95, 9);
    expect(slowed.durationSec).toBeCloseTo(2, 9);
    const short = fitClip({ ...segment, clipSec: 1 }, 15);
    expect(short).toMatchObject({ tempo: minTempo, strategy: "natural", trimmed: false });
    expect(short.durationSec).toBeCloseTo(1 / 0.9, 9); // ends early rather than being dragged out
  });

  it("compresses up to 1.3× to stay within the segment", () => {
    const placement = fitClip({ ...segment, clipSec: 2.5 }, 15);
    expect(placement).toMatchObject({ strategy: "compressed", tempo: 1.25, durationSec: 2 });
  });

  it("runs into the following silence at 1.3× when compression alone is not enough", () => {
    const placement = fitClip({ ...segment, clipSec: 3.9 }, 15);
    expect(placement.strategy).toBe("overflow");
    expect(placement.tempo).toBe(maxNaturalTempo);
    expect(placement.durationSec).toBeCloseTo(3, 9);
  });

  it("compresses further (≤ 1.6×) when the clip would reach the next segment", () => {
    const placement = fitClip({ ...segment, clipSec: 4.5 }, 13);
    expect(placement.strategy).toBe("overflow-compressed");
    expect(placement.tempo).toBeCloseTo(1.5, 9);
    expect(placement.durationSec).toBe(3);
  });

  it("trims with a fade only as a last resort", () => {
    const placement = fitClip({ ...segment, clipSec: 6 }, 13);
    expect(placement).toMatchObject({ strategy: "trimmed", tempo: maxTempo, durationSec: 3, trimmed: true });
    expect(placement.fadeOutSec).toBeGreaterThan(0);
  });

  it("handles degenerate segments and empty clips", () => {
    expect(fitClip({ startSec: 5, endSec: 5, clipSec: 1 }, 5)).toMatchObject({
      durationSec: 0,
      trimmed: true,
    });
    expect(fitClip({ startSec: 5, endSec: 5, clipSec: 1 }, 7)).toMatchObject({ strategy: "overflow" });
    expect(fitClip({ startSec: 5, endSec: 6, clipSec: 0 }, 7)).toMatchObject({
      durationSec: 0,
      trimmed: false,
    });
  });
});

describe("fitTimeline on random layouts", () => {
  it("never overlaps, respects every bound, uses gaps and trims only as a last resort", () => {
    const counts: Record<string, number> = {};
    for (let seed = 1; seed <= 2000; seed++) {
      const { inputs, duration } = randomLayout(random(seed));
      const placements = fitTimeline(inputs, duration);
      expect(placements).toHaveLength(inputs.length);
      placements.forEach((p, i) => {
        const input = inputs[i]!;
        const next = inputs[i + 1];
        const slotEnd = next ? next.startSec : duration;
        const natural = input.endSec - input.startSec;
        const slot = slotEnd - input.startSec;
        const context = `seed ${seed}, segment ${i}`;
        counts[p.strategy] = (counts[p.strategy] ?? 0) + 1;

        expect(p.startSec, context).toBe(input.startSec);
        expect(p.slotEndSec, context).toBe(slotEnd);
        // No overlap with the next clip (which starts at the next segment) nor past the media's end.
        expect(p.startSec + p.durationSec, context).toBeLessThanOrEqual(slotEnd + EPS);
        expect(p.startSec + p.durationSec, context).toBeLessThanOrEqual(duration + EPS);
        expect(p.tempo, context).toBeGreaterThanOrEqual(minTempo - EPS);
        expect(p.tempo, context).toBeLessThanOrEqual(maxTempo + EPS);

        if (input.clipSec === 0) return;
        if (input.clipSec <= natural) {
          // Fits: never sped up, never beyond its own segment.
          expect(p.tempo, context).toBeLessThanOrEqual(1);
          expect(p.durationSec, context).toBeLessThanOrEqual(natural + EPS);
        }
        // Beyond the natural bound only when even 1.3× would not fit before the next segment.
        if (p.tempo > maxNaturalTempo + EPS) {
          expect(input.clipSec / maxNaturalTempo, context).toBeGreaterThan(slot);
        }
        // The following silence is used only when 1.3× inside the segment is not enough ...
        if (p.durationSec > natural + EPS) {
          expect(input.clipSec / maxNaturalTempo, context).toBeGreaterThan(natural);
        }
        // ... and it is used whenever it makes the clip fit at 1.3×.
        if (input.clipSec / maxNaturalTempo > natural && input.clipSec / maxNaturalTempo <= slot) {
          expect(p.tempo, context).toBe(maxNaturalTempo);
          expect(p.durationSec, context).toBeCloseTo(input.clipSec / maxNaturalTempo, 9);
        }
        // Trimmed exactly when 1.6× cannot make it fit; otherwise every sample of the clip plays.
        expect(p.trimmed, context).toBe(input.clipSec / maxTempo > slot);
        if (!p.trimmed) expect(p.durationSec * p.tempo, context).toBeCloseTo(input.clipSec, 6);
      });
    }
    // The random layouts exercised every strategy.
    for (const strategy of ["natural", "compressed", "overflow", "overflow-compressed", "trimmed"]) {
      expect(counts[strategy] ?? 0, strategy).toBeGreaterThan(20);
    }
  });

  it("rejects segments out of time order", () => {
    expect(() =>
      fitTimeline(
        [
          { startSec: 5, endSec: 6, clipSec: 1 },
          { startSec: 1, endSec: 2, clipSec: 1 },
        ],
        10,
      ),
    ).toThrow(/time order/);
  });
});

describe("ducking", () => {
  it("merges spans closer than the minimum gap", () => {
    expect(
      mergeSpans(
        [
          { startSec: 5, endSec: 6 },
          { startSec: 1, endSec: 2 },
          { startSec: 2.1, endSec: 3 },
          { startSec: 4, endSec: 4 },
        ],
        0.16,
      ),
    ).toEqual([
      { startSec: 1, endSec: 3 },
      { startSec: 5, endSec: 6 },
    ]);
  });

  it("is -15 dB under a span, unity away from spans, with 80 ms ramps outside the span", () => {
    const spans = [{ startSec: 2, endSec: 4 }];
    const duck = 10 ** (-15 / 20);
    expect(duckingGain(spans, 3)).toBeCloseTo(duck, 9);
    expect(duckingGain(spans, 2)).toBeCloseTo(duck, 9);
    expect(duckingGain(spans, 4)).toBeCloseTo(duck, 9);
    expect(duckingGain(spans, 1.9)).toBe(1);
    expect(duckingGain(spans, 4.1)).toBe(1);
    expect(duckingGain(spans, 1.96)).toBeCloseTo(1 - (1 - duck) / 2, 9);
    expect(duckingGain(spans, 4.04)).toBeCloseTo(1 - (1 - duck) / 2, 9);
  });

  it("builds an ffmpeg expression that evaluates like duckingGain", () => {
    const spans = [
      { startSec: 0.05, endSec: 1.5 },
      { startSec: 3, endSec: 4.25 },
    ];
    const { expression } = duckingExpression(spans);
    // Evaluate the generated expression with the few ffmpeg functions it uses.
    const js = expression.replace(/clip\(/g, "clamp(");
    const evaluate = new Function("t", "min", "clamp", `return ${js};`) as (
      t: number,
      min: (...v: number[]) => number,
      clamp: (x: number, a: number, b: number) => number,
    ) => number;
    const clamp = (x: number, a: number, b: number): number => Math.min(b, Math.max(a, x));
    for (let t = 0; t <= 5; t += 0.01) {
      expect(evaluate(t, Math.min, clamp)).toBeCloseTo(duckingGain(spans, t, DEFAULT_DUCK_OPTIONS), 6);
    }
    expect(expression).not.toContain("--");
  });

  it("is 1 without spans and stays under the length limit by ducking through short pauses", () => {
    expect(duckingExpression([]).expression).toBe("1");
    const many = Array.from({ length: 5000 }, (_, i) => ({ startSec: i * 0.7, endSec: i * 0.7 + 0.4 }));
    const { expression, spans } = duckingExpression(many, DEFAULT_DUCK_OPTIONS, 100_000);
    expect(expression.length).toBeLessThanOrEqual(100_000);
    expect(spans.length).toBeLessThan(many.length);
    expect(spans[0]!.startSec).toBe(0);
    expect(spans.at(-1)!.endSec).toBeCloseTo(4999 * 0.7 + 0.4, 9);
  });
});
