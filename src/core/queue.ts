/**
 * The bounded queue between two pipeline stages: one producer side, one consumer iterating with
 * `for await`. Its bound is explicit (`capacity`, in the units `sizeOf` counts), and each producer
 * call says what happens at the bound, so every link states its own drop rule:
 *
 * - `offer`: the item is queued if there is room, otherwise refused (the caller drops it and says so);
 * - `put`: waits for room (backpressure: the producing stage slows down);
 * - `force`: always queued, beyond the bound (control frames, which are few and must arrive).
 *
 * An item counts against the bound from the moment it is queued until the consumer's loop takes
 * it, so what is waiting is what the consumer has not started on.
 */
export class BoundedQueue<T> implements AsyncIterable<T> {
  /**
   * The queued items are `items[head…]`: taking one advances `head` instead of `shift()`, which
   * moves every item behind it (a flooded intake queue held thousands of frames, and each take cost
   * that many moves). The taken prefix is dropped once it is most of the array.
   */
  private items: (T | undefined)[] = [];
  private head = 0;
  private used = 0;
  private closed = false;
  /** The consumer took an item and has not come back for the next: it is working on it. */
  private holding = false;
  private wakeConsumer: (() => void) | undefined;
  private readonly roomWaiters: (() => void)[] = [];

  constructor(
    readonly capacity: number,
    private readonly sizeOf: (item: T) => number = () => 1,
  ) {}

  /** What is queued, in the units of `capacity`. */
  get size(): number {
    return this.used;
  }

  get length(): number {
    return this.items.length - this.head;
  }

  /** Nothing is queued and the consumer is waiting for more (not working on an item it took). */
  get idle(): boolean {
    return this.length === 0 && !this.holding;
  }

  /** Queues the item if it fits; false when it does not (or the queue is closed). */
  offer(item: T): boolean {
    const size = this.sizeOf(item);
    if (this.closed || this.used + size > this.capacity) return false;
    this.enqueue(item, size);
    return true;
  }

  /** Queues the item once there is room; resolves at once (dropping it) when the queue is closed. */
  async put(item: T): Promise<void> {
    const size = this.sizeOf(item);
    while (!this.closed && this.used > 0 && this.used + size > this.capacity)
      await new Promise<void>((resolve) => this.roomWaiters.push(resolve));
    if (!this.closed) this.enqueue(item, size);
  }

  /** Queues the item whatever the bound (control frames). */
  force(item: T): void {
    if (!this.closed) this.enqueue(item, this.sizeOf(item));
  }

  /** Removes the queued items `matches` selects (an item made stale by a newer one). */
  remove(matches: (item: T) => boolean): void {
    for (let i = this.items.length - 1; i >= this.head; i--) {
      if (!matches(this.items[i]!)) continue;
      this.used -= this.sizeOf(this.items[i]!);
      this.items.splice(i, 1);
    }
    this.makeRoom();
  }

  /** Drops everything queued (a cancel). */
  clear(): void {
    this.items = [];
    this.head = 0;
    this.used = 0;
    this.makeRoom();
  }

  /** Ends iteration once the queued items are consumed; producers waiting for room give up. */
  close(): void {
    this.closed = true;
    this.wake();
    this.makeRoom();
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return { next: () => this.next() };
  }

  private async next(): Promise<IteratorResult<T>> {
    this.holding = false;
    while (this.length === 0 && !this.closed)
      await new Promise<void>((resolve) => (this.wakeConsumer = resolve));
    if (this.length === 0) return { value: undefined, done: true };
    const item = this.items[this.head]!;
    this.items[this.head++] = undefined; // let the item be collected
    if (this.head === this.items.length) {
      this.items = [];
      this.head = 0;
    } else if (this.head >= 1024 && this.head * 2 >= this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    this.used -= this.sizeOf(item);
    this.makeRoom();
    this.holding = true;
    return { value: item, done: false };
  }

  private enqueue(item: T, size: number): void {
    this.items.push(item);
    this.used += size;
    this.wake();
  }

  private wake(): void {
    const wake = this.wakeConsumer;
    this.wakeConsumer = undefined;
    wake?.();
  }

  private makeRoom(): void {
    for (const resolve of this.roomWaiters.splice(0)) resolve();
  }
}
