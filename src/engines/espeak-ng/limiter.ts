/** Runs at most `limit` tasks at once; waiting tasks start in arrival (FIFO) order. */
export class ConcurrencyLimiter {
  private running = 0;
  private readonly waiting: { start: () => void; fail: (error: Error) => void }[] = [];
  private closedError: Error | undefined;

  constructor(private readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1)
      throw new Error(`concurrency limit must be a positive integer, got ${limit}`);
  }

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.closedError) throw this.closedError;
    if (this.running >= this.limit) {
      await new Promise<void>((start, fail) => this.waiting.push({ start, fail }));
    } else {
      this.running++;
    }
    try {
      return await task();
    } finally {
      // The slot passes straight to the next waiter, so `running` only drops when nobody waits.
      const next = this.waiting.shift();
      if (next) next.start();
      else this.running--;
    }
  }

  /** Rejects every waiting task with `error`; running tasks finish (or are killed by their owner). */
  close(error: Error): void {
    this.closedError = error;
    for (const waiter of this.waiting.splice(0)) waiter.fail(error);
  }
}
