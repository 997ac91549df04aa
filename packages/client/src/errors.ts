/** A refused HTTP request: the status and the service's `{"error": {"code", "message"}}` body. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {
    super(`HTTP ${status}: ${JSON.stringify(body)}`);
  }

  /** The service's error code (`rate_limited`, `not_found`, …), when the body has one. */
  get code(): string | undefined {
    const code = (this.body as { error?: { code?: unknown } } | undefined)?.error?.code;
    return typeof code === "string" ? code : undefined;
  }
}

/**
 * The service (or its storage) could not be reached: the message names the URL and the network's
 * reason (`ECONNREFUSED`, `ENOTFOUND`, …), and `cause` is the platform's own error. A TypeError, as
 * fetch's network failures are, so code that recognizes those still does.
 */
export class ConnectionError extends TypeError {
  override readonly name = "ConnectionError";

  constructor(
    message: string,
    /** The URL without its query, which can carry a session token or a presigned signature. */
    readonly url: string,
    options: { cause?: unknown } = {},
  ) {
    super(message, options);
  }
}

/**
 * The service sent a frame that is not one of relay's messages (not JSON, or JSON without a
 * `type`): a server that is not relay, or a proxy's page in its place. The message shows the
 * frame's beginning.
 */
export class ProtocolError extends Error {
  override readonly name = "ProtocolError";
}

/** A URL as errors show it: without its query (see ConnectionError.url). */
export function shownUrl(url: string | URL): string {
  const parsed = new URL(url);
  return `${parsed.origin}${parsed.pathname}`;
}

/**
 * How fetch reports a network failure: Node ("fetch failed", the reason in `cause`), Chromium,
 * Firefox and Safari (no reason). Other TypeErrors are bad arguments (say, a header value), not
 * the network.
 */
const NETWORK_FAILURE = /^(fetch failed|Failed to fetch|NetworkError when attempting to fetch|Load failed)/u;

/** fetch(), with a network failure turned into a ConnectionError. */
export async function fetchOrExplain(url: URL | string, init: RequestInit = {}): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch (error) {
    if (!(error instanceof TypeError) || !NETWORK_FAILURE.test(error.message)) throw error;
    const cause = error.cause as { code?: unknown; message?: unknown } | undefined;
    const reason = cause?.code ?? cause?.message ?? error.message;
    throw new ConnectionError(`cannot reach ${shownUrl(url)}: ${String(reason)}`, shownUrl(url), {
      cause: error,
    });
  }
}

/** A JSON request with the API key; non-2xx answers throw HttpError, network failures ConnectionError. */
export async function requestJson<T>(
  baseUrl: string,
  apiKey: string | undefined,
  method: string,
  route: string,
  options: { body?: unknown; headers?: Record<string, string>; signal?: AbortSignal } = {},
): Promise<T> {
  const response = await fetchOrExplain(new URL(route, baseUrl), {
    method,
    headers: {
      ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}),
      ...(options.body === undefined ? {} : { "content-type": "application/json" }),
      ...options.headers,
    },
    ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
    ...(options.signal ? { signal: options.signal } : {}),
  });
  const parsed: unknown = await response.json().catch(() => undefined);
  if (!response.ok) throw new HttpError(response.status, parsed);
  return parsed as T;
}
