/**
 * The per-process session capacity, shared by real-time sessions (WebSocket sockets) and rooms:
 * each open socket and each open room holds one slot.
 */

/** Something that can be told to end: an open session socket, an open room. */
export interface LiveSession {
  close(code: number, reason: string): void;
}

export interface SessionCapacity {
  /** Registers an open session; false when the process is already at capacity (or draining). */
  open(session: LiveSession): boolean;
  /** Frees the session's slot. */
  ended(session: LiveSession): void;
}
