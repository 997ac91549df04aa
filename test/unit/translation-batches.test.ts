import { describe, expect, it } from "vitest";
import { EngineBusyError } from "../../src/core/busy.js";
import { SentenceBatcher, type Batch } from "../../src/engines/transformers-js/batches.js";

/** A runner whose batches finish when the test says, recording each batch and its signal. */
function controlledRunner() {
  const batches: { batch: Batch; signal: AbortSignal; finish: () => void; fail: (e: Error) => void }[] = [];
  const run = (batch: Batch, signal: AbortSignal) =>
    new Promise<readonly string[]>((resolve, reject) => {
      batches.push({
        batch,
        signal,
        finish: () => resolve(batch.texts.map((text) => `<${batch.to}>${text}`)),
        fail: reject,
      });
    });
  return { batches, run };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe("the sentence batcher", () => {
  it("batches what waits for the same model and direction, finals first, oldest final leading", async () => {
    const { batches, run } = controlledRunner();
    const batcher = new SentenceBatcher(run, { maxBatch: 3, maxQueued: 10 });
    const first = batcher.translate("en-es", "en", "es", "one");
    await tick();
    // While the first batch runs, more arrive: an interim, two finals, one for another model.
    const interim = batcher.translate("en-es", "en", "es", "two", { interim: true });
    const other = batcher.translate("en-de", "en", "de", "three");
    const final = batcher.translate("en-es", "en", "es", "four");
    const final2 = batcher.translate("en-es", "en", "es", "five");
    batches[0]!.finish();
    expect(await first).toBe("<es>one");
    await tick();
    // The oldest final is "three" (en-de); it goes alone.
    expect(batches[1]!.batch).toMatchObject({ model: "en-de", texts: ["three"] });
    batches[1]!.finish();
    expect(await other).toBe("<de>three");
    await tick();
    expect(batches[2]!.batch.texts).toEqual(["four", "five", "two"]);
    batches[2]!.finish();
    expect(await Promise.all([final, final2, interim])).toEqual(["<es>four", "<es>five", "<es>two"]);
    expect(batcher.stats()).toMatchObject({ batches: 3, sentences: 5 });
  });

  it("lets accounts take turns: a flood from one waits behind another account's sentence", async () => {
    const { batches, run } = controlledRunner();
    const batcher = new SentenceBatcher(run, { maxBatch: 1, maxQueued: 20 });
    const first = batcher.translate("m", "en", "es", "x0", { account: "x" });
    await tick();
    const flood = ["x1", "x2", "x3"].map((text) =>
      batcher.translate("m", "en", "es", text, { account: "x" }),
    );
    const other = batcher.translate("m", "en", "es", "y0", { account: "y" });
    // One account may fill half of the queue, not more.
    const mine = Array.from({ length: 7 }, (_, i) =>
      batcher.translate("m", "en", "es", `more${i}`, { account: "x" }),
    );
    await expect(batcher.translate("m", "en", "es", "too many", { account: "x" })).rejects.toBeInstanceOf(
      EngineBusyError,
    );
    for (let i = 0; i < 12; i++) {
      batches[i]!.finish();
      await tick();
    }
    await Promise.all([first, ...flood, other, ...mine]);
    // x led the first batch; y, served longest ago, leads the next, before x's older sentences.
    expect(batches.slice(0, 3).map((b) => b.batch.texts[0])).toEqual(["x0", "y0", "x1"]);
  });

  it("refuses interims from half the bound and finals at the bound, per model", async () => {
    const { batches, run } = controlledRunner();
    const batcher = new SentenceBatcher(run, { maxBatch: 8, maxQueued: 4 });
    const running = batcher.translate("m", "en", "es", "running");
    await tick();
    const waiting = [0, 1].map((i) => batcher.translate("m", "en", "es", `final ${i}`));
    await expect(batcher.translate("m", "en", "es", "interim", { interim: true })).rejects.toThrow(
      EngineBusyError,
    );
    waiting.push(...[2, 3].map((i) => batcher.translate("m", "en", "es", `final ${i}`)));
    await expect(batcher.translate("m", "en", "es", "one too many")).rejects.toThrow(
      /4 sentences are waiting/u,
    );
    // Another model has its own bound.
    const elsewhere = batcher.translate("other", "en", "de", "fine");
    expect(batcher.stats().waiting).toEqual({ m: 4, other: 1 });
    batches[0]!.finish();
    await running;
    await tick();
    batches[1]!.finish();
    await tick();
    batches[2]!.finish();
    expect(await Promise.all(waiting)).toHaveLength(4);
    expect(await elsewhere).toBe("<de>fine");
  });

  it("drops a cancelled sentence from the queue, and stops a batch whose every sentence is cancelled", async () => {
    const { batches, run } = controlledRunner();
    const batcher = new SentenceBatcher(run, { maxBatch: 8, maxQueued: 8 });
    const session = new AbortController();
    const inFlight = batcher.translate("m", "en", "es", "in flight", { signal: session.signal });
    await tick();
    const queued = batcher.translate("m", "en", "es", "queued", { signal: session.signal });
    const kept = batcher.translate("m", "en", "es", "kept");
    session.abort();
    await expect(queued).rejects.toThrow();
    await expect(inFlight).rejects.toThrow();
    expect(batches[0]!.signal.aborted).toBe(true);
    batches[0]!.fail(new Error("stopped"));
    await tick();
    // Only the uncancelled sentence was sent next.
    expect(batches[1]!.batch.texts).toEqual(["kept"]);
    batches[1]!.finish();
    expect(await kept).toBe("<es>kept");
  });

  it("fails a batch's sentences with the runner's error and goes on with the next", async () => {
    const { batches, run } = controlledRunner();
    const batcher = new SentenceBatcher(run, { maxBatch: 8, maxQueued: 8 });
    const failing = batcher.translate("m", "en", "es", "a");
    await tick();
    const next = batcher.translate("m", "en", "es", "b");
    batches[0]!.fail(new Error("host stopped"));
    await expect(failing).rejects.toThrow("host stopped");
    await tick();
    batches[1]!.finish();
    expect(await next).toBe("<es>b");
  });
});
