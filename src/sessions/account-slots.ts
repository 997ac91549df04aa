import type { Redis } from "ioredis";
import type { FleetBeat } from "../fleet/membership.js";

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
  /** Shutdown: the slots still held are released. */
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

/** Sets a key's time to live to at least `ms` (GT alone leaves a key without one untouched). */
const EXTEND = `
local function extend(key, ms)
  redis.call('PEXPIRE', key, ms, 'GT')
  if redis.call('PTTL', key) == -1 then redis.call('PEXPIRE', key, ms) end
end
`;

/**
 * Takes a slot atomically: drops the account's entries whose lease ran out, then, unless the
 * account is at its bound, adds the holder with its lease, files it under its fleet member and
 * lists the member (scored by when it was last seen, never lowered). 1 when taken, else 0.
 */
const ACQUIRE_SCRIPT = `${EXTEND}
local slots, held, members = KEYS[1], KEYS[2], KEYS[3]
local now, expiresAt, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local holder, account, member, seenAt = ARGV[4], ARGV[5], ARGV[6], ARGV[7]
redis.call('ZREMRANGEBYSCORE', slots, '-inf', now)
if redis.call('ZCARD', slots) >= limit then return 0 end
redis.call('ZADD', slots, expiresAt, holder)
redis.call('HSET', held, holder, account)
redis.call('ZADD', members, 'GT', seenAt, member)
for _, key in ipairs(KEYS) do extend(key, expiresAt - now) end
return 1
`;

/**
 * A member's heartbeat: its slots in their accounts' sets and under the member again, even where
 * another process dropped them while the member was taken for gone (merely slow): they are live
 * sessions. Its score in the members' set becomes the time it was seen.
 */
const RENEW_SCRIPT = `${EXTEND}
local held, members = KEYS[1], KEYS[2]
local prefix, member, seenAt, expiresAt, leaseMs = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
redis.call('ZADD', members, seenAt, member)
for i = 6, #ARGV, 2 do
  local slots = prefix .. ARGV[i + 1]
  redis.call('ZADD', slots, expiresAt, ARGV[i])
  extend(slots, leaseMs)
  redis.call('HSET', held, ARGV[i], ARGV[i + 1])
end
extend(held, leaseMs)
extend(members, leaseMs)
`;

/**
 * Drops the slots of the members the fleet takes for gone: those not in the live list the caller
 * read from the database and, in Redis, not seen since `staleBefore` either (a member that beat
 * again after that read keeps its slots). Returns member, slots dropped, member, ….
 */
const DROP_GONE_SCRIPT = `
local members, prefix, heldPrefix, staleBefore = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local live = {}
for i = 4, #ARGV do live[ARGV[i]] = true end
local dropped = {}
for _, member in ipairs(redis.call('ZRANGEBYSCORE', members, '-inf', '(' .. staleBefore)) do
  if not live[member] then
    local held = heldPrefix .. member
    local slots = redis.call('HGETALL', held)
    for i = 1, #slots, 2 do redis.call('ZREM', prefix .. slots[i + 1], slots[i]) end
    redis.call('DEL', held)
    redis.call('ZREM', members, member)
    table.insert(dropped, member)
    table.insert(dropped, #slots / 2)
  end
end
return dropped
`;

/** The slots dropped for a member gone from the fleet. */
export interface DroppedSlots {
  readonly member: string;
  readonly slots: number;
}

/**
 * The fleet's count, in Redis under `<prefix>live:<accountId>`: a sorted set of holders scored by
 * when their lease ends. Each holder is also filed under the fleet member that holds it
 * (`<prefix>held:<member>`, holder → account), and `<prefix>slot-holders` lists the members
 * scored by when each was last seen.
 *
 * Membership decides when a process's slots are free: after each heartbeat a process renews its
 * own and drops those of the members the fleet takes for gone (not seen for STALE_MS), so a killed
 * process's sessions stop counting as soon as the others notice (10–12 s), not when a lease ends.
 * A shorter lease would be a second, competing notion of "gone" that a process slow for a moment
 * could meet, and would need renewals more often. The lease (`leaseMs`) remains the backstop for
 * what no heartbeat covers: a release that failed, a fleet that is gone altogether.
 */
