/**
 * A bounded queue in front of a shared engine that serves accounts in turn: when a slot frees, the
 * account served longest ago that has work waiting goes next, so one account's flood waits behind
 * its own work, not in front of everyone else's. And no account holds every slot
 * (`maxRunningPerAccount`, default all but one): work already running cannot be stopped mid-pass, so
 * a slot kept free is what lets another account start at once rather than after the flood's passes. Bounds: `maxQueued` waiting in all, and
 * `maxQueuedPerAccount` for any one account; beyond either the work is refused at once with
 * `EngineBusyError` (the caller's next engine may take it). A slot is held until the work's
 * promise settles, which for a model host is when the host has stopped the work (host.ts).
 *
 * Hand-written rather than a library's: cockatiel's bulkhead and p-limit are first-in first-out
 * across all callers, which is exactly the unfairness this removes.
 */
import { EngineBusyError } from "../../../core/busy.js";
import { abortError } from "../../../core/cancellation.js";

export interface FairQueueLimits {
  /** Pieces of work running at once. */
  readonly concurrency: number;
  /** Pieces of one account's work running at once (default `concurrency - 1`, at least 1). */
  readonly maxRunningPerAccount?: number;
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
  private readonly runningBy = new Map<string, number>();
  private readonly perAccount: number;
  /** Waiting work by account. */
  private readonly waiting = new Map<string, Waiting[]>();
  /** When each account last started work (a counter): the least recent goes next. */
  private readonly served = new Map<string, number>();
  private starts = 0;
  private queued = 0;

  constructor(
    private readonly what: string,
    private readonly limits: FairQueueLimits,
  ) {
    this.perAccount = limits.maxRunningPerAccount ?? Math.max(1, limits.concurrency - 1);
  }

  run<T>(account: string, work: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    if (signal?.aborted) return Promise.reject(abortError(signal));
    if (this.running < this.limits.concurrency && this.queued === 0 && this.mayStart(account))
      return this.execute(account, work);
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
          this.execute(account, work).then(resolve, reject);
        },
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      mine.push(entry);
      this.queued++;
      this.waiting.set(account, mine);
      // A free slot others may not take (their share is running) is this account's at once.
      this.next();
    });
  }

  /** Work running and waiting (for tests and benchmarks). */
  stats(): { running: number; queued: number; accounts: number } {
    return { running: this.running, queued: this.queued, accounts: this.waiting.size };
  }

  private mayStart(account: string): boolean {
    return (this.runningBy.get(account) ?? 0) < this.perAccount;
  }

  private execute<T>(account: string, work: () => Promise<T>): Promise<T> {
    this.running++;
    this.served.delete(account);
    this.served.set(account, this.starts++);
    // Bounded: accounts long unserved are forgotten (they come first, as new ones do).
    if (this.served.size > 1024) this.served.delete(this.served.keys().next().value!);
    this.runningBy.set(account, (this.runningBy.get(account) ?? 0) + 1);
    const settled = Promise.resolve().then(work);
    void settled
      .catch(() => undefined)
      .finally(() => {
        this.running--;
        const left = this.runningBy.get(account)! - 1;
        if (left === 0) this.runningBy.delete(account);
        else this.runningBy.set(account, left);
        this.next();
      });
    return settled;
  }

  private next(): void {
    while (this.running < this.limits.concurrency) {
      // The account served longest ago among those that may start more.
      const turnOf = (account: string) => this.served.get(account) ?? -1;
      const turn = [...this.waiting.entries()]
        .filter(([account]) => this.mayStart(account))
        .reduce<[string, Waiting[]] | undefined>(
          (best, entry) => (best === undefined || turnOf(entry[0]) < turnOf(best[0]) ? entry : best),
          undefined,
        );
      if (!turn) return;
      const [account, mine] = turn;
      const entry = mine.shift()!;
      this.queued--;
      if (mine.length === 0) this.waiting.delete(account);
      entry.start();
    }
  }
}
