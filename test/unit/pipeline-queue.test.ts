import { describe, expect, it } from "vitest";
import { BoundedQueue } from "../../src/core/queue.js";

async function drain<T>(queue: BoundedQueue<T>): Promise<T[]> {
  const items: T[] = [];
  for await (const item of queue) items.push(item);
  return items;
}

describe("BoundedQueue (the links between pipeline stages)", () => {
  it("offer refuses an item past the bound, counted in the link's own units; force always gets in", async () => {
    const queue = new BoundedQueue<string>(5, (item) => (item.startsWith("#") ? 0 : item.length));
    expect(queue.offer("ab")).toBe(true);
    expect(queue.offer("cde")).toBe(true);
    expect(queue.offer("f")).toBe(false); // 2 + 3 + 1 > 5: dropped
    queue.force("#flush"); // control frames are not counted and never refused
    expect(queue.size).toBe(5);
    queue.close();
    expect(queue.offer("g")).toBe(false);
    expect(await drain(queue)).toEqual(["ab", "cde", "#flush"]);
  });

  it("an item counts until the consumer takes it: room comes back only as it does", async () => {
    const queue = new BoundedQueue<number>(2);
    const consumer = queue[Symbol.asyncIterator]();
    const first = consumer.next(); // waiting before anything is queued
    expect(queue.offer(1)).toBe(true);
    expect(queue.offer(2)).toBe(true);
    // The waiting consumer has not run yet: both still count.
    expect(queue.offer(3)).toBe(false);
    expect(await first).toEqual({ value: 1, done: false });
    expect(queue.offer(3)).toBe(true);
  });

  it("put waits for room (backpressure) and keeps the order", async () => {
    const queue = new BoundedQueue<number>(1);
    await queue.put(1);
    let second = false;
    const putting = queue.put(2).then(() => (second = true));
    await Promise.resolve();
    expect(second).toBe(false);
    const consumer = queue[Symbol.asyncIterator]();
    expect(await consumer.next()).toEqual({ value: 1, done: false });
    await putting;
    expect(second).toBe(true);
    expect(await consumer.next()).toEqual({ value: 2, done: false });
  });

  it("close lets a waiting producer go (its item is dropped) and ends iteration after what was queued", async () => {
    const queue = new BoundedQueue<number>(1);
    queue.force(1);
    const putting = queue.put(2);
    queue.close();
    await putting;
    expect(await drain(queue)).toEqual([1]);
  });

  it("remove drops stale items (an interim replaced by a newer one) and makes room", async () => {
    const queue = new BoundedQueue<{ kind: string; segment: number }>(2);
    queue.offer({ kind: "interim", segment: 1 });
    queue.offer({ kind: "final", segment: 1 });
    queue.remove((item) => item.kind === "interim" && item.segment === 1);
    expect(queue.offer({ kind: "interim", segment: 1 })).toBe(true);
    queue.close();
    expect(await drain(queue)).toEqual([
      { kind: "final", segment: 1 },
      { kind: "interim", segment: 1 },
    ]);
  });

  it("clear (a cancel) drops everything queued and wakes producers waiting for room", async () => {
    const queue = new BoundedQueue<number>(1);
    queue.force(1);
    const putting = queue.put(2);
    queue.clear();
    await putting;
    queue.force(3);
    queue.close();
    expect(await drain(queue)).toEqual([2, 3]);
  });

  it("a flood is taken in order while it grows, and remove, length and size stay right across the taken prefix", async () => {
    const queue = new BoundedQueue<number>(Infinity);
    for (let i = 0; i < 5000; i++) queue.offer(i);
    const iterator = queue[Symbol.asyncIterator]();
    const taken: number[] = [];
    for (let i = 0; i < 3000; i++) taken.push((await iterator.next()).value as number);
    expect(taken).toEqual(Array.from({ length: 3000 }, (_, i) => i));
    expect([queue.length, queue.size]).toEqual([2000, 2000]);
    // Odd items of what is left go; the new ones come after the rest.
    queue.remove((item) => item % 2 === 1);
    for (let i = 5000; i < 5003; i++) queue.offer(i);
    expect([queue.length, queue.size]).toEqual([1003, 1003]);
    queue.close();
    const rest: number[] = [];
    for (let next = await iterator.next(); !next.done; next = await iterator.next()) rest.push(next.value);
    expect(rest).toEqual([...Array.from({ length: 1000 }, (_, i) => 3000 + 2 * i), 5000, 5001, 5002]);
    expect([queue.length, queue.size]).toEqual([0, 0]);
  });

  it("is idle only when nothing is queued and the consumer is waiting for more, not while it works on an item", async () => {
    const queue = new BoundedQueue<number>(2);
    const consumer = queue[Symbol.asyncIterator]();
    expect(queue.idle).toBe(true);
    queue.offer(1);
    expect(queue.idle).toBe(false);
    expect(await consumer.next()).toEqual({ value: 1, done: false });
    // Taken and being worked on: the queue is empty but its stage is not done.
    expect(queue.length).toBe(0);
    expect(queue.idle).toBe(false);
    const waiting = consumer.next();
    expect(queue.idle).toBe(true);
    queue.close();
    expect(await waiting).toEqual({ value: undefined, done: true });
  });
});