export class RedisAccountSlots implements AccountSlots {
  private readonly slotsPrefix: string;
  private readonly heldPrefix: string;
  private readonly membersKey: string;
  /** This process's holders, per holder its account: what each heartbeat renews. */
  private readonly mine = new Map<string, string>();
  /** When this process was last seen by the fleet (the score its member keeps in Redis). */
  private seenAt = 0;
  private following: Promise<DroppedSlots[]> | undefined;

  /** `member`: this process as the fleet names it (`memberId`); `leaseMs` outlasts STALE_MS. */
  constructor(
    private readonly redis: Redis,
    keyPrefix: string,
    readonly limit: number,
    private readonly member: string,
    private readonly leaseMs = 30_000,
  ) {
    this.slotsPrefix = `${keyPrefix}live:`;
    this.heldPrefix = `${keyPrefix}held:`;
    this.membersKey = `${keyPrefix}slot-holders`;
  }

  async acquire(accountId: string, holderId: string): Promise<boolean> {
    const now = Date.now();
    const taken = await this.redis.eval(
      ACQUIRE_SCRIPT,
      3,
      this.key(accountId),
      this.heldKey(),
      this.membersKey,
      now,
      now + this.leaseMs,
      this.limit,
      holderId,
      accountId,
      this.member,
      this.seenAt,
    );
    if (taken === 1) this.mine.set(holderId, accountId);
    return taken === 1;
  }

  async release(accountId: string, holderId: string): Promise<void> {
    this.mine.delete(holderId);
    await this.redis.multi().zrem(this.key(accountId), holderId).hdel(this.heldKey(), holderId).exec();
  }

  async count(accountId: string): Promise<number> {
    const key = this.key(accountId);
    await this.redis.zremrangebyscore(key, "-inf", Date.now());
    return this.redis.zcard(key);
  }

  async close(): Promise<void> {
    const held = [...this.mine];
    this.mine.clear();
    const transaction = this.redis.multi();
    for (const [holderId, accountId] of held) transaction.zrem(this.key(accountId), holderId);
    await transaction.del(this.heldKey()).zrem(this.membersKey, this.member).exec();
  }

  /**
   * After a heartbeat of the fleet's membership: renews this process's slots, then drops those of
   * the members gone from the fleet (what it dropped; another process may have been first). One at
   * a time: a beat arriving while Redis still works on the last is skipped.
   */
  heartbeat(beat: FleetBeat): Promise<DroppedSlots[]> {
    this.following ??= this.follow(beat).finally(() => (this.following = undefined));
    return this.following;
  }

  private async follow({ seenAt, live, staleBefore }: FleetBeat): Promise<DroppedSlots[]> {
    this.seenAt = seenAt;
    if (this.mine.size > 0) {
      const expiresAt = Date.now() + this.leaseMs;
      await this.redis.eval(
        RENEW_SCRIPT,
        2,
        this.heldKey(),
        this.membersKey,
        this.slotsPrefix,
        this.member,
        seenAt,
        expiresAt,
        this.leaseMs,
        ...[...this.mine].flat(),
      );
    }
    const dropped = (await this.redis.eval(
      DROP_GONE_SCRIPT,
      1,
      this.membersKey,
      this.slotsPrefix,
      this.heldPrefix,
      staleBefore,
      ...live,
    )) as (string | number)[];
    const gone: DroppedSlots[] = [];
    for (let i = 0; i < dropped.length; i += 2)
      gone.push({ member: String(dropped[i]), slots: Number(dropped[i + 1]) });
    return gone;
  }

  private key(accountId: string): string {
    return `${this.slotsPrefix}${accountId}`;
  }

  private heldKey(): string {
    return `${this.heldPrefix}${this.member}`;
  }
}
