/**
 * How long a test waits for something to happen: generous, because on a loaded 2-core machine
 * real-time speech runs at a third of its quiet speed or less, and a wait's limit is there to end a
 * hung test, never to judge a slow one (docs/testing.md). vitest.config.ts makes it expect.poll's
 * default; vi.waitFor and Playwright take it explicitly.
 */
export const WAIT = { timeout: 300_000, interval: 250 } as const;

/**
 * Resolves once `condition` holds, checked every 20 ms (tests that count events in flight need the
 * fine grain); fails naming `what` after WAIT's limit. For a value to reach an expected one, use
 * `expect.poll` (WAIT is its default).
 */
export async function until(condition: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const started = Date.now();
  while (!(await condition())) {
    if (Date.now() - started > WAIT.timeout) throw new Error(`gave up waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
