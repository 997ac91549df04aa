import { mkdirSync } from "node:fs";
import path from "node:path";
import BetterSqlite3 from "better-sqlite3";
import { Kysely, Migrator, PostgresDialect, SqliteDialect } from "kysely";
import pg from "pg";
import { createAccountsRepository } from "./accounts.js";
import { createJobLeases } from "./job-leases.js";
import { createJobRecords } from "./job-records.js";
import { migrationProvider } from "./migrations.js";
import type { Schema } from "./schema.js";
import { postgresTransactions, sqliteTransactions, type TransactionRunner } from "./transactions.js";
import type { Database } from "./types.js";
import { createProcessesRepository } from "./processes.js";
import { createRetentionRepository } from "./retention.js";
import { createUploadsRepository } from "./uploads.js";
import { parseDatabaseUrl } from "./url.js";

export type * from "./types.js";
export { hashApiKey } from "./accounts.js";
export { parseDatabaseUrl, type DatabaseLocation } from "./url.js";

/** How long a SQLite writer waits for another process's write lock before failing with SQLITE_BUSY. */
const SQLITE_BUSY_TIMEOUT_MS = 5_000;

/**
 * Opens (creating if needed) the database at `url` — `sqlite:<path>`, `sqlite::memory:` or
 * `postgres://…` / `postgresql://…` — and brings its schema up to date before returning.
 */
export async function openDatabase(url: string): Promise<Database> {
  const location = parseDatabaseUrl(url);
  return location.kind === "sqlite" ? openSqlite(location.path) : openPostgres(location.connectionString);
}

function assemble(kind: "sqlite" | "postgres", db: Kysely<Schema>, transaction: TransactionRunner): Database {
  let closing: Promise<void> | undefined;
  return {
    kind,
    accounts: createAccountsRepository(db, transaction),
    uploads: createUploadsRepository(db, kind, transaction),
    retention: createRetentionRepository(db),
    jobs: { ...createJobRecords(db, kind, transaction), ...createJobLeases(db, kind, transaction) },
    processes: createProcessesRepository(db),
    close: () => (closing ??= db.destroy()),
  };
}

async function migrate(db: Kysely<Schema>): Promise<void> {
  const { error } = await new Migrator({ db, provider: migrationProvider }).migrateToLatest();
  if (error !== undefined) {
    throw error instanceof Error ? error : new Error(`database migration failed: ${String(error)}`);
  }
}

/**
 * Opens of the same SQLite file in this process, serialized: a migration holds the file's write
 * lock across awaits, and better-sqlite3's busy wait is synchronous, so a second instance waiting
 * for it inside the same event loop would block the very code that must release it.
 */
const sqliteOpens = new Map<string, Promise<unknown>>();

async function openSqlite(file: string): Promise<Database> {
  const memory = file === ":memory:";
  const key = memory ? undefined : path.resolve(file);
  const previous = (key && sqliteOpens.get(key)) || Promise.resolve();
  const opening = previous.catch(() => undefined).then(() => openSqliteNow(file, memory));
  if (key) {
    sqliteOpens.set(key, opening);
    const forget = (): void => {
      if (sqliteOpens.get(key) === opening) sqliteOpens.delete(key);
    };
    // Both outcomes handled here, so a failed open is reported only to the caller.
    void opening.then(forget, forget);
  }
  return opening;
}

async function openSqliteNow(file: string, memory: boolean): Promise<Database> {
  if (!memory) mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  const raw = new BetterSqlite3(file);
  const db = new Kysely<Schema>({ dialect: new SqliteDialect({ database: raw }) });
  try {
    // Busy timeout first: switching to WAL itself needs the lock if another process holds it.
    raw.pragma(`busy_timeout = ${SQLITE_BUSY_TIMEOUT_MS}`);
    // WAL lets readers in other processes proceed while one process writes.
    if (!memory) raw.pragma("journal_mode = WAL");
    raw.pragma("synchronous = NORMAL");
    raw.pragma("foreign_keys = ON");
    // Kysely's SQLite adapter neither locks nor wraps migrations in a transaction; doing both here
    // makes a migration atomic and serializes processes migrating the same file at once (SQLite
    // DDL is transactional; the Migrator runs on this same single connection).
    raw.exec("BEGIN IMMEDIATE");
    try {
      await migrate(db);
      raw.exec("COMMIT");
    } catch (error) {
      if (raw.inTransaction) raw.exec("ROLLBACK");
      throw error;
    }
  } catch (error) {
    await db.destroy();
    throw error;
  }
  return assemble("sqlite", db, sqliteTransactions(raw));
}

async function openPostgres(connectionString: string): Promise<Database> {
  const pool = new pg.Pool({ connectionString });
  // An idle pooled connection that the server drops (restart, failover, pg_terminate_backend) is
  // discarded by the pool and replaced on the next query; without a listener its error event would
  // crash the process.
  pool.on("error", (error) => process.emitWarning(`PostgreSQL connection lost: ${error.message}`));
  const db = new Kysely<Schema>({ dialect: new PostgresDialect({ pool }) });
  try {
    // Kysely's PostgreSQL adapter takes an advisory lock around the migrations, and each runs in a
    // transaction, so processes opening the same database at once migrate it exactly once.
    await migrate(db);
  } catch (error) {
    await db.destroy();
    throw error;
  }
  return assemble("postgres", db, postgresTransactions(db));
}
