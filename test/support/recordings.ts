/**
 * How much recorded speech the files that replay many recordings to show one property use
 * (docs/testing.md, "Trimmed files"): by default a subset chosen so each behaviour is still covered
 * and can still fail; with `RELAY_TEST_FULL=1` (`npm run test:full`) the whole set.
 */
export const FULL_RECORDINGS = process.env.RELAY_TEST_FULL === "1";

/** `all` with RELAY_TEST_FULL=1, otherwise `kept` (a subset of `all`, listed in docs/testing.md). */
export function recordingsOf<T>(all: readonly T[], kept: readonly T[]): readonly T[] {
  return FULL_RECORDINGS ? all : kept;
}
