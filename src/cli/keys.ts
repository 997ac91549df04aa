import { Command, InvalidArgumentError } from "commander";
import type { Entitlement } from "../auth/accounts.js";
import type { ApiKeyRecord, Database } from "../db/types.js";
import { CliError } from "./network.js";
import { printTable } from "./output.js";

/**
 * `relay keys create | list | revoke | grant`: API keys and balances, on the service's database
 * (DATABASE_URL, or the SQLite file in DATA_DIR), run where the service runs. Changes take effect
 * at once on every process using the database: keys are checked there on each request.
 */

const ENTITLEMENTS: readonly Entitlement[] = ["realtime", "rooms", "dubbing"];

function parseEntitlements(value: string): Entitlement[] {
  const parts = value.split("+").filter(Boolean);
  const unknown = parts.filter((part) => !(ENTITLEMENTS as readonly string[]).includes(part));
  if (parts.length === 0 || unknown.length > 0)
    throw new InvalidArgumentError(`use ${ENTITLEMENTS.join("+")} or a part of it`);
  return parts as Entitlement[];
}

function parseUsd(value: string): number {
  const usd = Number(value);
  if (!Number.isFinite(usd) || usd < 0 || usd > 1_000_000)
    throw new InvalidArgumentError("use an amount in USD, e.g. 25");
  return usd;
}

async function withDatabase<T>(
  options: { database?: string },
  use: (db: Database) => Promise<T>,
): Promise<T> {
  // The configuration and database drivers load only for the `keys` commands (cli/main.ts).
  const [{ databaseUrlOf }, { openDatabase }] = await Promise.all([
    import("../config.js"),
    import("../db/index.js"),
  ]);
  const db = await openDatabase(options.database ?? databaseUrlOf(process.env));
  try {
    return await use(db);
  } finally {
    await db.close();
  }
}

function describe(record: ApiKeyRecord): string[] {
  return [
    record.id,
    record.label ?? "",
    record.entitlements.join("+"),
    record.balanceUsd.toFixed(2),
    record.createdAt.toISOString().slice(0, 19).replace("T", " "),
    record.revokedAt ? `revoked ${record.revokedAt.toISOString().slice(0, 10)}` : "active",
  ];
}

const HEADER = ["ID", "LABEL", "ENTITLEMENTS", "BALANCE USD", "CREATED (UTC)", "STATUS"];

function printRecord(record: ApiKeyRecord, json: boolean): void {
  if (json) console.log(JSON.stringify(record));
  else printTable(HEADER, [describe(record)]);
}

export function keysCommand(): Command {
  const keys = new Command("keys").description(
    "manage API keys and balances in the service's database (DATABASE_URL or DATA_DIR)",
  );
  const common = (command: Command) =>
    command
      .option("--database <url>", "database URL (default: DATABASE_URL, or sqlite:<DATA_DIR>/relay.db)")
      .option("--json", "print JSON", false);

  common(
    keys
      .command("create")
      .description("create an API key for a new account; the key is printed once and stored hashed")
      .option("--balance <usd>", "opening balance", parseUsd, 10)
      .option("--entitlements <list>", "realtime+rooms+dubbing or a part of it", parseEntitlements, [
        ...ENTITLEMENTS,
      ])
      .option("--label <text>", "a name to recognize the key by"),
  ).action(
    async (options: {
      database?: string;
      json: boolean;
      balance: number;
      entitlements: Entitlement[];
      label?: string;
    }) => {
      const { key, record } = await withDatabase(options, (db) =>
        db.accounts.createKey({
          balanceUsd: options.balance,
          entitlements: options.entitlements,
          ...(options.label ? { label: options.label } : {}),
        }),
      );
      if (options.json) console.log(JSON.stringify({ key, ...record }));
      else {
        console.log(`API key (shown once; store it now): ${key}`);
        printRecord(record, false);
      }
    },
  );

  common(keys.command("list").description("list the keys (never the keys themselves), newest first")).action(
    async (options: { database?: string; json: boolean }) => {
      const records = await withDatabase(options, (db) => db.accounts.listKeys());
      if (options.json) console.log(JSON.stringify(records));
      else printTable(HEADER, records.map(describe));
    },
  );

  common(
    keys
      .command("revoke")
      .description("revoke a key: it stops authenticating at once, on every process")
      .argument("<key-or-id>", "the key, or its ID from `relay keys list`"),
  ).action(async (keyOrId: string, options: { database?: string; json: boolean }) => {
    const record = await withDatabase(options, (db) => db.accounts.revokeKey(keyOrId));
    if (!record) throw new CliError(`no key matches "${keyOrId}" (or several do: give more of the ID)`);
    printRecord(record, options.json);
  });

  common(
    keys
      .command("grant")
      .description("add to the balance of a key's account")
      .argument("<key-or-id>", "the key, or its ID from `relay keys list`")
      .argument("<usd>", "amount to add, in USD", parseUsd),
  ).action(async (keyOrId: string, usd: number, options: { database?: string; json: boolean }) => {
    if (usd === 0) throw new CliError("grant a positive amount");
    const record = await withDatabase(options, (db) => db.accounts.grant(keyOrId, usd));
    if (!record) throw new CliError(`no key matches "${keyOrId}" (or several do: give more of the ID)`);
    printRecord(record, options.json);
  });
  return keys;
}
