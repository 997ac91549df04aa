import type { Kysely } from "kysely";
import { ACTIVE_STATUSES, type Schema } from "./schema.js";
import { run, type TxBody } from "./transactions.js";

/**
 * Balance holds. A job holds its cost (`jobs.reserved_micro_usd`) from its creation (the price of
 * the longest accepted input while its duration is unknown, `creationHold`) until it finishes:
 * completion turns it into the ledger charge, failure drops it. What an
 * account can still spend is its ledger sum less the holds of its unfinished jobs. Checking that
 * and taking a hold happen in one transaction under the account's lock, so concurrent jobs (in any
 * number of processes) can never hold, and so never be charged, more than the balance.
 */

export class InsufficientBalanceError extends Error {
  override readonly name = "InsufficientBalanceError";
  constructor(
    readonly requiredUsd: number,
    readonly availableUsd: number,
  ) {
    super(`${requiredUsd} USD needed, ${availableUsd} USD available`);
  }
}

/**
 * Serializes the account's balance checks until the transaction ends: a row lock on PostgreSQL
 * (NO KEY UPDATE, so ledger inserts referencing the account, such as a completion's charge, need
 * not wait for it). SQLite needs none: its write transactions (BEGIN IMMEDIATE) run one at a time.
 */
export function* lockAccount(
  db: Kysely<Schema>,
  dialect: "sqlite" | "postgres",
  accountId: string,
): TxBody<void> {
  if (dialect === "postgres") {
    yield* run(db.selectFrom("accounts").select("id").where("id", "=", accountId).forNoKeyUpdate());
  }
}

/**
 * The account's ledger sum less the holds of its unfinished jobs (but `exceptJobId`'s own), in
 * micro-dollars. One statement, so both sums come from the same snapshot: a job completing in
 * between (charge added, hold dropped) cannot be half seen.
 */
export function availableMicroUsdQuery(db: Kysely<Schema>, accountId: string, exceptJobId?: string) {
  return db.selectNoFrom((eb) => [
    eb
      .selectFrom("ledger_entries")
      .select((inner) => inner.fn.sum<number | string | null>("amount_micro_usd").as("total"))
      .where("account_id", "=", accountId)
      .as("balance"),
    eb
      .selectFrom("jobs")
      .select((inner) => inner.fn.sum<number | string | null>("reserved_micro_usd").as("total"))
      .where("account_id", "=", accountId)
      .where("status", "in", ACTIVE_STATUSES)
      .$if(exceptJobId !== undefined, (qb) => qb.where("id", "!=", exceptJobId!))
      .as("held"),
  ]);
}

export function* availableMicroUsd(
  db: Kysely<Schema>,
  accountId: string,
  exceptJobId?: string,
): TxBody<number> {
  const { rows } = yield* run(availableMicroUsdQuery(db, accountId, exceptJobId));
  return micro(rows[0]?.balance) - micro(rows[0]?.held);
}

/** A SUM as read back: null over no rows, a string from node-postgres. */
export function micro(value: number | string | null | undefined): number {
  return Number(value ?? 0);
}
