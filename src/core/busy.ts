/**
 * An engine's refusal of work beyond its queue's bound. The work was not started; a caller with
 * another route may take it (src/engines/routing/registry.ts), and an interim's translation refused this
 * way is simply not shown (a later interim or the final replaces it).
 */
export class EngineBusyError extends Error {
  override readonly name = "EngineBusyError";
}

/**
 * An engine that cannot serve right now: its process died, stopped answering within its deadline,
 * or is waiting out a restart after crashes. The call was lost, not refused for its content: a
 * caller with another engine hands it over (src/engines/routing/registry.ts), and a live session loses at
 * most the utterance in progress (the next one opens a new stream).
 */
export class EngineUnavailableError extends Error {
  override readonly name = "EngineUnavailableError";
}
