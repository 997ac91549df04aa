/**
 * The sentences waiting for the translation host, and the batches they go in. The host translates
 * one batch at a time (one forward pass uses its threads); sentences that arrive while it works
 * wait here, per model, and go together in the next batch: the oldest waiting final first, with
 * the other sentences waiting for the same model and direction, finals before interims.
 *
 * Accounts take turns: the next batch leads with the oldest final of the account served longest
 * ago (then its interims), so one account's flood of sentences does not hold up everyone else's.
 *
 * Bounds, per model: `maxQueued` sentences wait; an interim is refused from half of that (interims
 * give way to finals; the pipeline replaces them anyway), a final at the bound; one account may
 * have half of `maxQueued` waiting (the service's own work, with no account, only the total). Refusals are `EngineBusyError`s. A sentence whose signal fires leaves the queue at once; a batch in flight
 * whose every sentence has been cancelled is stopped at its next token.
 */
import { EngineBusyError } from "../../core/busy.js";
import { abortError } from "../../core/cancellation.js";
import type { LanguageCode } from "../../core/contracts.js";

export interface Batch {
  readonly model: string;
  readonly from: LanguageCode;
  readonly to: LanguageCode;
  readonly texts: readonly string[];
}

/** Translates a batch (one result per text, in order); `signal` fires when none is wanted any more. */
export type BatchRunner = (batch: Batch, signal: AbortSignal) => Promise<readonly string[]>;

export interface BatchLimits {
  /** Sentences in one batch. */
  readonly maxBatch: number;
  /** Sentences waiting per model. */
  readonly maxQueued: number;
}

export interface SentenceOptions {
  readonly interim?: boolean;
  readonly signal?: AbortSignal;
  /** Who asks: accounts are served in turn. */
  readonly account?: string;
}

interface Waiting {
  readonly seq: number;
  readonly model: string;
  readonly from: LanguageCode;
  readonly to: LanguageCode;
  readonly text: string;
  readonly interim: boolean;
  readonly account: string;
  readonly resolve: (translation: string) => void;
  readonly reject: (error: unknown) => void;
  /** Removes the abort listener. */
  readonly release: () => void;
  /** Set when cancelled after it left the queue (its batch is in flight). */
  cancelled: boolean;
}

export class SentenceBatcher {
  private readonly waiting = new Map<string, Waiting[]>();
  private seq = 0;
  private inFlight: { readonly sentences: Waiting[]; readonly controller: AbortController } | undefined;
  /** When each account last led a batch (a batch counter): the least recent leads the next. */
  private readonly served = new Map<string, number>();
  /** Batches sent and sentences in them, since the start (for tests and benchmarks). */
  private sent = { batches: 0, sentences: 0 };

  constructor(
    private readonly run: BatchRunner,
    private readonly limits: BatchLimits,
  ) {}

