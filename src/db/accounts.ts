import { createHash, randomBytes, randomUUID } from "node:crypto";
import type { Kysely } from "kysely";
import { availableMicroUsdQuery, micro } from "./billing.js";
import { fromMicroUsd, toMicroUsd, type Schema } from "./schema.js";
import { run, type TransactionRunner, type TxBody } from "./transactions.js";
import type { Account, AccountsRepository, ApiKeyRecord } from "./types.js";

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

/** Characters of the key hash that name a key in `relay keys`. */
const KEY_ID_LENGTH = 12;

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
        .where("revoked_at", "is", null)
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

    async createKey({ balanceUsd, entitlements, label }) {
      // 32 random bytes: as hard to guess as the hash that stores it.
      const key = `rk_${randomBytes(32).toString("base64url")}`;
      const keyHash = hashApiKey(key);
      const accountId = `acct_${randomBytes(12).toString("hex")}`;
      const now = Date.now();
      await transaction(function* () {
        yield* run(db.insertInto("accounts").values({ id: accountId, created_at: now }));
        yield* run(
          db.insertInto("api_keys").values({
            key_hash: keyHash,
            account_id: accountId,
            entitlements: JSON.stringify([...entitlements]),
            created_at: now,
            label: label ?? null,
          }),
        );
        if (balanceUsd > 0) yield* run(grantEntry(accountId, balanceUsd, now));
      });
      return { key, record: (await keyRecords(keyHash))[0]! };
    },

    listKeys: () => keyRecords(),

    async revokedAccounts(accountIds) {
      if (accountIds.length === 0) return new Set();
      const active = await db
        .selectFrom("api_keys")
        .select("account_id")
        .distinct()
        .where("account_id", "in", [...accountIds])
        .where("revoked_at", "is", null)
        .execute();
      const stillActive = new Set(active.map((row) => row.account_id));
      return new Set(accountIds.filter((id) => !stillActive.has(id)));
    },

    async revokeKey(keyOrId) {
      const keyHash = await keyHashOf(keyOrId);
      if (!keyHash) return undefined;
      await db
        .updateTable("api_keys")
        .set({ revoked_at: Date.now() })
        .where("key_hash", "=", keyHash)
        .where("revoked_at", "is", null)
        .execute();
      return (await keyRecords(keyHash))[0];
    },

    async grant(keyOrId, amountUsd) {
      if (!(amountUsd > 0)) throw new Error("a grant must be a positive amount");
      const keyHash = await keyHashOf(keyOrId);
      const record = keyHash && (await keyRecords(keyHash))[0];
      if (!record) return undefined;
      await grantEntry(record.accountId, amountUsd, Date.now()).execute();
      return (await keyRecords(keyHash))[0];
    },
  };

  function grantEntry(accountId: string, amountUsd: number, now: number) {
    return db.insertInto("ledger_entries").values({
      id: `grant:${randomUUID()}`,
      account_id: accountId,
      amount_micro_usd: toMicroUsd(amountUsd),
      kind: "grant",
      job_id: null,
      created_at: now,
    });
  }

  /** The hash of a key given itself, or by a unique prefix of its hash (at least 8 hex digits). */
  async function keyHashOf(keyOrId: string): Promise<string | undefined> {
    const byKey = hashApiKey(keyOrId);
    const exact = await db.selectFrom("api_keys").select("key_hash").where("key_hash", "=", byKey).execute();
    if (exact.length === 1) return byKey;
    if (!/^[0-9a-f]{8,64}$/u.test(keyOrId)) return undefined;
    const matches = await db
      .selectFrom("api_keys")
      .select("key_hash")
      .where("key_hash", "like", `${keyOrId}%`)
      .limit(2)
      .execute();
    return matches.length === 1 ? matches[0]!.key_hash : undefined;
  }

  async function keyRecords(keyHash?: string): Promise<ApiKeyRecord[]> {
    let query = db
      .selectFrom("api_keys")
      .select((eb) => [
        "key_hash",
        "account_id",
        "label",
        "entitlements",
        "created_at",
        "revoked_at",
        eb
          .selectFrom("ledger_entries")
          .select((inner) => inner.fn.sum<number | string | null>("amount_micro_usd").as("total"))
          .whereRef("ledger_entries.account_id", "=", "api_keys.account_id")
          .as("balance"),
      ])
      .orderBy("created_at", "desc");
    if (keyHash) query = query.where("key_hash", "=", keyHash);
    const rows = await query.execute();
    return rows.map((row) => ({
      id: row.key_hash.slice(0, KEY_ID_LENGTH),
      accountId: row.account_id,
      label: row.label,
      entitlements: parseEntitlements(row.entitlements),
      createdAt: new Date(Number(row.created_at)),
      revokedAt: row.revoked_at === null ? null : new Date(Number(row.revoked_at)),
      balanceUsd: fromMicroUsd(row.balance ?? 0),
    }));
  }
}
