import type { Redis } from "ioredis";

/**
 * Sessions created by `GET /v1/session` and not yet connected. Each can be claimed once, within
 * the token's lifetime, and they are bounded per account and in total. One process keeps them in
 * memory; a fleet keeps them in its Redis, so any process claims a `ws_url` minted by any other,
 * still exactly once, and the bounds are the fleet's.
 */

export interface PendingSession {
  readonly sessionId: string;
  readonly accountId: string;
  readonly metadata: Readonly<Record<string, string>>;
  readonly expiresAt: number;
}

export interface PendingLimits {
  /** Unclaimed sessions one account may hold at once. */
  readonly perAccount: number;
  /** Unclaimed sessions of all accounts together. */
  readonly total: number;
}

/** Why a session was not added; `retryAfterSec` is when a slot frees up at the latest. */
export interface PendingRefusal {
  readonly reason: "account_limit" | "total_limit";
  readonly retryAfterSec: number;
  /** The bound that was reached. */
  readonly limit: number;
}

export interface PendingSessions {
  /** Adds a session unless a bound is reached. */
  add(session: PendingSession): Promise<PendingRefusal | undefined>;
  /** Removes and returns the session; undefined when it expired or was already claimed. */
  take(sessionId: string): Promise<PendingSession | undefined>;
  /** Whether the session could still be claimed (nothing is claimed). */
  has(sessionId: string): Promise<boolean>;
  count(): Promise<number>;
}

function secondsUntil(expiresAt: number, now: number): number {
  return Math.max(1, Math.ceil((expiresAt - now) / 1000));
}

/**
 * One process's unclaimed sessions. Every session lives exactly the token's lifetime, so the
 * insertion order of the map is also the expiry order: expiring means dropping entries from its
 * front, O(1) per session however many are pending.
 */
export class MemoryPendingSessions implements PendingSessions {
  private readonly pending = new Map<string, PendingSession>();
  /** Per account, its unclaimed session ids in creation (= expiry) order. */
  private readonly byAccount = new Map<string, Set<string>>();

  constructor(private readonly limits: PendingLimits) {}

  async add(session: PendingSession): Promise<PendingRefusal | undefined> {
    const now = Date.now();
    this.expire(now);
    const mine = this.byAccount.get(session.accountId);
    if (mine && mine.size >= this.limits.perAccount) {
      return {
        reason: "account_limit",
        retryAfterSec: this.secondsLeft(mine, now),
        limit: this.limits.perAccount,
      };
    }
    if (this.pending.size >= this.limits.total) {
      return {
        reason: "total_limit",
        retryAfterSec: this.secondsLeft(this.pending.keys(), now),
        limit: this.limits.total,
      };
    }
    this.pending.set(session.sessionId, session);
    if (mine) mine.add(session.sessionId);
    else this.byAccount.set(session.accountId, new Set([session.sessionId]));
    return undefined;
  }

  async take(sessionId: string): Promise<PendingSession | undefined> {
    this.expire(Date.now());
    const session = this.pending.get(sessionId);
    if (session) this.forget(session);
    return session;
  }

  async has(sessionId: string): Promise<boolean> {
    this.expire(Date.now());
    return this.pending.has(sessionId);
  }

  async count(): Promise<number> {
    this.expire(Date.now());
    return this.pending.size;
  }

  private expire(now: number): void {
    for (const session of this.pending.values()) {
      if (session.expiresAt > now) return;
      this.forget(session);
    }
  }

  private forget(session: PendingSession): void {
    this.pending.delete(session.sessionId);
    const mine = this.byAccount.get(session.accountId);
    mine?.delete(session.sessionId);
    if (mine?.size === 0) this.byAccount.delete(session.accountId);
  }

  private secondsLeft(ids: Iterable<string>, now: number): number {
    for (const id of ids) return secondsUntil(this.pending.get(id)?.expiresAt ?? now, now);
    return 1;
  }
}

/**
 * Adds a session atomically: drops expired entries from the account's and the fleet's sorted sets
 * (scored by expiry), checks both bounds, then stores the session with the same expiry. Returns
 * nil when added, or {reason, earliest expiry in the full set}. The caller's clock is used for
 * expiry everywhere, so scores and the keys' own PX expiry agree.
 */
