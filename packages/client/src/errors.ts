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

/** A JSON request with the API key; non-2xx answers throw HttpError. */
export async function requestJson<T>(
  baseUrl: string,
  apiKey: string | undefined,
  method: string,
  route: string,
  options: { body?: unknown; headers?: Record<string, string>; signal?: AbortSignal } = {},
): Promise<T> {
  const response = await fetch(new URL(route, baseUrl), {
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
