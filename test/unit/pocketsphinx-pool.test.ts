import { describe, expect, it } from "vitest";
import { ResourcePool } from "../../src/engines/pocketsphinx/pool.js";

interface Resource {
  readonly id: number;
  /** What the test adapted it to (a decoder's added words). */
  key?: string;
}

/** A pool of plain objects whose creations complete when the test says so. */
function harness(max: number) {
  const created: Resource[] = [];
  const destroyed: number[] = [];
  const pendingCreations: { resolve: () => void; reject: (error: Error) => void }[] = [];
  let manual = false;
  const pool = new ResourcePool<Resource>({
    name: "test pool",
    max,
    create: () => {
      const resource = { id: created.length + 1 };
      created.push(resource);
      if (!manual) return Promise.resolve(resource);
      return new Promise<Resource>((resolve, reject) =>
        pendingCreations.push({ resolve: () => resolve(resource), reject }),
      );
    },
    destroy: (resource) => destroyed.push(resource.id),
    keyOf: (resource) => resource.key ?? "",
  });
  return {
    pool,
    created,
    destroyed,
    pendingCreations,
    manual: () => {
      manual = true;
    },
  };
}

const settledState = async (promise: Promise<unknown>): Promise<"pending" | "resolved" | "rejected"> => {
  let state: "pending" | "resolved" | "rejected" = "pending";
  promise.then(
    () => (state = "resolved"),
    () => (state = "rejected"),
  );
  for (let i = 0; i < 10; i++) await Promise.resolve();
  return state;
};

describe("PocketSphinx resource pool", () => {
  it("creates lazily, reuses released resources and never exceeds its bound", async () => {
    const { pool, created } = harness(2);
    expect(pool.stats()).toMatchObject({ total: 0 });
    const a = await pool.acquire();
    pool.release(a);
    const again = await pool.acquire();
    expect(again).toBe(a);
    expect(created).toHaveLength(1);
    const b = await pool.acquire();
    expect(created).toHaveLength(2);
    const waiting = pool.acquire();
    expect(await settledState(waiting)).toBe("pending");
    expect(pool.stats()).toEqual({ total: 2, idle: 0, leased: 2, creating: 0, waiting: 1, max: 2 });
    pool.release(b);
    expect(await waiting).toBe(b);
    expect(created).toHaveLength(2);
  });

  it("serves waiters first in, first out", async () => {
    const { pool } = harness(1);
    const first = await pool.acquire();
    const order: string[] = [];
    const second = pool.acquire().then((r) => (order.push("second"), r));
    const third = pool.acquire().then((r) => (order.push("third"), r));
    pool.release(first);
    pool.release(await second);
    await third;
    expect(order).toEqual(["second", "third"]);
  });

  it("creates one resource at a time", async () => {
    const h = harness(2);
    h.manual();
    const a = h.pool.acquire();
    const b = h.pool.acquire();
    await settledState(a);
    expect(h.pendingCreations).toHaveLength(1);
    expect(h.pool.stats()).toMatchObject({ creating: 2, total: 2 });
    h.pendingCreations[0]!.resolve();
    await a;
    await settledState(b);
    expect(h.pendingCreations).toHaveLength(2);
    h.pendingCreations[1]!.resolve();
    expect((await b).id).toBe(2);
  });

  it("replaces a discarded resource for the next waiter", async () => {
    const { pool, destroyed } = harness(1);
    const a = await pool.acquire();
    const waiting = pool.acquire();
    pool.discard(a);
    expect(destroyed).toEqual([1]);
    expect((await waiting).id).toBe(2);
  });

  it("hands a failed creation's slot to the next waiter", async () => {
    const h = harness(1);
    h.manual();
    const failing = h.pool.acquire();
    const waiting = h.pool.acquire();
    await settledState(failing);
    h.pendingCreations[0]!.reject(new Error("bad model"));
    await expect(failing).rejects.toThrow("bad model");
    await settledState(waiting);
    h.pendingCreations[1]!.resolve();
    expect((await waiting).id).toBe(2);
  });

  it("close() rejects waiters, waits for leased resources and destroys everything", async () => {
    const { pool, destroyed } = harness(2);
    const a = await pool.acquire();
    const b = await pool.acquire();
    pool.release(b);
    const c = await pool.acquire();
    const waiting = pool.acquire();
    const closing = pool.close();
    await expect(waiting).rejects.toThrow(/closed/);
    expect(await settledState(closing)).toBe("pending");
    pool.release(a);
    expect(await settledState(closing)).toBe("pending");
    pool.release(c);
    await closing;
    expect(destroyed.sort()).toEqual([1, 2]);
    await expect(pool.acquire()).rejects.toThrow(/closed/);
    expect(pool.stats().total).toBe(0);
  });

  it("rejects a bound that is not a positive integer", () => {
    expect(() => harness(0)).toThrow(/positive integer/);
    expect(() => harness(1.5)).toThrow(/positive integer/);
  });

  it("keeps resources per key: a caller gets its key's or a fresh one, never another key's", async () => {
    const { pool, created, destroyed } = harness(2);
    const a = await pool.acquire("names");
    a.key = "names";
    pool.release(a);
    const b = await pool.acquire();
    expect(b).not.toBe(a);
    pool.release(b);
    // The same key finds its resource again; an empty key the fresh one.
    expect(await pool.acquire("names")).toBe(a);
    pool.release(a);
    expect(await pool.acquire()).toBe(b);
    pool.release(b);
    // With every slot taken by other keys, the least recently used idle one is replaced.
    const c = await pool.acquire("other");
    expect(c).toBe(b);
    c.key = "other";
    pool.release(c);
    const d = await pool.acquire("third");
    expect(destroyed).toEqual([a.id]);
    expect(d.key).toBeUndefined();
    expect(created).toHaveLength(3);
    // A waiter for a key does not get a released resource of another key: a fresh one replaces it.
    expect(await pool.acquire("other")).toBe(c);
    d.key = "third";
    const waiting = pool.acquire("names");
    expect(await settledState(waiting)).toBe("pending");
    pool.release(d);
    const fresh = await waiting;
    expect(fresh).not.toBe(d);
    expect(fresh.key).toBeUndefined();
    expect(destroyed).toEqual([a.id, d.id]);
    expect(pool.stats()).toMatchObject({ total: 2, leased: 2 });
  });
});
