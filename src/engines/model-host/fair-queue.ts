/**
 * A bounded queue in front of a shared engine that serves accounts in turn: when a slot frees, the
 * account served longest ago that has work waiting goes next, so one account's flood waits behind
 * its own work, not in front of everyone else's. Bounds: `maxQueued` waiting in all, and
 * `maxQueuedPerAccount` for any one account; beyond either the work is refused at once with
 * `EngineBusyError` (the caller's next engine may take it). A slot is held until the work's
 * promise settles, which for a model host is when the host has stopped the work (host.ts).
 *
 * Hand-written rather than a library's: cockatiel's bulkhead and p-limit are first-in first-out
 * across all callers, which is exactly the unfairness this removes.
 */
import { EngineBusyError } from "../busy.js";
import { abortError } from "../cancellation.js";

export interface FairQueueLimits {
  /** Pieces of work running at once. */
  readonly concurrency: number;
  readonly maxQueued: number;
  readonly maxQueuedPerAccount: number;
}

interface Waiting {
  readonly start: () => void;
}

/** The account of work that names none (embedders, the service's own calls). */
export const NO_ACCOUNT = "";

export class FairQueue {
  private running = 0;
  /** Waiting work by account; an account's place in the map is its turn (served: to the back). */
  private readonly waiting = new Map<string, Waiting[]>();
  private queued = 0;

  constructor(
    private readonly what: string,
    private readonly limits: FairQueueLimits,
  ) {}

  run<T>(account: string, work: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    if (signal?.aborted) return Promise.reject(abortError(signal));
    if (this.running < this.limits.concurrency && this.queued === 0) return this.execute(work);
    const mine = this.waiting.get(account) ?? [];
    if (this.queued >= this.limits.maxQueued)
      return Promise.reject(new EngineBusyError(`${this.what} is busy (${this.queued} waiting)`));
    if (mine.length >= this.limits.maxQueuedPerAccount) {
      return Promise.reject(
        new EngineBusyError(`${this.what} is busy: this account has ${mine.length} waiting already`),
      );
    }
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => {
        const at = mine.indexOf(entry);
        if (at < 0) return;
        mine.splice(at, 1);
        this.queued--;
        if (mine.length === 0) this.waiting.delete(account);
        reject(abortError(signal!));
      };
      const entry: Waiting = {
        start: () => {
          signal?.removeEventListener("abort", onAbort);
          this.execute(work).then(resolve, reject);
        },
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      mine.push(entry);
      this.queued++;
      this.waiting.set(account, mine);
    });
  }

  /** Work running and waiting (for tests and benchmarks). */
  stats(): { running: number; queued: number; accounts: number } {
    return { running: this.running, queued: this.queued, accounts: this.waiting.size };
  }

  private execute<T>(work: () => Promise<T>): Promise<T> {
    this.running++;
    const settled = Promise.resolve().then(work);
    void settled
      .catch(() => undefined)
      .finally(() => {
        this.running--;
        this.next();
      });
    return settled;
  }

  private next(): void {
    while (this.running < this.limits.concurrency) {
      const turn = this.waiting.entries().next();
      if (turn.done) return;
      const [account, mine] = turn.value;
      const entry = mine.shift()!;
      this.queued--;
      // Served: the account goes to the back of the line, behind every other waiting account.
      this.waiting.delete(account);
      if (mine.length > 0) this.waiting.set(account, mine);
      entry.start();
    }
  }
}
