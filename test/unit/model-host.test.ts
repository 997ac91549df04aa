/**
 * The model host's service side (src/engines/kit/model-host/host.ts) against a real child process
 * (test/support/model-host/test-host-main.ts) that misbehaves as models do: deadlines, a stopped or
 * crashing process, restarts that back off, cancellation that waits for the host, the memory
 * ceiling, streams pinned to their process.
 */
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { afterEach, describe, expect, it } from "vitest";
import { EngineUnavailableError } from "../../src/core/busy.js";
import { ModelHost, ModelHostError, type HostEvent } from "../../src/engines/kit/model-host/host.js";
import type { TestHostMethods } from "../support/model-host/test-host-main.js";
import { alive } from "../support/processes.js";
import { until } from "../support/wait.js";

const MAIN = new URL("../support/model-host/test-host-main.js", import.meta.url);
type TestHost = ModelHost<TestHostMethods>;
const hosts: TestHost[] = [];
const events: HostEvent[] = [];
const listen = (event: unknown) => events.push(event as HostEvent);
subscribe("relay:model-host", listen);

function host(options: ConstructorParameters<typeof ModelHost>[2] = {}): TestHost {
  const created = new ModelHost<TestHostMethods>("test host", MAIN, options);
  hosts.push(created);
  return created;
}

const pidOf = (h: TestHost) => h.request("pid", null);

afterEach(async () => {
  await Promise.all(hosts.splice(0).map((h) => h.close()));
  events.length = 0;
});

