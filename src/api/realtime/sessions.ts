import { randomUUID } from "node:crypto";
import type { SessionTokens } from "../../auth/session-tokens.js";
import type { AccountSlots } from "../../sessions/account-slots.js";
import { CLOSE_CODES, type LiveSession, type SessionCapacity } from "../../sessions/capacity.js";
import type { PendingRefusal, PendingSession, PendingSessions } from "../../sessions/pending.js";

export type { PendingSession } from "../../sessions/pending.js";

/** Why a session could not be created; `retryAfterSec` is when a slot frees up at the latest. */
export interface CreateRefusal {
  readonly reason: "capacity" | "live_limit" | PendingRefusal["reason"];
  /** Absent when waiting does not help (the account must end one of its own sessions). */
  readonly retryAfterSec?: number;
  /** The bound that was reached. */
  readonly limit: number;
}

export type CreateResult =
  | { readonly ok: true; readonly sessionId: string; readonly token: string }
  | ({ readonly ok: false } & CreateRefusal);

/** A claimed session: its socket may open unless its account already holds its bound. */
export interface ClaimedSession extends PendingSession {
  /** Whether one of the account's live-session slots was taken for it. */
  readonly withinAccountBound: boolean;
}

export interface RealtimeSessionsOptions {
  /** Live sessions (sockets and rooms) this process accepts. */
  readonly capacity: number;
  readonly tokens: SessionTokens;
  readonly pending: PendingSessions;
  /** The per-account bound on live sessions (this process's memory, or the fleet's Redis). */
  readonly accountSlots: AccountSlots;
  /**
   * Of these accounts, those whose API key was revoked: their live sessions are ended every
   * `revocationCheckMs`, and their unclaimed sessions cannot be claimed.
   */
  readonly revokedAmong?: (accountIds: readonly string[]) => Promise<ReadonlySet<string>>;
  readonly revocationCheckMs?: number;
  /** Whether some process of the fleet could take one more session; by default, this one. */
  readonly fleetHasRoom?: () => boolean;
  /** Told of failures of the background work (revocation checks, releasing slots). */
  readonly onError?: (error: unknown, what: string) => void;
}

/**
 * Real-time sessions: the ones created by `GET /v1/session` and waiting to be claimed (in
 * `pending`: this process's memory, or the fleet's Redis), and the live sessions of this process
 * (sockets and rooms). Live sessions count against the per-process capacity (a socket that arrives
 * when it is reached is closed with 4503) and against their account's bound (`GET /v1/session`
 * answers 429 at it; a socket claimed beyond it is closed with 4429). `GET /v1/session` answers 503
 * when `fleetHasRoom` says no process of the fleet (or this one, alone) has a free slot.
 */
export class RealtimeSessions implements SessionCapacity {
  readonly capacity: number;
  private readonly live = new Set<LiveSession>();
  private draining = false;
  private droppedFrames = 0;
  private readonly revocationTimer: NodeJS.Timeout | undefined;
  private checkingRevocations = false;

  constructor(private readonly options: RealtimeSessionsOptions) {
    this.capacity = options.capacity;
    if (options.revokedAmong) {
      this.revocationTimer = setInterval(
        () => void this.endRevoked(),
        options.revocationCheckMs ?? 5_000,
      ).unref();
    }
  }

  get liveCount(): number {
    return this.live.size;
  }

  get perAccount(): number {
    return this.options.accountSlots.limit;
  }

  get isDraining(): boolean {
    return this.draining;
  }

  /** Translated-speech frames skipped for clients that read too slowly, since start. */
  get droppedAudioFrames(): number {
    return this.droppedFrames;
  }

  audioDropped(): void {
    this.droppedFrames++;
  }

  pendingCount(): Promise<number> {
    return this.options.pending.count();
  }

  /** Whether this process can start a new session now. */
  hasRoom(): boolean {
    return !this.draining && this.live.size < this.capacity;
  }

  async create(accountId: string, metadata: Record<string, string>): Promise<CreateResult> {
    const { accountSlots, pending, tokens } = this.options;
    if (this.draining || !(this.options.fleetHasRoom ?? (() => this.hasRoom()))())
      return { ok: false, reason: "capacity", retryAfterSec: 1, limit: this.capacity };
    if ((await accountSlots.count(accountId)) >= accountSlots.limit)
      return { ok: false, reason: "live_limit", limit: accountSlots.limit };
    const sessionId = randomUUID();
    const refused = await pending.add({
      sessionId,
      accountId,
      metadata,
      expiresAt: Date.now() + tokens.ttlSeconds * 1000,
    });
    if (refused) return { ok: false, ...refused };
    return { ok: true, sessionId, token: await tokens.issue(sessionId) };
  }

  /** Whether a `ws_url` token names a session that could still be claimed (nothing is claimed). */
  async isClaimable(token: string): Promise<boolean> {
    const sessionId = await this.options.tokens.verify(token);
    return sessionId !== undefined && (await this.options.pending.has(sessionId));
  }

  /**
   * Verifies a `ws_url` token and claims its session, taking one of its account's slots; undefined
   * when the token is forged, expired or already used, or the API key that created it was revoked.
   */
  async claim(token: string): Promise<ClaimedSession | undefined> {
    const sessionId = await this.options.tokens.verify(token);
    const session = sessionId === undefined ? undefined : await this.options.pending.take(sessionId);
    if (!session) return undefined;
    if ((await this.options.revokedAmong?.([session.accountId]))?.has(session.accountId)) return undefined;
    return { ...session, withinAccountBound: await this.reserve({ id: sessionId!, ...session }) };
  }

  async reserve(session: Pick<LiveSession, "id" | "accountId">): Promise<boolean> {
    return this.options.accountSlots.acquire(session.accountId, session.id);
  }

  /** Registers a live session; false when the process is already at capacity. */
  open(session: LiveSession): boolean {
    if (!this.hasRoom()) return false;
    this.live.add(session);
    return true;
  }

  ended(session: LiveSession): void {
    this.live.delete(session);
    this.unreserve(session);
  }

  /** Frees the account slot `reserve` took (nothing when none is held, or it was already freed). */
  unreserve(session: Pick<LiveSession, "id" | "accountId">): void {
    this.options.accountSlots
      .release(session.accountId, session.id)
      .catch((error: unknown) => this.options.onError?.(error, "releasing an account's session slot"));
  }

  /**
   * Graceful shutdown: refuse new sessions and close open ones with 1001. Sessions waiting to be
   * claimed are left alone: in a fleet another process claims them.
   */
  drain(): void {
    this.draining = true;
    clearInterval(this.revocationTimer);
    for (const session of this.live) session.close(1001, "server shutting down; create a new session");
  }

  /** After `drain()`: stops the background work and frees the slots still held. */
  async close(): Promise<void> {
    clearInterval(this.revocationTimer);
    await this.options.accountSlots.close();
  }

  /** Ends the live sessions of accounts whose API key was revoked (one check at a time). */
  private async endRevoked(): Promise<void> {
    const accounts = [...new Set([...this.live].map((session) => session.accountId))];
    if (this.checkingRevocations || accounts.length === 0) return;
    this.checkingRevocations = true;
    try {
      const revoked = await this.options.revokedAmong!(accounts);
      for (const session of [...this.live]) {
        if (!revoked.has(session.accountId)) continue;
        session.close(
          CLOSE_CODES.revoked,
          "API key revoked",
          "the API key that created this session was revoked; the session is closed",
        );
      }
    } catch (error) {
      this.options.onError?.(error, "checking for revoked API keys");
    } finally {
      this.checkingRevocations = false;
    }
  }
}
