/** The errors of remote engines, and how they quote what a server said. */

/** Which engine a client serves; it names the server in every error message. */
export type RemoteKind = "ASR" | "MT" | "TTS";

/**
 * - `timeout`: no (complete) answer in time.
 * - `circuit-open`: not attempted, the server failed too often recently.
 * - `rejected`: a 4xx answer other than 408/409/429 (not retried).
 * - `server`: 408/409/429/5xx, still failing after the retries.
 * - `unreachable`: no connection.
 * - `invalid-response`: an answer the engine could not use.
 * - `aborted`: cancelled by its caller. `closed`: the engine was closed.
 */
export type RemoteErrorKind =
  | "timeout"
  | "circuit-open"
  | "rejected"
  | "server"
  | "unreachable"
  | "invalid-response"
  | "aborted"
  | "closed";

export interface RemoteErrorOptions extends ErrorOptions {
  /** How long the server asked to wait before another attempt (`Retry-After`). */
  readonly retryAfterMs?: number;
}

export class RemoteEngineError extends Error {
  override readonly name = "RemoteEngineError";
  readonly retryAfterMs: number | undefined;

  constructor(
    message: string,
    readonly kind: RemoteErrorKind,
    /** HTTP status of `rejected` and `server` errors. */
    readonly status?: number,
    options?: RemoteErrorOptions,
  ) {
    super(message, options);
    this.retryAfterMs = options?.retryAfterMs;
  }
}

/** Statuses that say "try again later" rather than "this request is wrong". */
export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 409 || status === 429 || status >= 500;
}

/** Server messages are quoted up to this length (HTML error pages can be long). */
const MAX_SERVER_MESSAGE = 500;

/**
 * The message of an error body: OpenAI's `{"error": {"message"}}`, LibreTranslate's and Ollama's
 * `{"error": "…"}`, vLLM's `{"message"}`, FastAPI's `{"detail"}`, or a plain-text body.
 */
export function serverMessage(body: unknown): string | undefined {
  if (typeof body === "string") return body;
  if (typeof body !== "object" || body === null) return undefined;
  const record = body as Record<string, unknown>;
  const error = record["error"];
  if (typeof error === "string") return error;
  if (typeof error === "object" && error !== null) {
    const message = (error as Record<string, unknown>)["message"];
    if (typeof message === "string") return message;
  }
  if (typeof record["message"] === "string") return record["message"];
  const detail = record["detail"];
  if (typeof detail === "string") return detail;
  if (detail !== undefined) return JSON.stringify(detail);
  return undefined;
}

/** The innermost message of a chain of causes (fetch says "fetch failed"; its cause says why). */
export function deepestCause(error: unknown): string {
  let current: unknown = error;
  let message = error instanceof Error ? error.message : String(error);
  for (let depth = 0; depth < 5 && current instanceof Error && current.cause !== undefined; depth++) {
    current = current.cause;
    if (current instanceof Error && current.message) message = current.message;
    else if (typeof current === "string") message = current;
  }
  return message;
}

/** One line, tags removed (proxies answer with HTML pages), bounded. */
export function truncate(text: string): string {
  const single = text
    .replace(/<[^>]*>/gu, " ")
    .replace(/\s+/gu, " ")
    .trim();
  return single.length > MAX_SERVER_MESSAGE ? `${single.slice(0, MAX_SERVER_MESSAGE)}…` : single;
}
