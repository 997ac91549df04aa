import { randomUUID } from "node:crypto";
import type { SessionTokens } from "../../auth/session-tokens.js";
import type { LiveSession, SessionCapacity } from "../../sessions/capacity.js";

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

/** Why a session could not be created; `retryAfterSec` is when a slot frees up at the latest. */
export interface CreateRefusal {
  readonly reason: "capacity" | "account_limit" | "total_limit";
  readonly retryAfterSec: number;
  /** The bound that was reached. */
  readonly limit: number;
}

export type CreateResult =
  | { readonly ok: true; readonly sessionId: string; readonly token: string }
  | ({ readonly ok: false } & CreateRefusal);

/**
 * Sessions created by `GET /v1/session` and not yet connected (each can be claimed once, within
 * the token's lifetime), and the sockets currently open. Open sockets count against the
 * per-process capacity: `GET /v1/session` answers 503 when it is reached, and a socket that
 * arrives when it is reached is closed with 4503.
 *
 * Unclaimed sessions are bounded per account and in total. Every session lives exactly the token's
 * lifetime, so the insertion order of the map is also the expiry order: expiring means dropping
 * entries from its front, O(1) per session however many are pending.
 */
export class RealtimeSessions implements SessionCapacity {
  private readonly pending = new Map<string, PendingSession>();
  /** Per account, its unclaimed session ids in creation (= expiry) order. */
  private readonly pendingByAccount = new Map<string, Set<string>>();
  private readonly live = new Set<LiveSession>();
  private draining = false;
  private droppedFrames = 0;

  constructor(
    readonly capacity: number,
    private readonly tokens: SessionTokens,
    private readonly limits: PendingLimits,
  ) {}

  get liveCount(): number {
    return this.live.size;
  }

  /** Translated-speech frames skipped for clients that read too slowly, since start. */
  get droppedAudioFrames(): number {
    return this.droppedFrames;
  }

  audioDropped(): void {
    this.droppedFrames++;
  }

  get pendingCount(): number {
    this.expire();
    return this.pending.size;
  }

  /** Whether a new session can be started now. */
  hasRoom(): boolean {
    return !this.draining && this.live.size < this.capacity;
  }

  async create(accountId: string, metadata: Record<string, string>): Promise<CreateResult> {
    this.expire();
    if (!this.hasRoom()) return { ok: false, reason: "capacity", retryAfterSec: 1, limit: this.capacity };
    const mine = this.pendingByAccount.get(accountId);
    if (mine && mine.size >= this.limits.perAccount) {
      const retryAfterSec = this.secondsUntilExpiry(first(mine));
      return { ok: false, reason: "account_limit", retryAfterSec, limit: this.limits.perAccount };
    }
    if (this.pending.size >= this.limits.total) {
      const retryAfterSec = this.secondsUntilExpiry(first(this.pending.keys()));
      return { ok: false, reason: "total_limit", retryAfterSec, limit: this.limits.total };
    }
    const sessionId = randomUUID();
    this.pending.set(sessionId, {
      sessionId,
      accountId,
      metadata,
      expiresAt: Date.now() + this.tokens.ttlSeconds * 1000,
    });
    if (mine) mine.add(sessionId);
    else this.pendingByAccount.set(accountId, new Set([sessionId]));
    return { ok: true, sessionId, token: await this.tokens.issue(sessionId) };
  }

  /** Whether a `ws_url` token names a session that could still be claimed (nothing is claimed). */
  async isClaimable(token: string): Promise<boolean> {
    const sessionId = await this.tokens.verify(token);
    this.expire();
    return sessionId !== undefined && this.pending.has(sessionId);
  }

  /** Verifies a `ws_url` token and claims its session; undefined when forged, expired or already used. */
  async claim(token: string): Promise<PendingSession | undefined> {
    const sessionId = await this.tokens.verify(token);
    this.expire();
    if (!sessionId) return undefined;
    const session = this.pending.get(sessionId);
    if (session) this.forget(session);
    return session;
  }

  /** Registers an open socket; false when the process is already at capacity. */
  open(session: LiveSession): boolean {
    if (this.draining || this.live.size >= this.capacity) return false;
    this.live.add(session);
    return true;
  }

  ended(session: LiveSession): void {
    this.live.delete(session);
  }

  /** Graceful shutdown: refuse new sessions and close open ones with 1001. */
  drain(): void {
    this.draining = true;
    this.pending.clear();
    this.pendingByAccount.clear();
    for (const session of this.live) session.close(1001, "server shutting down; create a new session");
  }

  private expire(): void {
    const now = Date.now();
    for (const session of this.pending.values()) {
      if (session.expiresAt > now) return;
      this.forget(session);
    }
  }

  private forget(session: PendingSession): void {
    this.pending.delete(session.sessionId);
    const mine = this.pendingByAccount.get(session.accountId);
    mine?.delete(session.sessionId);
    if (mine?.size === 0) this.pendingByAccount.delete(session.accountId);
  }

  private secondsUntilExpiry(sessionId: string | undefined): number {
    const expiresAt = sessionId === undefined ? Date.now() : (this.pending.get(sessionId)?.expiresAt ?? 0);
    return Math.max(1, Math.ceil((expiresAt - Date.now()) / 1000));
  }
}

function first(ids: Iterable<string>): string | undefined {
  for (const id of ids) return id;
  return undefined;
}
