/**
 * Retries of remote calls: the backoff of the OpenAI SDK (which retries the OpenAI-compatible
 * engines itself), and `withRetries`, the same policy (cockatiel) for clients without an SDK.
 */
import { DelegateBackoff, handleWhen, retry, type IRetryBackoffContext } from "cockatiel";
import { RemoteEngineError, type RemoteErrorKind } from "./errors.js";

/** The wait before the first retry, doubling for each further one up to `MAX_BACKOFF_MS`. */
const INITIAL_BACKOFF_MS = 500;
const MAX_BACKOFF_MS = 8_000;

/** The wait before retry number `retry` (0 for the first): up to 25 % shorter (jitter). */
export function backoffMs(retry: number): number {
  return Math.min(INITIAL_BACKOFF_MS * 2 ** retry, MAX_BACKOFF_MS) * (1 - Math.random() * 0.25);
}

/** The longest the backoffs before `maxRetries` retries can add up to. */
export function backoffBudgetMs(maxRetries: number): number {
  let total = 0;
  for (let retry = 0; retry < maxRetries; retry++)
    total += Math.min(INITIAL_BACKOFF_MS * 2 ** retry, MAX_BACKOFF_MS);
  return total;
}

/**
 * How long an answer asks to wait before another attempt: `retry-after-ms` (as the OpenAI SDK reads
 * it), else `Retry-After` in seconds or as an HTTP date. Undefined when it does not say.
 */
export function retryAfterMs(headers: Headers): number | undefined {
  const ms = Number.parseFloat(headers.get("retry-after-ms") ?? "");
  if (Number.isFinite(ms) && ms >= 0) return ms;
  const value = headers.get("retry-after")?.trim();
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

/** Failures another attempt may cure; a rejected request would only be rejected again. */
const RETRIED: ReadonlySet<RemoteErrorKind> = new Set(["server", "timeout", "unreachable"]);

export interface RetryOptions {
  /** Attempts after the first. */
  readonly maxRetries: number;
  /** When the whole call must be over (epoch ms): a longer wait is not started. */
  readonly deadline: number;
  /** Stops the retries (and is handed to every attempt). */
  readonly signal: AbortSignal;
}

/**
 * Runs `attempt` and, after a `server`, `timeout` or `unreachable` failure, runs it again up to
 * `maxRetries` times: after the wait the failure's `retryAfterMs` asks for, else the backoff. A
 * server asking to wait beyond the deadline gets no retry (its own error is reported at once).
 */
export function withRetries<T>(
  attempt: (signal: AbortSignal) => Promise<T>,
  options: RetryOptions,
): Promise<T> {
  const policy = retry(
    handleWhen(
      (error) =>
        error instanceof RemoteEngineError &&
        RETRIED.has(error.kind) &&
        Date.now() + (error.retryAfterMs ?? 0) < options.deadline,
    ),
    {
      maxAttempts: options.maxRetries,
      backoff: new DelegateBackoff((context: IRetryBackoffContext<unknown>) => {
        const failure = "error" in context.result ? context.result.error : undefined;
        const asked = failure instanceof RemoteEngineError ? failure.retryAfterMs : undefined;
        return asked ?? backoffMs(context.attempt - 1);
      }),
    },
  );
  return policy.execute(({ signal }) => {
    // cockatiel's wait between attempts is not cut short by the signal: nothing is sent after it fired.
    signal.throwIfAborted();
    return attempt(signal);
  }, options.signal);
}
