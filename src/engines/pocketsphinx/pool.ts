export interface PoolStats {
  /** Resources alive or being created; never above `max`. */
  readonly total: number;
  readonly idle: number;
  readonly leased: number;
  readonly creating: number;
  /** Callers queued for a resource. */
  readonly waiting: number;
  readonly max: number;
}

export interface PoolOptions<T> {
  readonly max: number;
  readonly create: () => Promise<T>;
  readonly destroy: (resource: T) => void;
  /** Names the pool in error messages. */
  readonly name: string;
  /**
   * What a resource was adapted to ("" as created): a caller asking for a key gets a resource with
   * that key or a fresh one ("" — the caller adapts it), never one adapted to another key, which is
   * replaced by a fresh one when no slot is free.
   */
  readonly keyOf?: (resource: T) => string;
}

interface Waiter<T> {
  readonly key: string;
  resolve(resource: T): void;
  reject(error: Error): void;
}

/**
 * A bounded pool of expensive resources created lazily and handed out exclusively. Callers beyond the
 * bound wait in FIFO order. Creations run one at a time so that a burst of sessions does not load the
 * model several times in parallel on the same cores.
 */
export class ResourcePool<T> {
  private readonly idle: T[] = [];
  private readonly leased = new Set<T>();
  private readonly waiters: Waiter<T>[] = [];
  private creating = 0;
  private creationChain: Promise<unknown> = Promise.resolve();
  private closed = false;
  private drained: (() => void) | undefined;

  constructor(private readonly options: PoolOptions<T>) {
    if (!Number.isInteger(options.max) || options.max < 1) {
      throw new Error(`${options.name}: pool size must be a positive integer, got ${options.max}`);
    }
  }

  stats(): PoolStats {
    const total = this.idle.length + this.leased.size + this.creating;
    return {
      total,
      idle: this.idle.length,
      leased: this.leased.size,
      creating: this.creating,
      waiting: this.waiters.length,
      max: this.options.max,
    };
  }

  /** A resource with `key` or a fresh one (see `keyOf`); the most recently used first. */
  acquire(key = ""): Promise<T> {
    if (this.closed) return Promise.reject(new Error(`${this.options.name} is closed`));
    const index = this.idleIndex(key);
    if (index >= 0) {
      const [resource] = this.idle.splice(index, 1) as [T];
      this.leased.add(resource);
      return Promise.resolve(resource);
    }
    if (this.stats().total < this.options.max) return this.createLeased();
    // Every slot is taken and the idle resources serve other keys: the least recently used is replaced.
    const replaced = this.idle.shift();
    if (replaced !== undefined) {
      this.options.destroy(replaced);
      return this.createLeased();
    }
    return new Promise<T>((resolve, reject) => this.waiters.push({ key, resolve, reject }));
  }

  /** Returns a healthy resource; the longest waiter gets it first (a fresh one if it has another key). */
  release(resource: T): void {
    if (!this.leased.delete(resource)) return;
    const waiter = this.closed ? undefined : this.waiters.shift();
    if (this.closed) {
      this.options.destroy(resource);
    } else if (waiter && this.fits(resource, waiter.key)) {
      this.leased.add(resource);
      waiter.resolve(resource);
    } else if (waiter) {
      this.options.destroy(resource);
      this.createLeased().then(waiter.resolve, waiter.reject);
    } else {
      this.idle.push(resource);
    }
    this.checkDrained();
  }

  /** Whether an idle resource has `key`. */
  hasIdle(key: string): boolean {
    const keyOf = this.options.keyOf ?? (() => "");
    return this.idle.some((resource) => keyOf(resource) === key);
  }

  private fits(resource: T, key: string): boolean {
    const has = this.options.keyOf?.(resource) ?? "";
    return has === key || has === "";
  }

  /** The idle resource to hand out for `key`: the last used with that key, else the last fresh one. */
  private idleIndex(key: string): number {
    const keyOf = this.options.keyOf ?? (() => "");
    const same = this.idle.findLastIndex((resource) => keyOf(resource) === key);
    return same >= 0 ? same : this.idle.findLastIndex((resource) => keyOf(resource) === "");
  }

  /** Destroys a resource whose state is unknown (a failed native call) and frees its slot. */
  discard(resource: T): void {
    if (!this.leased.delete(resource)) return;
    this.options.destroy(resource);
    this.serveWaiterWithNew();
    this.checkDrained();
  }

  /**
   * Rejects queued callers, waits until every leased resource is back and every creation has finished,
   * then destroys them all. Owners of leased resources must be told to give them back (the engine aborts
   * its streams) or this waits for them.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const waiter of this.waiters.splice(0)) waiter.reject(new Error(`${this.options.name} is closed`));
    if (this.leased.size > 0 || this.creating > 0) {
      await new Promise<void>((resolve) => {
        this.drained = resolve;
      });
    }
    for (const resource of this.idle.splice(0)) this.options.destroy(resource);
  }

  private createLeased(): Promise<T> {
    this.creating++;
    const created = this.creationChain.then(() => this.options.create());
    this.creationChain = created.catch(() => undefined);
    return created.then(
      (resource) => {
        this.creating--;
        if (this.closed) {
          this.options.destroy(resource);
          this.checkDrained();
          throw new Error(`${this.options.name} is closed`);
        }
        this.leased.add(resource);
        return resource;
      },
      (error: unknown) => {
        this.creating--;
        // The slot is free again: a queued caller would otherwise wait for a release that never comes.
        this.serveWaiterWithNew();
        this.checkDrained();
        throw error;
      },
    );
  }

  private serveWaiterWithNew(): void {
    const waiter = this.closed ? undefined : this.waiters.shift();
    if (waiter) this.createLeased().then(waiter.resolve, waiter.reject);
  }

  private checkDrained(): void {
    if (this.drained && this.leased.size === 0 && this.creating === 0) {
      this.drained();
      this.drained = undefined;
    }
  }
}
