import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { RemoteEngineError, type RemoteErrorKind } from "../../src/engines/kit/remote/errors.js";
import { backoffBudgetMs, retryAfterMs, withRetries } from "../../src/engines/kit/remote/retry.js";

/** The retries of remote clients without an SDK (LibreTranslate), on a fake clock. */
beforeEach(() => {
  vi.useFakeTimers({ now: Date.parse("2025-01-01T00:00:00Z") });
});
afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

const failure = (kind: RemoteErrorKind, retryAfter?: number) =>
  new RemoteEngineError(`failed (${kind})`, kind, kind === "rejected" ? 400 : 503, {
    retryAfterMs: retryAfter,
  });

/** An attempt function that fails with `failures` in turn, then answers "ok"; counts its calls. */
function scripted(...failures: RemoteEngineError[]) {
  const calls: AbortSignal[] = [];
  return {
    calls,
    attempt: async (signal: AbortSignal) => {
      calls.push(signal);
      const next = failures.shift();
      if (next) throw next;
      return "ok";
    },
  };
}

const options = (extra: Partial<Parameters<typeof withRetries>[1]> = {}) => ({
  maxRetries: 2,
  deadline: Date.now() + 60_000,
  signal: new AbortController().signal,
  ...extra,
});

describe("Retry-After", () => {
  it("reads retry-after-ms, seconds and HTTP dates; nothing else", () => {
    expect(retryAfterMs(new Headers({ "retry-after-ms": "250" }))).toBe(250);
    expect(retryAfterMs(new Headers({ "retry-after": "3" }))).toBe(3000);
    expect(retryAfterMs(new Headers({ "retry-after": "Wed, 01 Jan 2025 00:00:10 GMT" }))).toBe(10_000);
    expect(retryAfterMs(new Headers({ "retry-after": "Tue, 31 Dec 2024 00:00:00 GMT" }))).toBe(0);
    expect(retryAfterMs(new Headers({ "retry-after": "soon" }))).toBeUndefined();
    expect(retryAfterMs(new Headers())).toBeUndefined();
  });
});

describe("withRetries", () => {
  it("waits what Retry-After asks before the next attempt", async () => {
    const { calls, attempt } = scripted(failure("server", 5_000));
    const result = withRetries(attempt, options());
    await vi.advanceTimersByTimeAsync(4_999);
    expect(calls).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(calls).toHaveLength(2);
    await expect(result).resolves.toBe("ok");
  });

  it("backs off 0.5 s then 1 s without Retry-After, on 5xx, timeouts and lost connections", async () => {
    vi.spyOn(Math, "random").mockReturnValue(0); // no jitter
    const { calls, attempt } = scripted(failure("timeout"), failure("unreachable"));
    const result = withRetries(attempt, options());
    await vi.advanceTimersByTimeAsync(499);
    expect(calls).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(calls).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(999);
    expect(calls).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(1);
    expect(calls).toHaveLength(3);
    await expect(result).resolves.toBe("ok");
    expect(backoffBudgetMs(2)).toBe(1_500);
  });

  it("shortens a backoff by at most a quarter (jitter)", async () => {
    vi.spyOn(Math, "random").mockReturnValue(0.999_999);
    const { calls, attempt } = scripted(failure("server"));
    const result = withRetries(attempt, options());
    await vi.advanceTimersByTimeAsync(374);
    expect(calls).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(2);
    expect(calls).toHaveLength(2);
    await expect(result).resolves.toBe("ok");
  });

  it("gives up after maxRetries with the last failure", async () => {
    const last = failure("server", 0);
    const { calls, attempt } = scripted(failure("server", 0), last, failure("server", 0));
    const result = withRetries(attempt, options({ maxRetries: 1 }));
    result.catch(() => undefined);
    await vi.runAllTimersAsync();
    await expect(result).rejects.toBe(last);
    expect(calls).toHaveLength(2);
  });

  it("never retries a rejected request or an unusable answer", async () => {
    for (const kind of ["rejected", "invalid-response", "aborted"] as const) {
      const first = failure(kind);
      const { calls, attempt } = scripted(first);
      await expect(withRetries(attempt, options())).rejects.toBe(first);
      expect(calls).toHaveLength(1);
    }
  });

  it("reports at once a server asking to wait beyond the deadline", async () => {
    const asked = failure("server", 30_000);
    const { calls, attempt } = scripted(asked);
    await expect(withRetries(attempt, options({ deadline: Date.now() + 10_000 }))).rejects.toBe(asked);
    expect(calls).toHaveLength(1);
  });

  it("makes no further attempt once its signal has fired, and fails with its reason", async () => {
    const controller = new AbortController();
    const { calls, attempt } = scripted(failure("server", 1_000));
    const result = withRetries(attempt, options({ signal: controller.signal }));
    result.catch(() => undefined);
    await vi.advanceTimersByTimeAsync(0);
    expect(calls).toHaveLength(1);
    const reason = failure("aborted");
    controller.abort(reason);
    expect(calls[0]!.aborted).toBe(true);
    await vi.runAllTimersAsync();
    await expect(result).rejects.toBe(reason);
    expect(calls).toHaveLength(1);
  });
});
