import { APIConnectionError, APIError, APIStatusError, log } from "@livekit/agents";
import {
  ConnectionError,
  HttpError,
  ProtocolError,
  RealtimeSession,
  SessionError,
  type SessionParams,
} from "@relay-translate/client";

/** Where relay is and the key to use: the options every class of this package takes. */
export interface RelayOptions {
  /** relay's base URL [`RELAY_SERVER`, else http://localhost:8080]. */
  readonly baseUrl?: string;
  /** An API key of the service [`RELAY_API_KEY`]. */
  readonly apiKey?: string;
}

export interface RelayConnection {
  readonly baseUrl: string;
  readonly apiKey: string;
}

/** The options with the environment's defaults; no key at all is refused at construction, as the agents' plugins do. */
export function relayConnection(options: RelayOptions): RelayConnection {
  const baseUrl = options.baseUrl ?? process.env["RELAY_SERVER"] ?? "http://localhost:8080";
  const apiKey = options.apiKey ?? process.env["RELAY_API_KEY"];
  if (!apiKey) throw new Error("relay: an API key is required, as the apiKey option or as $RELAY_API_KEY");
  return { baseUrl, apiKey };
}

/** The message of relay's `{"error": {"code", "message"}}` body, or the body as it came. */
function messageOf(error: HttpError): string {
  const body = error.body as { error?: { message?: unknown } } | undefined;
  return typeof body?.error?.message === "string" ? body.error.message : JSON.stringify(error.body);
}

/**
 * Opens a real-time session, with failures as the agents' errors (their retry loop reads
 * `retryable`): each names the service's URL and relay's own message.
 * - unreachable, or a 5xx/429: APIConnectionError / APIStatusError, retried;
 * - a refused key (401) or request (4xx): APIStatusError, not retried;
 * - parameters the service cannot serve (the `error` frame after `ready`): APIError, not retried;
 * - an answer that is not relay's (a ProtocolError: a proxy's page, another server): APIError,
 *   not retried.
 */
export async function openSession(
  connection: RelayConnection,
  params: SessionParams,
  label: string,
): Promise<RealtimeSession> {
  const { baseUrl, apiKey } = connection;
  try {
    const session = await RealtimeSession.open({ baseUrl, apiKey, maxBufferedMessages: 1024 }, params);
    // A frame relay cannot have sent is skipped (an oversized one also ends the session, which the
    // caller sees as a drop): worth a warning, not the agent's process.
    session.onError = (error) => log().warn(`${label}: ${error.message}`);
    return session;
  } catch (error) {
    if (error instanceof HttpError) {
      throw new APIStatusError({
        message: `${label}: ${baseUrl} refused the session (HTTP ${error.status}${error.code ? ` ${error.code}` : ""}): ${messageOf(error)}`,
        options: { statusCode: error.status, body: (error.body as object | null) ?? null },
      });
    }
    if (error instanceof ConnectionError) {
      throw new APIConnectionError({ message: `${label}: ${error.message}` });
    }
    if (error instanceof ProtocolError) {
      throw new APIError(`${label}: ${error.message}`, { retryable: false });
    }
    if (error instanceof SessionError) {
      throw new APIError(`${label}: ${baseUrl} cannot serve this session: ${error.message}`, {
        retryable: false,
      });
    }
    throw error;
  }
}

/**
 * What an `error` event nobody listens for does instead of Node's default, an ERR_UNHANDLED_ERROR
 * thrown into the agents' own promises (one that ends the process, the event nested in itself over
 * 30 lines): it is logged, as the one line naming relay's URL and the cause. An agent session
 * always listens; a script using the classes alone may not.
 */
export function logUnheardError(event: { readonly error: Error; readonly recoverable: boolean }): void {
  log().error({ recoverable: event.recoverable }, event.error.message);
}

/** A session that ended while it was still needed: retried, as a dropped socket is. */
export function droppedError(
  label: string,
  baseUrl: string,
  code: number,
  reason: string,
): APIConnectionError {
  return new APIConnectionError({
    message: `${label}: the session with ${baseUrl} closed unexpectedly (close ${code}${reason ? ` ${reason}` : ""})`,
  });
}
