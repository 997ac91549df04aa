import { CliError, request } from "./network.js";
import { describeError } from "./errors.js";
import {
  createSession,
  HttpError,
  RealtimeSocket,
  type ServerMessage,
  type SessionInfo,
} from "./recording-socket.js";

/** The CLI's side of the service: its connection, JSON requests, and a real-time session's life. */

export interface Connection {
  readonly server: string;
  readonly apiKey: string | undefined;
}

const CLOSE_MEANINGS: Record<number, string> = {
  1001: "the server is shutting down",
  1008: "the server closed the connection (policy violation)",
  4500: "internal server error",
  4503: "no capacity on the server that accepted the socket; retry shortly",
};

/**
 * GET a JSON document from the service. The voice and language listings need no key; one given is
 * sent anyway (a gateway in front of the service may require it).
 */
export async function getJson({ server, apiKey }: Connection, path: string): Promise<unknown> {
  const headers: Record<string, string> = apiKey ? { authorization: `Bearer ${apiKey}` } : {};
  const response = await request(new URL(path, server), { headers });
  const body: unknown = await response.json().catch(() => undefined);
  if (!response.ok) throw new HttpError(response.status, body);
  return body;
}

export function requireKey({ apiKey }: Connection): string {
  if (!apiKey) throw new CliError("no API key: pass --api-key or set RELAY_API_KEY");
  return apiKey;
}

/**
 * Creates a session and opens its socket. The `ready` frame is not awaited here: a rejected session
 * sends `ready`, `error`, then closes, which `failure` reports.
 */
export async function openSession(
  connection: Connection,
  params: Record<string, string>,
): Promise<{ session: SessionInfo; socket: RealtimeSocket }> {
  const apiKey = requireKey(connection);
  let session: SessionInfo;
  try {
    session = await createSession(connection.server, apiKey, params);
  } catch (error) {
    throw new CliError(`session request failed: ${describeError(error)}`);
  }
  try {
    return { session, socket: await RealtimeSocket.connect(session.ws_url) };
  } catch (error) {
    const detail =
      error instanceof HttpError && error.status === 401
        ? "HTTP 401 (the session URL is invalid or expired; try again)"
        : describeError(error);
    throw new CliError(`WebSocket handshake refused: ${detail}`);
  }
}

/**
 * An `error` frame directly after `ready` may be the session-start rejection; it is one if the server
 * then closes with 1000 (an in-session error can also follow `ready` directly).
 */
export function isRejection(messages: readonly ServerMessage[], index: number): boolean {
  return messages[index]?.type === "error" && messages[index - 1]?.type === "ready";
}

export function errorText(message: ServerMessage): string {
  return typeof message.error === "string" ? message.error : JSON.stringify(message);
}

/** Why the server ended the session, or undefined while it is open (we never close before asking). */
export function failure(socket: RealtimeSocket): string | undefined {
  if (socket.closeCode === undefined) return undefined;
  const { messages } = socket;
  const rejected = socket.closeCode === 1000 ? messages.findIndex((_, i) => isRejection(messages, i)) : -1;
  if (rejected >= 0) return `session rejected: ${errorText(messages[rejected]!)}`;
  const lastError = messages.findLast((m) => m.type === "error");
  const meaning = CLOSE_MEANINGS[socket.closeCode] ?? "connection closed unexpectedly";
  const reason = socket.closeReason ? `, "${socket.closeReason}"` : "";
  return (
    `${meaning} (close ${socket.closeCode}${reason})` +
    (lastError ? `; last server error: ${errorText(lastError)}` : "")
  );
}

/** Throws the session's failure as a CliError, if it has failed. */
export function checkSession(socket: RealtimeSocket): void {
  const problem = failure(socket);
  if (problem) throw new CliError(problem);
}

/** Waits for a message, turning a server-side close into the reason the session failed. */
export async function expectMessage(
  socket: RealtimeSocket,
  predicate: (message: ServerMessage) => boolean,
  what: string,
  timeoutMs = 30_000,
): Promise<ServerMessage> {
  try {
    return await socket.waitFor(predicate, timeoutMs);
  } catch {
    checkSession(socket);
    throw new CliError(`no ${what} from the server within ${timeoutMs / 1000} s`);
  }
}

/** Closes with 1000 (the spec's normal end) and waits briefly for the server's close frame. */
export async function closeNormally(socket: RealtimeSocket): Promise<void> {
  if (socket.closeCode !== undefined) return;
  socket.close(1000);
  await socket.closed(5_000).catch(() => socket.terminate());
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
