/**
 * What the OpenAI-compatible engines share: one OpenAI SDK client per engine, behind the guard every
 * remote engine uses (src/engines/kit/remote/guard.ts: concurrency limit, circuit breaker, watchdog).
 *
 * - Retries: the SDK's own (`maxRetries`, exponential backoff with jitter, honouring Retry-After) on
 *   408/409/429/5xx and connection errors. Other 4xx answers are not retried and are reported with the
 *   server's own message.
 * - Time limits: `timeoutMs` bounds each attempt until the response starts (the SDK's timeout); the
 *   guard's watchdog bounds the whole call.
 */
import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from "openai";
import {
  RemoteEngineError,
  deepestCause,
  isRetryableStatus,
  serverMessage,
  truncate,
  type RemoteKind,
} from "../kit/remote/errors.js";
import { RemoteGuard, type CircuitStatus, type ResilienceOptions } from "../kit/remote/guard.js";

/** Options every OpenAI-compatible engine takes. */
export interface RemoteEngineOptions extends ResilienceOptions {
  /**
   * The server's API root, e.g. "http://localhost:8000/v1". A bare origin ("http://localhost:8000")
   * means "<origin>/v1"; any other path is used as given (e.g. "https://api.groq.com/openai/v1").
   */
  readonly baseUrl: string;
  /** Sent as `Authorization: Bearer …`; without it no Authorization header is sent. */
  readonly apiKey?: string;
  readonly model: string;
}

/**
 * The SDK reads an error's message only from `{"error": {"message": …}}`. Open servers answer
 * `{"detail": …}` (FastAPI), `{"message": …}` (vLLM) or `{"error": "…"}` (Ollama), so JSON error
 * bodies are rewritten into OpenAI's shape before the SDK sees them.
 */
const normalizingFetch: typeof fetch = async (input, init) => {
  const response = await fetch(input, init);
  if (response.ok || !/\bjson\b/iu.test(response.headers.get("content-type") ?? "")) return response;
  const text = await response.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = text;
  }
  const message = serverMessage(body) ?? text;
  const original =
    typeof body === "object" && body !== null ? (body as Record<string, unknown>)["error"] : {};
  const error = typeof original === "object" && original !== null ? { ...original, message } : { message };
  const headers = new Headers(response.headers);
  headers.delete("content-length");
  headers.delete("content-encoding");
  return new Response(JSON.stringify({ error }), {
    status: response.status,
    statusText: response.statusText,
    headers,
  });
};

export class RemoteClient {
  /** The API root requests go to (after the "/v1" default). */
  readonly apiUrl: string;
  /** How errors name the server: the configured URL without credentials, query or trailing slash. */
  readonly displayUrl: string;
  /** `<model>@<host of baseUrl>`, the engine's `info.version`. */
  readonly version: string;
  readonly model: string;

  private readonly sdk: OpenAI;
  private readonly guard: RemoteGuard;

  constructor(
    readonly kind: RemoteKind,
    options: RemoteEngineOptions,
  ) {
    let url: URL;
    try {
      url = new URL(options.baseUrl);
    } catch {
      throw new Error(`remote ${kind}: baseUrl "${options.baseUrl}" is not a URL`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw new Error(`remote ${kind}: baseUrl must be an http(s) URL, got "${url.protocol}"`);
    }
    if (url.username || url.password) {
      throw new Error(`remote ${kind}: baseUrl must not contain credentials; pass apiKey instead`);
    }
    if (typeof options.model !== "string" || options.model.trim() === "") {
      throw new Error(`remote ${kind}: a model name is required`);
    }
    const path = url.pathname.replace(/\/+$/u, "");
    this.displayUrl = `${url.origin}${path}`;
    this.apiUrl = `${url.origin}${path === "" ? "/v1" : path}`;
    this.model = options.model;
    this.version = `${options.model}@${url.host}`;
    this.guard = new RemoteGuard(kind, this.displayUrl, options, (error) => this.mapError(error));

    const apiKey = options.apiKey?.trim() || undefined;
    this.sdk = new OpenAI({
      baseURL: this.apiUrl,
      // The SDK insists on a credential; without one, the Authorization header is dropped instead.
      apiKey: apiKey ?? "unused",
      ...(apiKey === undefined ? { defaultHeaders: { Authorization: null } } : {}),
      // Never pick up OPENAI_* settings from the environment: the configuration says it all.
      adminAPIKey: null,
      organization: null,
      project: null,
      timeout: this.guard.timeoutMs,
      maxRetries: this.guard.maxRetries,
      fetch: normalizingFetch,
      // Failures reach the caller as RemoteEngineErrors; the SDK need not print them as well.
      logLevel: "off",
    });
  }

  get circuit(): CircuitStatus {
    return this.guard.circuit;
  }

  /** Calls running and waiting for a slot. */
  get load(): { readonly active: number; readonly queued: number } {
    return this.guard.load;
  }

  /**
   * Runs one API call under the limiter, the breaker and the time limits. `fn` must pass the signal
   * it is given to the SDK (`{ signal }`). `signal` cancels the call (also while it waits for a slot).
   */
  call<T>(fn: (client: OpenAI, signal: AbortSignal) => Promise<T>, signal?: AbortSignal): Promise<T> {
    return this.guard.call((context) => fn(this.sdk, context.signal), signal);
  }

  /**
   * Like `call` for a streamed answer: yields what `fn` yields. The call holds its slot until the
   * stream ends; `timeoutMs` applies between items; stopping the iteration cancels the request.
   */
  stream<T>(
    fn: (client: OpenAI, signal: AbortSignal) => AsyncIterable<T>,
    signal?: AbortSignal,
  ): AsyncGenerator<T, void, undefined> {
    return this.guard.stream((context) => fn(this.sdk, context.signal), signal);
  }

  /** Fails calls still waiting and cancels calls in flight; later calls fail at once. */
  close(): void {
    this.guard.close();
  }

  private mapError(error: unknown): RemoteEngineError {
    const guard = this.guard;
    if (error instanceof APIUserAbortError) return guard.cancelledError(error);
    if (error instanceof APIConnectionTimeoutError) return guard.timeoutError(guard.timeoutMs, error);
    if (error instanceof APIConnectionError) {
      return guard.error("unreachable", `is unreachable: ${deepestCause(error)}`, undefined, {
        cause: error,
      });
    }
    if (error instanceof APIError && typeof error.status === "number") {
      const status = error.status;
      const body: unknown = error.error;
      const message = truncate(
        serverMessage(body) ?? error.message.replace(new RegExp(`^${status}\\s*`, "u"), ""),
      );
      return isRetryableStatus(status)
        ? guard.error("server", `failed with HTTP ${status}: ${message}`, status, { cause: error })
        : guard.error("rejected", `rejected the request with HTTP ${status}: ${message}`, status, {
            cause: error,
          });
    }
    const message = error instanceof Error ? error.message : String(error);
    return guard.error("invalid-response", `returned an unusable answer: ${message}`, undefined, {
      cause: error,
    });
  }
}

export function createRemoteClient(kind: RemoteKind, options: RemoteEngineOptions): RemoteClient {
  return new RemoteClient(kind, options);
}