  translate(
    model: string,
    from: LanguageCode,
    to: LanguageCode,
    text: string,
    { interim = false, signal, account = "" }: SentenceOptions = {},
  ): Promise<string> {
    if (signal?.aborted) return Promise.reject(abortError(signal));
    const queue = this.waiting.get(model) ?? [];
    const bound = interim ? Math.floor(this.limits.maxQueued / 2) : this.limits.maxQueued;
    if (queue.length >= bound) {
      return Promise.reject(
        new EngineBusyError(
          `the translator is busy: ${queue.length} sentences are waiting for ${model}` +
            (interim ? " (interims are not queued past half of that)" : ""),
        ),
      );
    }
    // The service's own work (no account) is bounded by the total only.
    const mine = account === "" ? 0 : queue.filter((entry) => entry.account === account).length;
    if (mine >= Math.floor(this.limits.maxQueued / 2)) {
      return Promise.reject(
        new EngineBusyError(
          `the translator is busy: this account has ${mine} sentences waiting for ${model}`,
        ),
      );
    }
    this.waiting.set(model, queue);
    return new Promise<string>((resolve, reject) => {
      const onAbort = () => this.cancel(entry, abortError(signal!));
      const entry: Waiting = {
        seq: this.seq++,
        model,
        from,
        to,
        text,
        interim,
        account,
        resolve,
        reject,
        release: () => signal?.removeEventListener("abort", onAbort),
        cancelled: false,
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      queue.push(entry);
      this.pump();
    });
  }

  /** Sentences waiting, per model, and what has been sent. */
  stats(): { waiting: Record<string, number>; batches: number; sentences: number } {
    const waiting = Object.fromEntries([...this.waiting].map(([model, queue]) => [model, queue.length]));
    return { waiting, ...this.sent };
  }

  /** Fails everything waiting and in flight (the engine is closing). */
  close(error: Error): void {
    for (const queue of this.waiting.values()) for (const entry of queue.splice(0)) this.settle(entry, error);
    for (const entry of this.inFlight?.sentences ?? []) this.settle(entry, error);
    this.inFlight?.controller.abort(error);
  }

  private cancel(entry: Waiting, error: Error): void {
    const queue = this.waiting.get(entry.model);
    const at = queue?.indexOf(entry) ?? -1;
    if (at >= 0) queue!.splice(at, 1);
    else entry.cancelled = true;
    entry.reject(error);
    const batch = this.inFlight;
    if (batch && batch.sentences.every((sentence) => sentence.cancelled)) batch.controller.abort(error);
  }

  private settle(entry: Waiting, outcome: Error | string): void {
    entry.release();
    if (entry.cancelled) return;
    entry.cancelled = true;
    if (typeof outcome === "string") entry.resolve(outcome);
    else entry.reject(outcome);
  }

  private pump(): void {
    if (this.inFlight) return;
    const sentences = this.nextBatch();
    if (sentences.length === 0) return;
    const [{ model, from, to }] = sentences as [Waiting];
    const controller = new AbortController();
    this.inFlight = { sentences, controller };
    this.sent = { batches: this.sent.batches + 1, sentences: this.sent.sentences + sentences.length };
    this.run({ model, from, to, texts: sentences.map((s) => s.text) }, controller.signal)
      .then(
        (translations) => sentences.forEach((s, i) => this.settle(s, translations[i] ?? "")),
        (error: unknown) => {
          const failure = error instanceof Error ? error : new Error(String(error));
          sentences.forEach((s) => this.settle(s, failure));
        },
      )
      .finally(() => {
        this.inFlight = undefined;
        this.pump();
      });
  }

  /**
   * The oldest waiting final (else interim) of the account served longest ago, with what can go
   * with it: same model and direction, finals first.
   */
  private nextBatch(): Waiting[] {
    const all = [...this.waiting.values()].flat();
    const pool = all.some((s) => !s.interim) ? all.filter((s) => !s.interim) : all;
    const turn = (account: string) => this.served.get(account) ?? -1;
    const account = pool.reduce<string | undefined>(
      (best, s) => (best === undefined || turn(s.account) < turn(best) ? s.account : best),
      undefined,
    );
    const first = oldest(pool.filter((s) => s.account === account));
    if (!first) return [];
    this.served.delete(first.account);
    this.served.set(first.account, this.sent.batches);
    // Bounded: accounts long unserved are forgotten (they come back first in line, as new ones do).
    if (this.served.size > 1024) this.served.delete(this.served.keys().next().value!);
    const queue = this.waiting.get(first.model)!;
    // The leader, then what else waits for the same model and direction, finals first.
    const mates = [
      first,
      ...queue
        .filter((s) => s !== first && s.from === first.from && s.to === first.to)
        .sort((a, b) => Number(a.interim) - Number(b.interim) || a.seq - b.seq),
    ].slice(0, this.limits.maxBatch);
    this.waiting.set(
      first.model,
      queue.filter((s) => !mates.includes(s)),
    );
    return mates;
  }
}

function oldest(sentences: readonly Waiting[]): Waiting | undefined {
  return sentences.reduce<Waiting | undefined>(
    (a, b) => (a === undefined || b.seq < a.seq ? b : a),
    undefined,
  );
}
