import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { RealtimeSessions } from "../../src/api/realtime/sessions.js";
import { SessionTokens } from "../../src/auth/session-tokens.js";
import { MemoryAccountSlots, RedisAccountSlots } from "../../src/sessions/account-slots.js";
import {
  MemoryPendingSessions,
  RedisPendingSessions,
  type PendingLimits,
  type PendingSessions,
} from "../../src/sessions/pending.js";
import { REDIS_URL, redisProblem } from "../support/redis.js";

const problem = await redisProblem();
if (problem) console.warn(`Redis-backed unclaimed sessions not tested: ${problem}`);
const redis = problem ? undefined : new Redis(REDIS_URL);
const prefix = `relay-test-${randomUUID()}:`;
afterAll(async () => {
  if (!redis) return;
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
});

// The same behavior from one process's memory and from the fleet's Redis.
const stores: [string, (limits: PendingLimits) => PendingSessions][] = [
  ["in memory", (limits) => new MemoryPendingSessions(limits)],
];
if (redis) {
  let n = 0;
  stores.push(["in Redis", (limits) => new RedisPendingSessions(redis, `${prefix}${n++}:`, limits)]);
}

describe.each(stores)("RealtimeSessions: unclaimed sessions %s", (_name, store) => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["Date"] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  const sessions = () =>
    new RealtimeSessions({
      capacity: 4,
      tokens: new SessionTokens("unit-test-secret-0123456789", 60),
      pending: store({ perAccount: 2, total: 3 }),
      accountSlots: new MemoryAccountSlots(4),
    });

  it("refuses an account beyond its bound until one of its sessions is claimed or expires", async () => {
    const registry = sessions();
    const first = await registry.create("a", {});
    expect((await registry.create("a", {})).ok).toBe(true);
    vi.advanceTimersByTime(20_000);
    const refused = await registry.create("a", {});
    expect(refused).toEqual({ ok: false, reason: "account_limit", retryAfterSec: 40, limit: 2 });
    expect((await registry.create("b", {})).ok).toBe(true);
    expect(await registry.create("c", {})).toMatchObject({ ok: false, reason: "total_limit", limit: 3 });

    // Claiming frees the slot; a claimed session cannot be claimed again.
    const claimed = await registry.claim(first.ok ? first.token : "");
    expect(claimed).toMatchObject({ accountId: "a" });
    expect(await registry.claim(first.ok ? first.token : "")).toBeUndefined();
    expect((await registry.create("a", {})).ok).toBe(true);
  });

  it("expires sessions in creation order and frees every account's share", async () => {
    const registry = sessions();
    const early = await registry.create("a", {});
    vi.advanceTimersByTime(30_000);
    await registry.create("b", {});
    vi.advanceTimersByTime(30_000);
    // The first has expired, the second has not.
    expect(await registry.pendingCount()).toBe(1);
    expect(await registry.isClaimable(early.ok ? early.token : "")).toBe(false);
    vi.advanceTimersByTime(30_000);
    expect(await registry.pendingCount()).toBe(0);
    for (const account of ["a", "a", "b"]) expect((await registry.create(account, {})).ok).toBe(true);
  });

  it("checks a token without claiming it", async () => {
    const registry = sessions();
    const created = await registry.create("a", { targetLanguage: "es" });
    const token = created.ok ? created.token : "";
    expect(await registry.isClaimable(token)).toBe(true);
    expect(await registry.isClaimable(token)).toBe(true);
    expect(await registry.claim(token)).toMatchObject({ accountId: "a", metadata: { targetLanguage: "es" } });
    expect(await registry.isClaimable(token)).toBe(false);
    expect(await registry.isClaimable("forged")).toBe(false);
  });

  it("lets exactly one of many simultaneous claims of a session win", async () => {
    const registry = sessions();
    const created = await registry.create("a", {});
    const token = created.ok ? created.token : "";
    const claims = await Promise.all(Array.from({ length: 8 }, () => registry.claim(token)));
    expect(claims.filter(Boolean)).toHaveLength(1);
  });

  it("refuses new sessions when the fleet has no room, whatever the bounds", async () => {
    let room = false;
    const registry = new RealtimeSessions({
      capacity: 4,
      tokens: new SessionTokens("unit-test-secret-0123456789", 60),
      pending: store({ perAccount: 2, total: 3 }),
      accountSlots: new MemoryAccountSlots(4),
      fleetHasRoom: () => room,
    });
    expect(await registry.create("a", {})).toMatchObject({ ok: false, reason: "capacity" });
    room = true;
    expect((await registry.create("a", {})).ok).toBe(true);
  });
});

