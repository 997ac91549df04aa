import type { ErrorMessage } from "./messages.js";

/**
 * The `error` message of the real-time interface, as sent on a session socket and published in a
 * room. `correlationId`: the segment or `speak` the error concerns (`correlation_id`);
 * `participant`: in a room, whose speech it concerns.
 */
export function errorFrame(
  message: string,
  about: { readonly correlationId?: string; readonly participant?: string } = {},
): ErrorMessage {
  return {
    type: "error",
    error: message,
    ...(about.correlationId === undefined ? {} : { correlation_id: about.correlationId }),
    ...(about.participant === undefined ? {} : { participant: about.participant }),
    timestamp: Date.now() / 1000,
  };
}
