/**
 * What the remote engines share: one OpenAI SDK client per engine, a concurrency limit and a
 * circuit breaker around every call.
 *
 * - Retries: the SDK's own (`maxRetries`, exponential backoff with jitter, honouring Retry-After) on
 *   408/409/429/5xx and connection errors. Other 4xx answers are not retried and are reported with the
 *   server's own message.
 * - Time limits: `timeoutMs` bounds each attempt until the response starts (the SDK's timeout). A
 *   watchdog bounds the whole call (every attempt, the backoff between them and reading the body), so
 *   a server that stalls mid-body or asks for a long Retry-After cannot hang a session; streamed
 *   answers instead get `timeoutMs` between chunks.
 * - Concurrency (p-limit): at most `concurrency` calls in flight per engine; further calls queue.
 * - Circuit breaker (cockatiel): after `failureThreshold` consecutive failed calls, calls fail at once
 *   for `resetAfterMs`; then one trial call goes through and closes the circuit if it succeeds. Only
 *   failures that say the server is unwell count (timeouts, connection errors, 408/409/429/5xx after
 *   retries, unusable answers) — not a 4xx about one request, and not a call its caller cancelled.
 */
import {
  BrokenCircuitError,
  CircuitState,
  ConsecutiveBreaker,
  circuitBreaker,
  handleWhen,
  type CircuitBreakerPolicy,
} from "cockatiel";
import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from "openai";
import pLimit, { type LimitFunction } from "p-limit";

/** Which engine a client serves; it names the server in every error message. */
export type RemoteKind = "ASR" | "MT" | "TTS";

export interface CircuitOptions {
  /** Consecutive failed calls that open the circuit. Default 5. */
  readonly failureThreshold?: number;
  /** How long an open circuit fails calls at once before it lets a trial call through. Default 30 000. */
  readonly resetAfterMs?: number;
}

/** Options every remote engine takes. */
export interface RemoteEngineOptions {
  /**
   * The server's API root, e.g. "http://localhost:8000/v1". A bare origin ("http://localhost:8000")
   * means "<origin>/v1"; any other path is used as given (e.g. "https://api.groq.com/openai/v1").
   */
  readonly baseUrl: string;
  /** Sent as `Authorization: Bearer …`; without it no Authorization header is sent. */
  readonly apiKey?: string;
  readonly model: string;
  /** Per-attempt limit until the response starts (streams: also between chunks). Default 30 000. */
  readonly timeoutMs?: number;
  /** Retries of a failed attempt (408/409/429/5xx, connection errors, timeouts). Default 2. */
  readonly maxRetries?: number;
  /** Calls in flight at once; further calls queue. Default 4. */
  readonly concurrency?: number;
  readonly circuit?: CircuitOptions;
}

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

export class RemoteEngineError extends Error {
  override readonly name = "RemoteEngineError";