describe.skipIf(!redis)("RedisAccountSlots: the fleet's bound on an account's live sessions", () => {
  let n = 0;
  /** Two members of one fleet (their own connections), leases of `leaseMs`. */
  function fleetOfTwo(leaseMs: number) {
    const keyPrefix = `${prefix}slots-${n++}:`;
    const other = new Redis(REDIS_URL);
    const slots = (connection: Redis, member: string) =>
      new RedisAccountSlots(connection, keyPrefix, 2, member, leaseMs);
    return {
      key: (accountId: string) => `${keyPrefix}live:${accountId}`,
      first: slots(other, "first@1"),
      second: slots(redis!, "second@1"),
      async close() {
        await this.first.close().catch(() => undefined);
        await this.second.close();
        other.disconnect();
      },
    };
  }
  /** A heartbeat at `seenAt` that found the members `live` (gone: not seen for 10). */
  const beat = (seenAt: number, ...live: string[]) => ({ seenAt, live, staleBefore: seenAt - 10 });

  it("is shared between processes; a heartbeat renews a process's leases", async () => {
    const fleet = fleetOfTwo(60_000);
    try {
      expect(await fleet.first.acquire("a", "s1")).toBe(true);
      expect(await fleet.second.acquire("a", "s2")).toBe(true);
      expect(await fleet.second.acquire("a", "s3")).toBe(false);
      expect(await fleet.second.acquire("b", "s4")).toBe(true);
      const firstTerm = Number(await redis!.zscore(fleet.key("a"), "s1"));
      await expect
        .poll(async () => {
          await fleet.first.heartbeat(beat(Date.now(), "first@1", "second@1"));
          return Number(await redis!.zscore(fleet.key("a"), "s1"));
        })
        .toBeGreaterThan(firstTerm);
      // A released slot is free at once.
      await fleet.second.release("a", "s2");
      expect(await fleet.second.acquire("a", "s3")).toBe(true);
    } finally {
      await fleet.close();
    }
  });

  it("frees the slots of a process as soon as a heartbeat finds it gone from the fleet, long before its lease", async () => {
    const fleet = fleetOfTwo(10 * 60_000);
    try {
      await fleet.first.heartbeat(beat(100, "first@1", "second@1"));
      expect(await fleet.first.acquire("a", "s1")).toBe(true);
      expect(await fleet.first.acquire("b", "s2")).toBe(true);
      expect(await fleet.second.acquire("a", "s3")).toBe(true);
      expect(await fleet.second.acquire("a", "s4")).toBe(false);
      // Still counted by the fleet: nothing is dropped.
      expect(await fleet.second.heartbeat(beat(105, "first@1", "second@1"))).toEqual([]);
      // Not seen for 10: gone.
      expect(await fleet.second.heartbeat(beat(111, "second@1"))).toEqual([{ member: "first@1", slots: 2 }]);
      expect([await fleet.second.count("a"), await fleet.second.count("b")]).toEqual([1, 0]);
      expect(await fleet.second.acquire("a", "s4")).toBe(true);
      // Another survivor's heartbeat finds nothing left to drop.
      expect(await fleet.second.heartbeat(beat(113, "second@1"))).toEqual([]);
    } finally {
      await fleet.close();
    }
  });

  it("keeps the slots of a process that was merely slow: renewed after a fresher heartbeat, given back after a drop", async () => {
    const fleet = fleetOfTwo(10 * 60_000);
    try {
      await fleet.first.heartbeat(beat(100, "first@1", "second@1"));
      expect(await fleet.first.acquire("a", "s1")).toBe(true);
      // The other read the database before the slow process beat again (at 115): its slots stay.
      await fleet.first.heartbeat(beat(115, "first@1", "second@1"));
      expect(await fleet.second.heartbeat(beat(111, "second@1"))).toEqual([]);
      expect(await fleet.second.count("a")).toBe(1);
      // Dropped while it was taken for gone, its live session counts again at its next heartbeat.
      expect(await fleet.second.heartbeat(beat(126, "second@1"))).toEqual([{ member: "first@1", slots: 1 }]);
      expect(await fleet.second.count("a")).toBe(0);
      await fleet.first.heartbeat(beat(127, "first@1", "second@1"));
      expect(await fleet.second.count("a")).toBe(1);
      // A slot released meanwhile is not given back.
      await fleet.first.release("a", "s1");
      await fleet.first.heartbeat(beat(129, "first@1", "second@1"));
      expect(await fleet.second.count("a")).toBe(0);
    } finally {
      await fleet.close();
    }
  });

  it("still frees, at the end of its lease, a slot no heartbeat covers", async () => {
    const fleet = fleetOfTwo(400);
    try {
      expect(await fleet.first.acquire("a", "s1")).toBe(true);
      expect(await fleet.second.acquire("a", "s2")).toBe(true);
      // Its process alive but silent (no heartbeat reached the database): the lease ends.
      await expect.poll(() => fleet.second.acquire("a", "s3")).toBe(true);
    } finally {
      await fleet.close();
    }
  });
});
