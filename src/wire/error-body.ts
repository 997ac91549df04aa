/**
 * The body of every HTTP error the service sends (the REST interface, the WebSocket upgrade
 * refusals, the local object store): `{"error": {"code", "message"}}` with a stable,
 * machine-readable `code` and a message saying what is wrong and what would work.
 */
export function errorBody(code: string, message: string) {
  return { error: { code, message } };
}
