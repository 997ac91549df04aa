/**
 * A single-consumer async queue without a bound: producers `push`, one consumer iterates with
 * `for await`. For streams whose consumer bounds them itself: the pipeline's output events (the
 * client connection's slow-reader policy), rooms' audio clips, and the sentences of one neural
 * synthesis (as many as the request's text has). Links between the pipeline's
 * stages are `BoundedQueue`s (queue.ts), each with its own drop rule.
 */
export class Channel<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private waiting: ((result: IteratorResult<T>) => void) | undefined;
  private closed = false;

  push(item: T): void {
    if (this.closed) return;
    const waiter = this.waiting;
    if (waiter) {
      this.waiting = undefined;
      waiter({ value: item, done: false });
    } else {
      this.items.push(item);
    }
  }

  /** Ends iteration once the queued items are consumed. */
  close(): void {
    this.closed = true;
    const waiter = this.waiting;
    this.waiting = undefined;
    waiter?.({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: () => {
        const item = this.items.shift();
        if (item !== undefined) return Promise.resolve({ value: item, done: false });
        if (this.closed) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve) => (this.waiting = resolve));
      },
    };
  }
}
