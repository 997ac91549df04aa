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
