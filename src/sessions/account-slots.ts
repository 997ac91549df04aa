import type { Redis } from "ioredis";

/**
 * The bound on live sessions per account: open session sockets and rooms together, so one key
 * cannot take every slot of the process (or of the fleet) from the other accounts. One process
 * counts in memory; a fleet counts in its Redis, so the bound is the fleet's.
 */
export interface AccountSlots {
  /** Sessions one account may hold at once. */
  readonly limit: number;
  /** Holds one of the account's slots for `holderId` (unique fleet-wide); false when it holds `limit`. */
  acquire(accountId: string, holderId: string): Promise<boolean>;
  /** Frees the slot of `holderId` (nothing when it holds none). */
  release(accountId: string, holderId: string): Promise<void>;
  /** The slots the account holds now. */
  count(accountId: string): Promise<number>;
  /** Stops refreshing (shutdown); the slots still held are released. */
  close(): Promise<void>;
}

export class MemoryAccountSlots implements AccountSlots {
  private readonly held = new Map<string, Set<string>>();

  constructor(readonly limit: number) {}

  async acquire(accountId: string, holderId: string): Promise<boolean> {
    const mine = this.held.get(accountId) ?? new Set<string>();
    if (mine.size >= this.limit) return false;
    mine.add(holderId);
    this.held.set(accountId, mine);
    return true;
  }

  async release(accountId: string, holderId: string): Promise<void> {
    const mine = this.held.get(accountId);
    mine?.delete(holderId);
    if (mine?.size === 0) this.held.delete(accountId);
  }

  async count(accountId: string): Promise<number> {
    return this.held.get(accountId)?.size ?? 0;
  }

  async close(): Promise<void> {
    this.held.clear();
  }
}

/**
 * Takes a slot atomically: drops the account's entries whose lease ran out (their process died),
 * then adds the holder with its lease unless the account is at its bound. 1 when taken, else 0.
 */
const ACQUIRE_SCRIPT = `
local key, now, expiresAt, limit = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
if redis.call('ZCARD', key) >= limit then return 0 end
redis.call('ZADD', key, expiresAt, ARGV[4])
redis.call('PEXPIRE', key, expiresAt - now, 'GT')
if redis.call('PTTL', key) < 0 then redis.call('PEXPIRE', key, expiresAt - now) end
return 1
`;

/**
 * The fleet's count, in Redis under `<prefix>live:<accountId>`: a sorted set of holders scored by
 * when their lease ends. The process holding them renews the leases every `renewMs`; a process
 * that dies stops renewing, and its slots are free again once their lease (`leaseMs`) ends.
 */
export class RedisAccountSlots implements AccountSlots {
  private readonly prefix: string;
  /** This process's holders, per holder its account: the leases the heartbeat renews. */
  private readonly mine = new Map<string, string>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly redis: Redis,
    keyPrefix: string,
    readonly limit: number,
    private readonly lease: { readonly leaseMs: number; readonly renewMs: number } = {
      leaseMs: 30_000,
      renewMs: 10_000,
    },
    private readonly onError: (error: unknown) => void = () => undefined,
  ) {
    this.prefix = `${keyPrefix}live:`;
    this.timer = setInterval(() => void this.renew().catch(this.onError), lease.renewMs).unref();
  }

  async acquire(accountId: string, holderId: string): Promise<boolean> {
    const now = Date.now();
    const taken = await this.redis.eval(
      ACQUIRE_SCRIPT,
      1,
      this.key(accountId),
      now,
      now + this.lease.leaseMs,
      this.limit,
      holderId,
    );
    if (taken === 1) this.mine.set(holderId, accountId);
    return taken === 1;
  }

  async release(accountId: string, holderId: string): Promise<void> {
    this.mine.delete(holderId);
    await this.redis.zrem(this.key(accountId), holderId);
  }

  async count(accountId: string): Promise<number> {
    const key = this.key(accountId);
    await this.redis.zremrangebyscore(key, "-inf", Date.now());
    return this.redis.zcard(key);
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    const held = [...this.mine];
    this.mine.clear();
    await Promise.all(held.map(([holderId, accountId]) => this.redis.zrem(this.key(accountId), holderId)));
  }

  /** Renews the lease of every slot this process holds (XX: a released one is not added back). */
  private async renew(): Promise<void> {
    if (this.mine.size === 0) return;
    const expiresAt = Date.now() + this.lease.leaseMs;
    const pipeline = this.redis.pipeline();
    for (const [holderId, accountId] of this.mine) {
      pipeline.zadd(this.key(accountId), "XX", expiresAt, holderId);
      pipeline.pexpire(this.key(accountId), this.lease.leaseMs, "GT");
    }
    await pipeline.exec();
  }

  private key(accountId: string): string {
    return `${this.prefix}${accountId}`;
  }
}
