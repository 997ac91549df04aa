/**
 * What every remote engine wraps its calls in, whatever protocol it speaks: a concurrency limit, a
 * circuit breaker and time limits, with failures reported as RemoteEngineErrors naming the server.
 *
 * - Retries happen inside a call (the OpenAI SDK's own, or `withRetries` in retry.ts, on
 *   408/409/429/5xx, connection errors and timeouts): the breaker and the watchdog see the call
 *   after its retries.
 * - Time limits: `timeoutMs` bounds each attempt (the client applies it). A watchdog bounds the
 *   whole call (every attempt, the backoff between them and reading the body), so a server that
 *   stalls mid-body or asks for a long Retry-After cannot hang a session; streamed answers instead
 *   get `timeoutMs` between chunks.
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
import pLimit, { type LimitFunction } from "p-limit";
import {
  RemoteEngineError,
  type RemoteErrorKind,
  type RemoteErrorOptions,
  type RemoteKind,
} from "./errors.js";
import { backoffBudgetMs } from "./retry.js";

export interface CircuitOptions {
  /** Consecutive failed calls that open the circuit. Default 5. */
  readonly failureThreshold?: number;
  /** How long an open circuit fails calls at once before it lets a trial call through. Default 30 000. */
  readonly resetAfterMs?: number;
}

/** How every remote engine's calls are limited, retried and timed out. */
export interface ResilienceOptions {
  /** Per-attempt limit (streams: also between chunks). Default 30 000. */
  readonly timeoutMs?: number;
  /** Retries of a failed attempt (408/409/429/5xx, connection errors, timeouts). Default 2. */
  readonly maxRetries?: number;
  /** Calls in flight at once; further calls queue. Default 4. */
  readonly concurrency?: number;
  readonly circuit?: CircuitOptions;
}

export type CircuitStatus = "closed" | "open" | "half-open";

/** Handed to a call's function: its cancellation signal and when the whole call must be over. */
export interface CallContext {
  readonly signal: AbortSignal;
  /** Epoch ms at which the watchdog stops the call. */
  readonly deadline: number;
}

/** Failures that say the server is unwell (and so count towards opening the circuit). */
const COUNTED: ReadonlySet<RemoteErrorKind> = new Set([
  "timeout",
  "server",
  "unreachable",
  "invalid-response",
]);

const DEFAULT_TIMEOUT_MS = 30_000;
const DEFAULT_MAX_RETRIES = 2;
const DEFAULT_CONCURRENCY = 4;
const DEFAULT_FAILURE_THRESHOLD = 5;
const DEFAULT_RESET_AFTER_MS = 30_000;
/** Slack the whole-call watchdog allows beyond attempts and backoff (connection set-up, body reading). */
const WATCHDOG_SLACK_MS = 1_000;

function checkInteger(kind: RemoteKind, name: string, value: number, min: number): number {
  if (!Number.isInteger(value) || value < min) {
    throw new Error(`remote ${kind}: ${name} must be an integer ≥ ${min}, got ${value}`);
  }
  return value;
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

/** One call in its slot: what the call's function gets, and the stream keep-alive. */
interface Attempt extends CallContext {
  /** Streams: a chunk arrived, so the idle timeout starts again. */
  alive(): void;
}

export class RemoteGuard {
  readonly timeoutMs: number;
  readonly maxRetries: number;
  readonly concurrency: number;
  readonly failureThreshold: number;
  readonly resetAfterMs: number;

  private readonly limit: LimitFunction;
  private readonly breaker: CircuitBreakerPolicy;
  private readonly closing = new AbortController();
  /** Whole-call watchdog: every attempt, the backoff between them, and some slack. */
  private readonly deadlineMs: number;
  private openedAt = 0;

  /**
   * `displayUrl` names the server in errors; `mapError` turns what the client's own code throws
   * (other than RemoteEngineErrors) into one, with `error` below.
   */
  constructor(
    readonly kind: RemoteKind,
    readonly displayUrl: string,
    options: ResilienceOptions,
    private readonly mapError: (error: unknown) => RemoteEngineError,
  ) {
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
    this.deadlineMs =
      this.timeoutMs * (this.maxRetries + 1) + backoffBudgetMs(this.maxRetries) + WATCHDOG_SLACK_MS;
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
   * Runs one call under the limiter, the breaker and the time limits. `fn` must stop its work when
   * the context's signal aborts. `signal` cancels the call (also while it waits for a slot).
   */
  call<T>(fn: (context: CallContext) => Promise<T>, signal?: AbortSignal): Promise<T> {
    return this.run(fn, signal, false);
  }

  /**
   * Like `call` for a streamed answer: yields what `fn` yields. The call holds its slot until the
   * stream ends; `timeoutMs` applies between items; stopping the iteration cancels the request.
   */
  async *stream<T>(
    fn: (context: CallContext) => AsyncIterable<T>,
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
      async (attempt) => {
        for await (const item of fn(attempt)) {
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

  /** An error naming the server: `remote <kind> at <url> <what>`. */
  error(
    kind: RemoteErrorKind,
    what: string,
    status?: number,
    options?: RemoteErrorOptions,
  ): RemoteEngineError {
    return new RemoteEngineError(`remote ${this.kind} at ${this.displayUrl} ${what}`, kind, status, options);
  }

  cancelledError(cause?: unknown): RemoteEngineError {
    return new RemoteEngineError(
      `remote ${this.kind} request to ${this.displayUrl} was cancelled`,
      "aborted",
      undefined,
      cause === undefined ? undefined : { cause },
    );
  }

  timeoutError(ms: number, cause?: unknown): RemoteEngineError {
    return this.error(
      "timeout",
      `timed out after ${ms} ms`,
      undefined,
      cause === undefined ? undefined : { cause },
    );
  }

  // ------------------------------------------------------------------ internals

  private circuitOpenError(): RemoteEngineError {
    const remaining = this.resetAfterMs - (Date.now() - this.openedAt);
    const last = this.breaker.lastFailure;
    return this.error(
      "circuit-open",
      `is failing (circuit open after ${this.failureThreshold} consecutive failures); ` +
        `retrying after ${formatSeconds(remaining)}`,
      undefined,
      last && "error" in last ? { cause: last.error } : undefined,
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

  private toRemoteError(error: unknown): RemoteEngineError {
    return error instanceof RemoteEngineError ? error : this.mapError(error);
  }

  private async run<T>(
    fn: (attempt: Attempt) => Promise<T>,
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
      throw this.toRemoteError(error);
    } finally {
      cancellation.dispose();
    }
  }

  /** One call in its slot, under the watchdog. Errors come out as RemoteEngineErrors. */
  private async attempt<T>(
    fn: (attempt: Attempt) => Promise<T>,
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
    const deadline = Date.now() + this.deadlineMs;
    const stopped = rejection(controller.signal);
    const work = Promise.resolve().then(() =>
      fn({
        signal: controller.signal,
        deadline,
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
        : this.toRemoteError(error);
    } finally {
      clearTimeout(timer);
      stopped.dispose();
      signal?.removeEventListener("abort", onCancel);
      this.closing.signal.removeEventListener("abort", onClose);
      // Releases anything the client still holds (a body nobody will read).
      controller.abort();
    }
  }
}