describe("model host", () => {
  it("fails a request past its deadline, and leaves a process that still answers running", async () => {
    const h = host({ timeoutMs: 300 });
    const pid = await pidOf(h);
    const hanging = h.request("hang", null);
    // The process answers other requests meanwhile: it is busy, not stuck.
    const echoes = Promise.all([1, 2, 3].map((n) => h.request("echo", n)));
    await expect(hanging).rejects.toBeInstanceOf(EngineUnavailableError);
    await expect(hanging).rejects.toThrow(/did not answer hang within 0.3 s/);
    expect(await echoes).toEqual([1, 2, 3]);
    expect(alive(pid)).toBe(true);
    expect(h.status()).toMatchObject({ state: "up", failures: 0 });
  });

  it("kills a stopped process at the deadline, backs off, then serves from a new one", async () => {
    const h = host({ timeoutMs: 300 });
    const pid = await pidOf(h);
    process.kill(pid, "SIGSTOP");
    await expect(h.request("echo", 1)).rejects.toThrow(/did not answer echo within 0.3 s/);
    await until(() => !alive(pid), "the process to end");
    expect(h.status()).toMatchObject({ state: "failing", failures: 1, restarts: { timeout: 1 } });
    expect(events.map((e) => e.event)).toEqual(["timed-out"]);
    expect(events[0]!.message).toMatch(/has said nothing since and is killed/);
    // Within the back-off, work fails at once (the next engine takes it).
    await expect(h.request("echo", 2)).rejects.toThrow(/restarting after 1 failure in a row/);
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(await h.request("echo", 3)).toBe(3);
    expect(await pidOf(h)).not.toBe(pid);
    expect(h.status()).toMatchObject({ state: "up", failures: 0 });
  });

  it("does not start a process storm when every request crashes it: restarts back off", async () => {
    const h = host();
    await pidOf(h);
    let refused = 0;
    const started = Date.now();
    // As fast as a client can ask, for 2 s.
    while (Date.now() - started < 2_000) {
      const error = await h.request("crash", null).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(EngineUnavailableError);
      if (/restarting after/.test((error as Error).message)) refused++;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const { restarts, failures, state } = h.status();
    // Back-off 0.5 s, 1 s, 2 s: timers never fire early, so 2 s hold at most 3 crashes.
    expect(restarts.crash).toBeLessThanOrEqual(3);
    expect(restarts.crash).toBeGreaterThanOrEqual(1);
    expect(failures).toBe(restarts.crash);
    expect(state).toBe("failing");
    expect(refused).toBeGreaterThan(10);
    expect(events.filter((e) => e.event === "crashed")).toHaveLength(restarts.crash);
    expect(events[0]!.message).toMatch(/test host stopped \(exit code 3\).*next start in 0.5 s/);
  });

  it("takes a model that ends the process as it loads for a bad model, not a failing host", async () => {
    const h = host();
    await expect(h.setUp("load", { crash: true })).rejects.toBeInstanceOf(EngineUnavailableError);
    expect(h.status().failures).toBe(0);
    expect(await h.setUp("load", { crash: false })).toBe("loaded");
    expect(await h.request("echo", "after")).toBe("after");
  });

  it("settles a cancelled request only once the host has stopped the work", async () => {
    const h = host();
    const controller = new AbortController();
    let parts = 0;
    const streaming = h.request("stream", null, { signal: controller.signal, onChunk: () => parts++ });
    await until(() => parts >= 3, "three parts");
    const cancelledAt = performance.now();
    controller.abort(new Error("no longer wanted"));
    await expect(streaming).rejects.toThrow("no longer wanted");
    // The host's 100 ms of work after it saw the cancellation were waited for.
    expect(performance.now() - cancelledAt).toBeGreaterThanOrEqual(90);
    // No part reaches the caller after its cancellation.
    const seen = parts;
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(parts).toBe(seen);
  });

  it("a request with parts flowing is not timed out, however long it runs", async () => {
    const h = host({ timeoutMs: 200 });
    const controller = new AbortController();
    let parts = 0;
    const streaming = h.request("stream", null, { signal: controller.signal, onChunk: () => parts++ });
    await until(() => parts >= 30, "thirty parts"); // 600 ms: three deadlines
    controller.abort(new Error("enough"));
    await expect(streaming).rejects.toThrow("enough");
    expect(h.status().failures).toBe(0);
  });

  it("replaces a process past its memory ceiling without failing its work; pinned streams keep it until released", async () => {
    const h = host({ maxRssMiB: 200 });
    const pinned = h.pin();
    const first = await pinned.request("pid", null);
    const waiting = h.request("wait", { ms: 300 });
    // Past the ceiling: the process is replaced for new work...
    expect(await h.request("grow", { mib: 220 })).toBe(first);
    expect(h.status().restarts.memory).toBe(1);
    expect(events.map((e) => e.event)).toContain("recycled");
    const second = await pidOf(h);
    expect(second).not.toBe(first);
    // ...while its own work finishes and its stream goes on there.
    expect(await waiting).toBe("waited");
    expect(await pinned.request("pid", null)).toBe(first);
    expect(alive(first)).toBe(true);
    pinned.release();
    await until(() => !alive(first), "the replaced process to end");
    expect(h.status()).toMatchObject({ state: "up", failures: 0 });
  });

  it("fails a pinned stream's requests once its process has died, with the reason", async () => {
    const h = host();
    const pinned = h.pin();
    const pid = await pinned.request("pid", null);
    process.kill(pid, "SIGKILL");
    await until(() => !alive(pid), "the process to end");
    await expect(pinned.request("echo", 1)).rejects.toBeInstanceOf(EngineUnavailableError);
    pinned.release();
  });

  it("a long load said to be still working outlasts the deadline; the process is not taken for stuck", async () => {
    const h = host({ timeoutMs: 2_500 });
    const pid = await pidOf(h);
    expect(await h.request("slowLoad", { ms: 4_500 })).toBe("loaded");
    expect(await pidOf(h)).toBe(pid);
    expect(h.status()).toMatchObject({ state: "up", failures: 0, restarts: { timeout: 0 } });
  });

  it("a handler's error is the request's, not the host's", async () => {
    const h = host();
    // @ts-expect-error: a method the process does not serve (a host built from other sources)
    await expect(h.request("nonsense", null)).rejects.toBeInstanceOf(ModelHostError);
    expect(h.status().failures).toBe(0);
  });
});

process.on("exit", () => unsubscribe("relay:model-host", listen));
