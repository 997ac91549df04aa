/**
 * An engine's refusal of work beyond its queue's bound. The work was not started; a caller with
 * another route may take it (src/engines/registry.ts), and an interim's translation refused this
 * way is simply not shown (a later interim or the final replaces it).
 */
export class EngineBusyError extends Error {
  override readonly name = "EngineBusyError";
}
