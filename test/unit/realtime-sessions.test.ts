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
  it("is shared between processes, and frees the slots of a process that died once their lease ends", async () => {
    const keyPrefix = `${prefix}slots:`;
    const lease = { leaseMs: 400, renewMs: 100 };
    const diesLater = new Redis(REDIS_URL);
    const dying = new RedisAccountSlots(diesLater, keyPrefix, 2, lease);
    const survivor = new RedisAccountSlots(redis!, keyPrefix, 2, lease);
    try {
      expect(await dying.acquire("a", "s1")).toBe(true);
      expect(await survivor.acquire("a", "s2")).toBe(true);
      expect(await survivor.acquire("a", "s3")).toBe(false);
      expect(await survivor.acquire("b", "s4")).toBe(true);

      // A live process renews its leases: past the first term, the slots are still held.
      const key = `${keyPrefix}live:a`;
      const firstTerm = Number(await redis!.zscore(key, "s1"));
      await expect
        .poll(async () => Number(await redis!.zscore(key, "s1")) > firstTerm + lease.leaseMs)
        .toBe(true);
      expect(await survivor.count("a")).toBe(2);

      // A released slot is free at once.
      await survivor.release("a", "s2");
      expect(await survivor.acquire("a", "s3")).toBe(true);

      // A process that dies stops renewing: its slot is free once its lease ends.
      diesLater.disconnect();
      await expect.poll(() => survivor.acquire("a", "s5"), { timeout: 5_000 }).toBe(true);
      expect(await survivor.count("a")).toBe(2);
    } finally {
      await dying.close().catch(() => undefined);
      await survivor.close();
    }
  });
});