const ADD_SCRIPT = `
local sessionKey, accountKey, allKey = KEYS[1], KEYS[2], KEYS[3]
local now, expiresAt, perAccount, total = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', accountKey, '-inf', now)
redis.call('ZREMRANGEBYSCORE', allKey, '-inf', now)
if redis.call('ZCARD', accountKey) >= perAccount then
  return {'account_limit', redis.call('ZRANGE', accountKey, 0, 0, 'WITHSCORES')[2]}
end
if redis.call('ZCARD', allKey) >= total then
  return {'total_limit', redis.call('ZRANGE', allKey, 0, 0, 'WITHSCORES')[2]}
end
redis.call('SET', sessionKey, ARGV[5], 'PX', expiresAt - now)
redis.call('ZADD', accountKey, expiresAt, ARGV[6])
redis.call('ZADD', allKey, expiresAt, ARGV[6])
redis.call('PEXPIRE', accountKey, expiresAt - now)
redis.call('PEXPIRE', allKey, expiresAt - now, 'GT')
if redis.call('PTTL', allKey) < 0 then redis.call('PEXPIRE', allKey, expiresAt - now) end
return nil
`;

/**
 * Claims a session atomically: the first caller gets it and frees its slots, any later one gets
 * nil. The account's set is named from the stored session (KEYS[2] is its prefix), which a single
 * Redis allows; Redis Cluster is not supported for this reason.
 */
const TAKE_SCRIPT = `
local value = redis.call('GETDEL', KEYS[1])
if not value then return nil end
local session = cjson.decode(value)
redis.call('ZREM', KEYS[2] .. session.accountId, ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
return value
`;

/** The fleet's unclaimed sessions, in its Redis under `<prefix>pending:`. */
export class RedisPendingSessions implements PendingSessions {
  private readonly prefix: string;

  constructor(
    private readonly redis: Redis,
    keyPrefix: string,
    private readonly limits: PendingLimits,
  ) {
    this.prefix = `${keyPrefix}pending:`;
  }

  async add(session: PendingSession): Promise<PendingRefusal | undefined> {
    const now = Date.now();
    const refused = (await this.redis.eval(
      ADD_SCRIPT,
      3,
      this.sessionKey(session.sessionId),
      this.accountKey(session.accountId),
      this.allKey(),
      now,
      session.expiresAt,
      this.limits.perAccount,
      this.limits.total,
      JSON.stringify(session),
      session.sessionId,
    )) as [PendingRefusal["reason"], string] | null;
    if (!refused) return undefined;
    const [reason, earliest] = refused;
    return {
      reason,
      retryAfterSec: secondsUntil(Number(earliest), now),
      limit: reason === "account_limit" ? this.limits.perAccount : this.limits.total,
    };
  }

  async take(sessionId: string): Promise<PendingSession | undefined> {
    const value = (await this.redis.eval(
      TAKE_SCRIPT,
      3,
      this.sessionKey(sessionId),
      this.accountKey(""),
      this.allKey(),
      sessionId,
    )) as string | null;
    if (!value) return undefined;
    const session = JSON.parse(value) as PendingSession;
    // The key's own expiry and the token's may differ by a clock tick; the token decides.
    return session.expiresAt > Date.now() ? session : undefined;
  }

  async has(sessionId: string): Promise<boolean> {
    const expiresAt = await this.redis.zscore(this.allKey(), sessionId);
    return expiresAt !== null && Number(expiresAt) > Date.now();
  }

  async count(): Promise<number> {
    const all = this.allKey();
    await this.redis.zremrangebyscore(all, "-inf", Date.now());
    return this.redis.zcard(all);
  }

  private sessionKey(sessionId: string): string {
    return `${this.prefix}session:${sessionId}`;
  }

  private accountKey(accountId: string): string {
    return `${this.prefix}account:${accountId}`;
  }

  private allKey(): string {
    return `${this.prefix}all`;
  }
}