  constructor(
    message: string,
    readonly kind: RemoteErrorKind,
    /** HTTP status of `rejected` and `server` errors. */
    readonly status?: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** Failures that say the server is unwell (and so count towards opening the circuit). */
const COUNTED: ReadonlySet<RemoteErrorKind> = new Set([
  "timeout",
  "server",
  "unreachable",
  "invalid-response",
]);

/** Handed to a call's function: its cancellation signal (pass it to the SDK) and the stream keep-alive. */
interface Attempt {
  readonly signal: AbortSignal;
  /** Streams: a chunk arrived, so the idle timeout starts again. */
  alive(): void;
}

export type CircuitStatus = "closed" | "open" | "half-open";

const DEFAULT_TIMEOUT_MS = 30_000;
const DEFAULT_MAX_RETRIES = 2;
const DEFAULT_CONCURRENCY = 4;
const DEFAULT_FAILURE_THRESHOLD = 5;
const DEFAULT_RESET_AFTER_MS = 30_000;
/** The SDK's backoff between attempts: 0.5 s doubling up to 8 s (jitter only shortens it). */
const SDK_INITIAL_BACKOFF_MS = 500;
const SDK_MAX_BACKOFF_MS = 8_000;
/** Slack the whole-call watchdog allows beyond attempts and backoff (connection set-up, body reading). */
const WATCHDOG_SLACK_MS = 1_000;
/** Server messages are quoted up to this length (HTML error pages can be long). */
const MAX_SERVER_MESSAGE = 500;

function checkInteger(kind: RemoteKind, name: string, value: number, min: number): number {
  if (!Number.isInteger(value) || value < min) {
    throw new Error(`remote ${kind}: ${name} must be an integer ≥ ${min}, got ${value}`);
  }
  return value;
}

/** Lines and the `error` field common to OpenAI-style and FastAPI-style (`detail`) error bodies. */
function serverMessage(body: unknown): string | undefined {
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

/**
 * The SDK reads an error's message only from `{"error": {"message": …}}`. Open servers answer
 * `{"detail": …}` (FastAPI), `{"message": …}` (vLLM) or `{"error": "…"}` (Ollama), so JSON error
 * bodies are rewritten into OpenAI's shape before the SDK sees them.
 */
const normalisingFetch: typeof fetch = async (input, init) => {
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

function deepestCause(error: unknown): string {
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
function truncate(text: string): string {
  const single = text
    .replace(/<[^>]*>/gu, " ")
    .replace(/\s+/gu, " ")
    .trim();
  return single.length > MAX_SERVER_MESSAGE ? `${single.slice(0, MAX_SERVER_MESSAGE)}…` : single;
}

function formatSeconds(ms: number): string {
  const seconds = Math.max(0, ms) / 1000;
  return seconds >= 10 ? `${Math.ceil(seconds)}s` : `${Math.ceil(seconds * 10) / 10}s`;
}

/** Rejects when `signal` aborts (with its reason); never settles otherwise. */
function rejection(signal: AbortSignal): { promise: Promise<never>; dispose(): void } {
  let dispose = (): void => undefined;
  const promise = new Promise<never>((_, reject) => {
    if (signal.aborted) {
      reject(signal.reason as Error);
      return;
    }
    const onAbort = (): void => reject(signal.reason as Error);
    signal.addEventListener("abort", onAbort, { once: true });
    dispose = () => signal.removeEventListener("abort", onAbort);
  });
  promise.catch(() => undefined);
  return { promise, dispose };
}

export class RemoteClient {
  /** The API root requests go to (after the "/v1" default). */
  readonly apiUrl: string;
  /** How errors name the server: the configured URL without credentials, query or trailing slash. */
  readonly displayUrl: string;
  /** `<model>@<host of baseUrl>`, the engine's `info.version`. */
  readonly version: string;
  readonly model: string;
  readonly timeoutMs: number;
  readonly maxRetries: number;
  readonly concurrency: number;
  readonly failureThreshold: number;
  readonly resetAfterMs: number;

  private readonly sdk: OpenAI;
  private readonly limit: LimitFunction;
  private readonly breaker: CircuitBreakerPolicy;
  private readonly closing = new AbortController();
  /** Whole-call watchdog: every attempt, the SDK's backoff between them, and some slack. */
  private readonly deadlineMs: number;
  private openedAt = 0;

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
    this.timeoutMs = checkInteger(kind, "timeoutMs", options.timeoutMs ?? DEFAULT_TIMEOUT_MS, 1);
    this.maxRetries = checkInteger(kind, "maxRetries", options.maxRetries ?? DEFAULT_MAX_RETRIES, 0);
    this.concurrency = checkInteger(kind, "concurrency", options.concurrency ?? DEFAULT_CONCURRENCY, 1);
    this.failureThreshold = checkInteger(
      kind,
      "circuit.failureThreshold",
      options.circuit?.failureThreshold ?? DEFAULT_FAILURE_THRESHOLD,
      1,
    );
    this.resetAfterMs = checkInteger(
      kind,
      "circuit.resetAfterMs",
      options.circuit?.resetAfterMs ?? DEFAULT_RESET_AFTER_MS,
      0,
    );
    let backoffMs = 0;
    for (let retry = 0; retry < this.maxRetries; retry++) {
      backoffMs += Math.min(SDK_INITIAL_BACKOFF_MS * 2 ** retry, SDK_MAX_BACKOFF_MS);
    }
    this.deadlineMs = this.timeoutMs * (this.maxRetries + 1) + backoffMs + WATCHDOG_SLACK_MS;

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
      timeout: this.timeoutMs,
      maxRetries: this.maxRetries,
      fetch: normalisingFetch,
      // Failures reach the caller as RemoteEngineErrors; the SDK need not print them as well.
      logLevel: "off",
    });
    this.limit = pLimit(this.concurrency);
    this.breaker = circuitBreaker(
      handleWhen((error) => error instanceof RemoteEngineError && COUNTED.has(error.kind)),
      { halfOpenAfter: this.resetAfterMs, breaker: new ConsecutiveBreaker(this.failureThreshold) },
    );
    this.breaker.onBreak(() => {
      this.openedAt = Date.now();
    });
  }

  get circuit(): CircuitStatus {
    switch (this.breaker.state) {
      case CircuitState.Closed:
        return "closed";
      case CircuitState.HalfOpen:
        return "half-open";
      default:
        return "open";
    }
  }

  /** Calls running and waiting for a slot. */
  get load(): { readonly active: number; readonly queued: number } {
    return { active: this.limit.activeCount, queued: this.limit.pendingCount };
  }

  /**
   * Runs one API call under the limiter, the breaker and the time limits. `fn` must pass the signal
   * it is given to the SDK (`{ signal }`). `signal` cancels the call (also while it waits for a slot).
   */
  call<T>(fn: (client: OpenAI, signal: AbortSignal) => Promise<T>, signal?: AbortSignal): Promise<T> {
    return this.run((client, attempt) => fn(client, attempt.signal), signal, false);
  }

  /**
   * Like `call` for a streamed answer: yields what `fn` yields. The call holds its slot until the
   * stream ends; `timeoutMs` applies between items; stopping the iteration cancels the request.
   */
  async *stream<T>(
    fn: (client: OpenAI, signal: AbortSignal) => AsyncIterable<T>,
    signal?: AbortSignal,
  ): AsyncGenerator<T, void, undefined> {
    const consumer = new AbortController();
    const linked = signal ? AbortSignal.any([signal, consumer.signal]) : consumer.signal;
    const items: T[] = [];
    let done = false;
    let failed = false;
    let failure: unknown;
    let wake: (() => void) | undefined;
    const notify = (): void => {
      wake?.();
      wake = undefined;
    };
    const finished = this.run(
      async (client, attempt) => {
        for await (const item of fn(client, attempt.signal)) {
          attempt.alive();
          items.push(item);
          notify();
        }
      },
      linked,
      true,
    ).then(
      () => {
        done = true;
        notify();
      },
      (error: unknown) => {
        failed = true;
        failure = error;
        done = true;
        notify();
      },
    );
    try {
      for (;;) {
        if (items.length > 0) {
          yield items.shift()!;
          continue;
        }
        if (done) {
          if (failed) throw failure;
          return;
        }
        await new Promise<void>((resolve) => (wake = resolve));
      }
    } finally {
      // Finished, failed, or the consumer stopped early: in the last case this cancels the request.
      consumer.abort(this.cancelledError());
      await finished;
    }
  }

  /** Fails calls still waiting and cancels calls in flight; later calls fail at once. */
  close(): void {
    this.closing.abort(
      new RemoteEngineError(`remote ${this.kind} engine for ${this.displayUrl} is closed`, "closed"),
    );
  }

  // ------------------------------------------------------------------ internals

  private error(kind: RemoteErrorKind, what: string, status?: number, cause?: unknown): RemoteEngineError {
    return new RemoteEngineError(
      `remote ${this.kind} at ${this.displayUrl} ${what}`,
      kind,
      status,
      cause === undefined ? undefined : { cause },
    );
  }

  private timeoutError(ms: number): RemoteEngineError {
    return this.error("timeout", `timed out after ${ms} ms`);
  }

  private circuitOpenError(): RemoteEngineError {
    const remaining = this.resetAfterMs - (Date.now() - this.openedAt);
    const last = this.breaker.lastFailure;
    return this.error(
      "circuit-open",
      `is failing (circuit open after ${this.failureThreshold} consecutive failures); ` +
        `retrying after ${formatSeconds(remaining)}`,
      undefined,
      last && "error" in last ? last.error : undefined,
    );
  }

  /** Throws when a call cannot start: engine closed, caller cancelled, or circuit open. */
  private assertCanStart(signal: AbortSignal | undefined): void {
    if (this.closing.signal.aborted) throw this.closing.signal.reason as Error;
    if (signal?.aborted) throw this.cancelled(signal);
    if (this.breaker.state === CircuitState.Open && Date.now() - this.openedAt < this.resetAfterMs) {
      throw this.circuitOpenError();
    }
  }

  private cancelled(signal: AbortSignal): RemoteEngineError {
    const reason: unknown = signal.reason;
    return reason instanceof RemoteEngineError ? reason : this.cancelledError();
  }

  private cancelledError(cause?: unknown): RemoteEngineError {
    return new RemoteEngineError(
      `remote ${this.kind} request to ${this.displayUrl} was cancelled`,
      "aborted",
      undefined,
      cause === undefined ? undefined : { cause },
    );
  }

  private async run<T>(
    fn: (client: OpenAI, attempt: Attempt) => Promise<T>,
    signal: AbortSignal | undefined,
    idle: boolean,
  ): Promise<T> {
    this.assertCanStart(signal);
    const task = this.limit(async () => {
      // The state may have changed while the call waited for a slot.
      this.assertCanStart(signal);
      try {
        return await this.breaker.execute(() => this.attempt(fn, signal, idle));
      } catch (error) {
        if (error instanceof BrokenCircuitError) throw this.circuitOpenError();
        throw error;
      }
    });
    // A call cancelled (or an engine closed) while it waits for a slot fails now; its turn is a no-op.
    const cancellation = rejection(
      signal ? AbortSignal.any([signal, this.closing.signal]) : this.closing.signal,
    );
    task.catch(() => undefined);
    try {
      return await Promise.race([task, cancellation.promise]);
    } catch (error) {
      if (error instanceof RemoteEngineError) throw error;
      if (this.closing.signal.aborted) throw this.closing.signal.reason as Error;
      if (signal?.aborted) throw this.cancelled(signal);
      throw this.mapError(error);
    } finally {
      cancellation.dispose();
    }
  }

  /** One call in its slot, under the watchdog. Errors come out as RemoteEngineErrors. */
  private async attempt<T>(
    fn: (client: OpenAI, attempt: Attempt) => Promise<T>,
    signal: AbortSignal | undefined,
    idle: boolean,
  ): Promise<T> {
    const controller = new AbortController();
    const stop = (reason: RemoteEngineError): void => {
      if (!controller.signal.aborted) controller.abort(reason);
    };
    const onCancel = (): void => stop(signal ? this.cancelled(signal) : this.cancelledError());
    const onClose = (): void => stop(this.closing.signal.reason as RemoteEngineError);
    signal?.addEventListener("abort", onCancel, { once: true });
    this.closing.signal.addEventListener("abort", onClose, { once: true });
    let timer: NodeJS.Timeout | undefined;
    const arm = (ms: number): void => {
      clearTimeout(timer);
      timer = setTimeout(() => stop(this.timeoutError(ms)), ms);
    };
    arm(this.deadlineMs);
    const stopped = rejection(controller.signal);
    const work = Promise.resolve().then(() =>
      fn(this.sdk, {
        signal: controller.signal,
        alive: () => {
          if (idle) arm(this.timeoutMs);
        },
      }),
    );
    work.catch(() => undefined);
    try {
      return await Promise.race([work, stopped.promise]);
    } catch (error) {
      throw controller.signal.aborted
        ? (controller.signal.reason as RemoteEngineError)
        : this.mapError(error);
    } finally {
      clearTimeout(timer);
      stopped.dispose();
      signal?.removeEventListener("abort", onCancel);
      this.closing.signal.removeEventListener("abort", onClose);
      // Releases anything the SDK still holds (a body nobody will read).
      controller.abort();
    }
  }

  private mapError(error: unknown): RemoteEngineError {
    if (error instanceof RemoteEngineError) return error;
    if (error instanceof APIUserAbortError) return this.cancelledError(error);
    if (error instanceof APIConnectionTimeoutError) {
      return this.error("timeout", `timed out after ${this.timeoutMs} ms`, undefined, error);
    }
    if (error instanceof APIConnectionError) {
      return this.error("unreachable", `is unreachable: ${deepestCause(error)}`, undefined, error);
    }
    if (error instanceof APIError && typeof error.status === "number") {
      const status = error.status;
      const body: unknown = error.error;
      const message = truncate(
        serverMessage(body) ?? error.message.replace(new RegExp(`^${status}\\s*`, "u"), ""),
      );
      const retryable = status === 408 || status === 409 || status === 429 || status >= 500;
      return retryable
        ? this.error("server", `failed with HTTP ${status}: ${message}`, status, error)
        : this.error("rejected", `rejected the request with HTTP ${status}: ${message}`, status, error);
    }
    const message = error instanceof Error ? error.message : String(error);
    return this.error("invalid-response", `returned an unusable answer: ${message}`, undefined, error);
  }
}

export function createRemoteClient(kind: RemoteKind, options: RemoteEngineOptions): RemoteClient {
  return new RemoteClient(kind, options);
}
