/** Cancellation helpers for engines that honour an `AbortSignal` (see src/core/contracts.ts). */

/** The error a cancelled call rejects with: the signal's reason when it is an Error. */
export function abortError(signal: AbortSignal, what = "the request"): Error {
  const reason: unknown = signal.reason;
  if (reason instanceof Error) return reason;
  const error = new Error(`${what} was cancelled`);
  error.name = "AbortError";
  return error;
}

/** Throws `abortError` when the signal has fired. */
export function throwIfAborted(signal: AbortSignal | undefined, what?: string): void {
  if (signal?.aborted) throw abortError(signal, what);
}
