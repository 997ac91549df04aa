import { randomUUID } from "node:crypto";
import type { SessionTokens } from "../../auth/session-tokens.js";
import type { LiveSession, SessionCapacity } from "../../sessions/capacity.js";
import type { PendingRefusal, PendingSession, PendingSessions } from "../../sessions/pending.js";

export type { PendingSession } from "../../sessions/pending.js";

/** Why a session could not be created; `retryAfterSec` is when a slot frees up at the latest. */
export interface CreateRefusal {
  readonly reason: "capacity" | PendingRefusal["reason"];
  readonly retryAfterSec: number;
  /** The bound that was reached. */
  readonly limit: number;
}

export type CreateResult =
  | { readonly ok: true; readonly sessionId: string; readonly token: string }
  | ({ readonly ok: false } & CreateRefusal);

/**
 * Real-time sessions: the ones created by `GET /v1/session` and waiting to be claimed (in
 * `pending`: this process's memory, or the fleet's Redis), and the sockets open on this process.
 * Open sockets count against the per-process capacity; a socket that arrives when it is reached
 * is closed with 4503. `GET /v1/session` answers 503 when `fleetHasRoom` says no process of the
 * fleet (or this one, alone) has a free slot.
 */
export class RealtimeSessions implements SessionCapacity {
  private readonly live = new Set<LiveSession>();
  private draining = false;
  private droppedFrames = 0;

  constructor(
    readonly capacity: number,
    private readonly tokens: SessionTokens,
    private readonly pending: PendingSessions,
    /** Whether some process of the fleet could take one more session; by default, this one. */
    private readonly fleetHasRoom: () => boolean = () => this.hasRoom(),
  ) {}

  get liveCount(): number {
    return this.live.size;
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
    return this.pending.count();
  }

  /** Whether this process can start a new session now. */
  hasRoom(): boolean {
    return !this.draining && this.live.size < this.capacity;
  }

  async create(accountId: string, metadata: Record<string, string>): Promise<CreateResult> {
    if (this.draining || !this.fleetHasRoom())
      return { ok: false, reason: "capacity", retryAfterSec: 1, limit: this.capacity };
    const sessionId = randomUUID();
    const refused = await this.pending.add({
      sessionId,
      accountId,
      metadata,
      expiresAt: Date.now() + this.tokens.ttlSeconds * 1000,
    });
    if (refused) return { ok: false, ...refused };
    return { ok: true, sessionId, token: await this.tokens.issue(sessionId) };
  }

  /** Whether a `ws_url` token names a session that could still be claimed (nothing is claimed). */
  async isClaimable(token: string): Promise<boolean> {
    const sessionId = await this.tokens.verify(token);
    return sessionId !== undefined && (await this.pending.has(sessionId));
  }

  /** Verifies a `ws_url` token and claims its session; undefined when forged, expired or already used. */
  async claim(token: string): Promise<PendingSession | undefined> {
    const sessionId = await this.tokens.verify(token);
    return sessionId === undefined ? undefined : this.pending.take(sessionId);
  }

  /** Registers an open socket; false when the process is already at capacity. */
  open(session: LiveSession): boolean {
    if (!this.hasRoom()) return false;
    this.live.add(session);
    return true;
  }

  ended(session: LiveSession): void {
    this.live.delete(session);
  }

  /**
   * Graceful shutdown: refuse new sessions and close open ones with 1001. Sessions waiting to be
   * claimed are left alone: in a fleet another process claims them.
   */
  drain(): void {
    this.draining = true;
    for (const session of this.live) session.close(1001, "server shutting down; create a new session");
  }
}
