/**
 * Bounded-concurrency map for the per-segment stages, on `p-limit`. Separate because it adds what
 * p-limit leaves to the caller: no call starts after the first failure or once `signal` is aborted,
 * and the map fails only after every started call has settled, so no call is still writing into the
 * dubbed track or the work directory when the pipeline closes or removes them.
 */
import pLimit from "p-limit";

/**
 * Maps with at most `limit` calls in flight (started in input order), results in input order. Each
 * call checks `signal` before starting; on the first error (or abort) no further call starts, and that
 * error is thrown once the calls already running have finished.
 */
export async function mapLimit<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Promise<R>,
  signal?: AbortSignal,
): Promise<R[]> {
  const run = pLimit(Math.max(1, Math.floor(limit)));
  const results = new Array<R>(items.length);
  let failure: { readonly error: unknown } | undefined;
  // The limited calls never reject (failures are recorded instead), so this waits for all of them.
  await Promise.all(
    items.map((item, index) =>
      run(async () => {
        if (failure) return;
        try {
          signal?.throwIfAborted();
          results[index] = await fn(item, index);
        } catch (error) {
          failure ??= { error };
        }
      }),
    ),
  );
  if (failure) throw failure.error;
  return results;
}
