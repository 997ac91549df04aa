/** The fair queue in front of shared engines (src/engines/kit/model-host/fair-queue.ts). */
import { describe, expect, it } from "vitest";
import { EngineBusyError } from "../../src/core/busy.js";
import { FairQueue } from "../../src/engines/kit/model-host/fair-queue.js";

/** Work that runs until `finish()` is called, recording when it started. */
function gate(log: string[], name: string) {
  let finish!: () => void;
  const done = new Promise<void>((resolve) => (finish = resolve));
  return { work: async () => (log.push(name), await done, name), finish: () => finish() };
}
const tick = () => new Promise((resolve) => setImmediate(resolve));

describe("FairQueue", () => {
  it("keeps a slot free of any one account: another account starts at once", async () => {
    const queue = new FairQueue("test", { concurrency: 2, maxQueued: 16, maxQueuedPerAccount: 8 });
    const log: string[] = [];
    const flood = Array.from({ length: 4 }, (_, i) => gate(log, `x${i}`));
    const running = flood.map((g) => queue.run("x", g.work));
    await tick();
    expect(log).toEqual(["x0"]);
    const other = gate(log, "y0");
    const served = queue.run("y", other.work);
    await tick();
    expect(log).toEqual(["x0", "y0"]);
    other.finish();
    expect(await served).toBe("y0");
    await tick();
    expect(log).toEqual(["x0", "y0"]);
    flood.forEach((g) => g.finish());
    expect(await Promise.all(running)).toEqual(["x0", "x1", "x2", "x3"]);
  });

  it("serves accounts in turn, not in arrival order", async () => {
    const queue = new FairQueue("test", {
      concurrency: 1,
      maxRunningPerAccount: 1,
      maxQueued: 16,
      maxQueuedPerAccount: 8,
    });
    const log: string[] = [];
    const gates = new Map<string, ReturnType<typeof gate>>();
    const ask = (account: string, n: number) => {
      const g = gate(log, `${account}${n}`);
      gates.set(`${account}${n}`, g);
      return queue.run(account, g.work);
    };
    const all = [ask("x", 0), ask("x", 1), ask("x", 2), ask("y", 0), ask("z", 0)];
    for (let i = 0; i < 5; i++) {
      await tick();
      gates.get(log.at(-1)!)!.finish();
      await tick();
    }
    await Promise.all(all);
    expect(log).toEqual(["x0", "y0", "z0", "x1", "x2"]);
  });

  it("refuses beyond an account's bound and the total, and drops cancelled waiting work", async () => {
    const queue = new FairQueue("test", { concurrency: 1, maxQueued: 3, maxQueuedPerAccount: 2 });
    const log: string[] = [];
    const first = gate(log, "x0");
    const running = queue.run("x", first.work);
    const controller = new AbortController();
    const waiting = [
      queue.run("x", gate(log, "x1").work, controller.signal),
      queue.run("x", gate(log, "x2").work),
    ];
    await expect(queue.run("x", gate(log, "x3").work)).rejects.toBeInstanceOf(EngineBusyError);
    const y = gate(log, "y0");
    const yRun = queue.run("y", y.work);
    await expect(queue.run("z", gate(log, "z0").work)).rejects.toThrow(/busy \(3 waiting\)/u);
    controller.abort(new Error("gone"));
    await expect(waiting[0]).rejects.toThrow("gone");
    expect(queue.stats()).toMatchObject({ running: 1, queued: 2 });
    first.finish();
    await running;
    await tick();
    // y's turn comes before x's remaining work; the cancelled x1 never ran.
    expect(log).toEqual(["x0", "y0"]);
    y.finish();
    await yRun;
    await tick();
    expect(log).toEqual(["x0", "y0", "x2"]);
  });
});
