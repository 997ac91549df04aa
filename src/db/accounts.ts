import { createHash } from "node:crypto";
import type { Kysely } from "kysely";
import { availableMicroUsdQuery, micro } from "./billing.js";
import { fromMicroUsd, toMicroUsd, type Schema } from "./schema.js";
import { run, type TransactionRunner, type TxBody } from "./transactions.js";
import type { Account, AccountsRepository } from "./types.js";

/** SHA-256 of an API key, lowercase hex: the only form in which keys are stored. */
export function hashApiKey(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("hex");
}

/**
 * The account id of a configured key is derived from the key's hash, so concurrent provisioning of
 * the same key (several processes starting at once) converges on one account row via the primary
 * key, and no orphan account can be created by a process that loses the race.
 */
function accountIdFor(keyHash: string): string {
  return `acct_${createHash("sha256").update(`relay-account:${keyHash}`).digest("hex").slice(0, 24)}`;
}

function parseEntitlements(json: string): string[] {
  const value: unknown = JSON.parse(json);
  return Array.isArray(value) ? value.filter((item): item is string => typeof item === "string") : [];
}

export function createAccountsRepository(
  db: Kysely<Schema>,
  transaction: TransactionRunner,
): AccountsRepository {
  function* ensureKeyTx(key: string, balanceUsd: number, entitlements: readonly string[]): TxBody<Account> {
    const keyHash = hashApiKey(key);
    const now = Date.now();
    yield* run(
      db
        .insertInto("accounts")
        .values({ id: accountIdFor(keyHash), created_at: now })
        .onConflict((oc) => oc.column("id").doNothing()),
    );
    // Entitlements follow the configuration on every start; the account stays the one the key has.
    yield* run(
      db
        .insertInto("api_keys")
        .values({
          key_hash: keyHash,
          account_id: accountIdFor(keyHash),
          entitlements: JSON.stringify([...entitlements]),
          created_at: now,
        })
        .onConflict((oc) =>
          oc.column("key_hash").doUpdateSet((eb) => ({ entitlements: eb.ref("excluded.entitlements") })),
        ),
    );
    const { rows } = yield* run(
      db.selectFrom("api_keys").select(["account_id", "entitlements"]).where("key_hash", "=", keyHash),
    );
    const row = rows[0];
    if (!row) throw new Error("api key row missing right after its upsert");
    // One development grant per key, made unique by its id. It is the balance configured when the
    // key was first provisioned: changing the configured balance later does NOT grant again (and
    // does not adjust the balance); top-ups must be separate ledger entries.
    yield* run(
      db
        .insertInto("ledger_entries")
        .values({
          id: `grant:${keyHash}`,
          account_id: row.account_id,
          amount_micro_usd: toMicroUsd(balanceUsd),
          kind: "grant",
          job_id: null,
          created_at: now,
        })
        .onConflict((oc) => oc.doNothing()),
    );
    return { id: row.account_id, entitlements: parseEntitlements(row.entitlements) };
  }

  return {
    async ensureKey(key, { balanceUsd, entitlements }) {
      if (key === "") throw new Error("API key must not be empty");
      return transaction(() => ensureKeyTx(key, balanceUsd, entitlements));
    },

    async findByKey(key) {
      const row = await db
        .selectFrom("api_keys")
        .select(["account_id", "entitlements"])
        .where("key_hash", "=", hashApiKey(key))
        .executeTakeFirst();
      return row && { id: row.account_id, entitlements: parseEntitlements(row.entitlements) };
    },

    async balanceUsd(accountId) {
      const row = await db
        .selectFrom("ledger_entries")
        .select((eb) => eb.fn.sum<number | string | null>("amount_micro_usd").as("total"))
        .where("account_id", "=", accountId)
        .executeTakeFirst();
      return fromMicroUsd(row?.total ?? 0);
    },

    async availableUsd(accountId) {
      const row = await availableMicroUsdQuery(db, accountId).executeTakeFirst();
      return fromMicroUsd(micro(row?.balance) - micro(row?.held));
    },
  };
}
