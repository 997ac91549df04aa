/** Why a decode runs: a final result is worth more than a refreshed partial one and goes first. */
export type DecodeKind = "final" | "partial";

/** A decode started on a context: its result, and a request to stop (which may only discard it). */
export interface RunningDecode<T> {
  readonly result: Promise<T>;
  cancel(): void;
}

export interface ScheduledDecode<T> {
  readonly result: Promise<T>;
  /** A queued decode is dropped (its result rejects with `DecodeCancelledError`); a running one is stopped. */
  cancel(): void;
}

export interface DecodeStats {
  /** Native contexts (loaded models); the bound on concurrent decodes. */
  readonly contexts: number;
  /** Decodes running now. */
  readonly busy: number;
  readonly queued: number;
  /** Most decodes ever running at once. */
  readonly peakBusy: number;
  /** Decodes started (handed to a context) since the engine was created. */
  readonly started: { readonly final: number; readonly partial: number };
  /** Contexts set aside because their decode overran the deadline and has not finished since. */
  readonly stuck: number;
}

export interface DecodeSchedulerOptions {
  /**
   * A decode running longer than this is given up: its caller gets an error at once, and its context
   * is set aside until the native call returns (whisper.cpp cannot be interrupted, and a failure
   * inside the addon can leave the call pending for ever). Default: no deadline.
   */
  readonly decodeTimeoutMs?: number;
}

export class DecodeCancelledError extends Error {
  constructor(message = "whisper.cpp decode cancelled") {
    super(message);
    this.name = "DecodeCancelledError";
  }
}

interface Job<C> {
  readonly owner: object;
  readonly kind: DecodeKind;
  readonly start: (context: C) => RunningDecode<unknown>;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
  running?: RunningDecode<unknown>;
  cancelled: boolean;
}

/**
 * Runs decodes on a fixed set of native contexts, one decode per context at a time (whisper.cpp
 * contexts are not re-entrant; the addon would park a second call on a thread-pool thread behind a
 * mutex). Decodes beyond the contexts wait: finals before partials, first come first served within
 * each kind. A decode's work function runs only when it gets a context, so it reads the newest audio.
 */
export class DecodeScheduler<C> {
  private readonly idle: C[];
  private readonly queue: Job<C>[] = [];
  private readonly running = new Set<Job<C>>();
  private readonly idleWaiters: (() => void)[] = [];
  private peakBusy = 0;
  private readonly started = { final: 0, partial: 0 };
  private readonly stuck = new Set<C>();
  private closed = false;

  constructor(
    private readonly contexts: readonly C[],
    private readonly options: DecodeSchedulerOptions = {},
  ) {
    if (contexts.length === 0) throw new Error("DecodeScheduler needs at least one context");
    this.idle = [...contexts];
  }

  stats(): DecodeStats {
    return {
      contexts: this.contexts.length,
      busy: this.running.size,
      queued: this.queue.length,
      peakBusy: this.peakBusy,
      started: { ...this.started },
      stuck: this.stuck.size,
    };
  }

  schedule<T>(owner: object, kind: DecodeKind, start: (context: C) => RunningDecode<T>): ScheduledDecode<T> {
    if (this.closed) {
      return { result: Promise.reject(new Error("whisper.cpp engine is closed")), cancel: () => undefined };
    }
    if (this.allStuck()) return { result: Promise.reject(this.allStuckError()), cancel: () => undefined };
    let job!: Job<C>;
    const result = new Promise<T>((resolve, reject) => {
      job = { owner, kind, start, resolve: resolve as (value: unknown) => void, reject, cancelled: false };
    });
    this.queue.push(job);
    this.pump();
    return { result, cancel: () => this.cancel(job) };
  }

  /** Cancels every queued or running decode of `owner`. */
  cancelAll(owner: object): void {
    for (const job of [...this.queue, ...this.running]) if (job.owner === owner) this.cancel(job);
  }

  /** Resolves once nothing runs and nothing waits (for tests and orderly shutdown). */
  whenIdle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /**
   * Rejects queued decodes, lets running ones finish, and hands back the contexts that are free
   * (a stuck one may still be in use by native code and must not be released).
   */
  async close(): Promise<C[]> {
    this.closed = true;
    for (const job of this.queue.splice(0)) job.reject(new Error("whisper.cpp engine is closed"));
    await this.whenIdle();
    return this.contexts.filter((context) => !this.stuck.has(context));
  }

  private cancel(job: Job<C>): void {
    if (job.cancelled) return;
    job.cancelled = true;
    const index = this.queue.indexOf(job);
    if (index >= 0) {
      this.queue.splice(index, 1);
      job.reject(new DecodeCancelledError());
      this.checkIdle();
    } else {
      job.running?.cancel();
    }
  }

  private next(): Job<C> | undefined {
    const index = this.queue.findIndex((job) => job.kind === "final");
    return this.queue.splice(index >= 0 ? index : 0, 1)[0];
  }

  private pump(): void {
    while (this.idle.length > 0 && this.queue.length > 0) {
      const context = this.idle.pop()!;
      const job = this.next()!;
      this.running.add(job);
      this.started[job.kind]++;
      this.peakBusy = Math.max(this.peakBusy, this.running.size);
      let running: RunningDecode<unknown>;
      try {
        running = job.start(context);
      } catch (error) {
        running = { result: Promise.reject(error), cancel: () => undefined };
      }
      job.running = running;
      const deadline = this.deadline(job, context);
      const settle = (): void => {
        clearTimeout(deadline);
        this.running.delete(job);
        // A context given up on comes back once its decode has really returned.
        this.stuck.delete(context);
        this.idle.push(context);
        this.pump();
        this.checkIdle();
      };
      // The owner hears of its result before anyone waiting for the scheduler to be idle.
      running.result.then(
        (value) => {
          job.resolve(value);
          settle();
        },
        (error: unknown) => {
          job.reject(error);
          settle();
        },
      );
    }
  }

  /** Gives up on the job's decode when it overruns; the context stays out of use until it returns. */
  private deadline(job: Job<C>, context: C): NodeJS.Timeout | undefined {
    const ms = this.options.decodeTimeoutMs;
    if (ms === undefined) return undefined;
    return setTimeout(() => {
      this.running.delete(job);
      this.stuck.add(context);
      // Where the build can interrupt whisper.cpp, the context comes back as soon as it stops.
      job.running?.cancel();
      job.reject(
        new Error(
          `whisper.cpp decode did not finish within ${ms / 1000} s; its model copy is set aside until it does`,
        ),
      );
      if (this.allStuck()) for (const queued of this.queue.splice(0)) queued.reject(this.allStuckError());
      this.checkIdle();
    }, ms);
  }

  private allStuck(): boolean {
    return this.stuck.size === this.contexts.length;
  }

  private allStuckError(): Error {
    return new Error(
      `every whisper.cpp model copy (${this.contexts.length}) is held by a decode that overran its deadline`,
    );
  }

  private isIdle(): boolean {
    return this.queue.length === 0 && this.running.size === 0;
  }

  /**
   * Idle waiters are told after the event loop's current turn, so that everything the last result set
   * off (an owner storing it, a follow-up decode being queued) has happened first.
   */
  private checkIdle(): void {
    if (!this.isIdle() || this.idleWaiters.length === 0) return;
    setImmediate(() => {
      if (this.isIdle()) for (const resolve of this.idleWaiters.splice(0)) resolve();
    });
  }
}
