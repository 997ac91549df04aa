import { describe, expect, it } from "vitest";
import { mapLimit } from "../../src/dubbing/stages/concurrency.js";

const tick = (ms = 1): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe("mapLimit", () => {
  it("keeps at most `limit` calls in flight, starts them in input order and returns results in input order", async () => {
    let inFlight = 0;
    let maxInFlight = 0;
    const started: number[] = [];
    const results = await mapLimit([5, 1, 4, 2, 3], 2, async (ms, index) => {
      started.push(index);
      maxInFlight = Math.max(maxInFlight, ++inFlight);
      await tick(ms);
      inFlight--;
      return ms * 10;
    });
    expect(results).toEqual([50, 10, 40, 20, 30]);
    expect(started).toEqual([0, 1, 2, 3, 4]);
    expect(maxInFlight).toBe(2);
  });

  it("returns an empty array for no items without calling anything", async () => {
    const signal = AbortSignal.abort();
    await expect(mapLimit([], 3, () => Promise.reject(new Error("called")), signal)).resolves.toEqual([]);
  });

  it("starts nothing after the first failure and fails only once the calls already running have settled", async () => {
    const started: number[] = [];
    let slowFinished = false;
    const run = mapLimit([0, 1, 2, 3, 4], 2, async (_, index) => {
      started.push(index);
      if (index === 0) {
        await tick(20);
        slowFinished = true;
        return index;
      }
      await tick();
      throw new Error(`failed ${index}`);
    });
    await expect(run).rejects.toThrow("failed 1");
    expect(slowFinished).toBe(true);
    expect(started).toEqual([0, 1]);
  });

  it("checks the signal before each call: an abort stops further calls with the signal's reason", async () => {
    const controller = new AbortController();
    const started: number[] = [];
    const run = mapLimit(
      [0, 1, 2, 3],
      1,
      async (_, index) => {
        started.push(index);
        if (index === 1) controller.abort(new Error("stop"));
        await tick();
        return index;
      },
      controller.signal,
    );
    await expect(run).rejects.toThrow("stop");
    expect(started).toEqual([0, 1]);
  });

  it("treats a fractional limit as its integer part, as before", async () => {
    let inFlight = 0;
    let maxInFlight = 0;
    await mapLimit([1, 1, 1, 1], 2.5, async () => {
      maxInFlight = Math.max(maxInFlight, ++inFlight);
      await tick();
      inFlight--;
    });
    expect(maxInFlight).toBe(2);
  });
});
