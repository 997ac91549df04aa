/** The price of dubbing (spec: 0.50 USD per minute of input). */
export const PRICE_USD_PER_MINUTE = 0.5;

/** 0.50 USD per minute, prorated to the (started) second, in whole micro-dollars. */
export function costOf(durationSec: number): number {
  return Math.round(((Math.ceil(durationSec) * PRICE_USD_PER_MINUTE) / 60) * 1e6) / 1e6;
}

/** Dollars as messages show them: exact to the micro-dollar the ledger keeps, without trailing zeros. */
export function formatUsd(usd: number): string {
  return `${Number(usd.toFixed(6))} USD`;
}

/** What a job holds of the balance from its creation. */
export interface CreationHold {
  readonly costUsd: number;
  /** The input's duration when the hold is its exact price. */
  readonly inputDurationSec?: number;
}

/**
 * A job holds its price from creation, so that 201 means the balance covers it (the spec). When
 * the duration could not be learned at creation, or is over the limit (the job will then fail
 * `video_too_long`), it holds the price of the longest accepted input; the worker brings the hold
 * down to the exact price once it has read the downloaded input (`costOf`), and a failed job holds
 * nothing.
 */
export function creationHold(durationSec: number | undefined, maxDurationSec: number): CreationHold {
  if (durationSec !== undefined && durationSec <= maxDurationSec) {
    return { costUsd: costOf(durationSec), inputDurationSec: durationSec };
  }
  return { costUsd: costOf(maxDurationSec) };
}
