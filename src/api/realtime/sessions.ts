import { randomUUID } from "node:crypto";
import type { SessionTokens } from "../../auth/session-tokens.js";

export interface PendingSession {
  readonly sessionId: string;
  readonly metadata: Readonly<Record<string, string>>;
  readonly expiresAt: number;
}

/** Something that can be told to end: an open session socket. */
export interface LiveSession {
  close(code: number, reason: string): void;
}

/**
 * Sessions created by `GET /v1/session` and not yet connected (each can be claimed once, within
 * the token's lifetime), and the sockets currently open. Open sockets count against the
 * per-process capacity: `GET /v1/session` answers 503 when it is reached, and a socket that
 * arrives when it is reached is closed with 4503.
 */
export class RealtimeSessions {
  private readonly pending = new Map<string, PendingSession>();
  private readonly live = new Set<LiveSession>();
  private draining = false;

  constructor(
    readonly capacity: number,
    private readonly tokens: SessionTokens,
  ) {}

  get liveCount(): number {
    return this.live.size;
  }

  /** Whether a new session can be started now. */
  hasRoom(): boolean {
    return !this.draining && this.live.size < this.capacity;
  }

  async create(metadata: Record<string, string>): Promise<{ sessionId: string; token: string }> {
    this.prune();
    const sessionId = randomUUID();
    this.pending.set(sessionId, {
      sessionId,
      metadata,
      expiresAt: Date.now() + this.tokens.ttlSeconds * 1000,
    });
    return { sessionId, token: await this.tokens.issue(sessionId) };
  }

  /** Verifies a `ws_url` token and claims its session; undefined when forged, expired or already used. */
  async claim(token: string): Promise<PendingSession | undefined> {
    const sessionId = await this.tokens.verify(token);
    if (!sessionId) return undefined;
    const session = this.pending.get(sessionId);
    this.pending.delete(sessionId);
    return session && session.expiresAt > Date.now() ? session : undefined;
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
    for (const session of this.live) session.close(1001, "server shutting down; create a new session");
  }

  private prune(): void {
    const now = Date.now();
    for (const [id, session] of this.pending) if (session.expiresAt <= now) this.pending.delete(id);
  }
}
