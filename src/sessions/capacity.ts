/**
 * The live sessions of a process: real-time sessions (WebSocket sockets) and rooms. Each holds one
 * of the process's slots and one of its account's (the account's bound is fleet-wide with Redis).
 */

/** Something that can be told to end: an open session socket, an open room. */
export interface LiveSession {
  /** Unique fleet-wide (the session id, the room name): names its slot of the account's bound. */
  readonly id: string;
  /** The account it runs for: its bound, and ending it when the account's API key is revoked. */
  readonly accountId: string;
  /** Ends the session; `message`, where it has a client socket, goes first as an `error` frame. */
  close(code: number, reason: string, message?: string): void;
}

export interface SessionCapacity {
  /** Sessions one account may hold at once (sockets and rooms, fleet-wide with Redis). */
  readonly perAccount: number;
  /** Takes one of the account's slots for the session; false when the account holds its bound. */
  reserve(session: Pick<LiveSession, "id" | "accountId">): Promise<boolean>;
  /** Takes one of this process's slots; false when the process is at capacity (or draining). */
  open(session: LiveSession): boolean;
  /** Frees the session's slots (the process's and the account's). */
  ended(session: LiveSession): void;
}

/**
 * Close codes of the session socket beyond the spec's (1000, 1001, 4500, 4503); each follows an
 * `error` frame saying why. In the 4000 range, echoing the HTTP status of the same meaning.
 */
export const CLOSE_CODES = {
  /** The API key that created the session was revoked. */
  revoked: 4401,
  /** No audio and no message for the idle timeout. */
  idle: 4408,
  /** The session reached its maximum length. */
  maxDuration: 4409,
  /** The account already holds its bound of live sessions (a socket claimed beyond it). */
  accountLimit: 4429,
} as const;

/** The account already holds its bound of live sessions (`SessionCapacity.perAccount`). */
export class AccountSessionsLimitError extends Error {
  constructor(readonly limit: number) {
    super(
      `this account already has ${limit} live sessions (open session sockets and rooms; the limit); ` +
        "close one of them to start another",
    );
  }
}
