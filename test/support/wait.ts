/**
 * How long a test waits for something to happen: generous, because on a loaded 2-core machine
 * real-time speech runs at a third of its quiet speed or less, and a wait's limit is there to end a
 * hung test, never to judge a slow one (docs/testing.md). vitest.config.ts makes it expect.poll's
 * default; vi.waitFor and Playwright take it explicitly.
 */
export const WAIT = { timeout: 300_000, interval: 250 } as const;
