import type BetterSqlite3 from "better-sqlite3";
import type { Compilable, CompiledQuery, Kysely, QueryResult } from "kysely";
import type { Schema } from "./schema.js";

/**
 * A multi-statement transaction written once for both dialects, as a generator: it yields compiled
 * queries and receives their results (see `run`). The PostgreSQL runner awaits each query inside a
 * Kysely transaction. The SQLite runner drives the generator synchronously inside better-sqlite3's
 * `BEGIN IMMEDIATE` transaction: the write lock is taken up front (so no read-then-upgrade
 * SQLITE_BUSY), and as nothing yields to the event loop mid-transaction, several `Database`
 * instances on one file in the same process cannot deadlock on each other's busy timeout.
 */
export type TxBody<T> = Generator<CompiledQuery, T, QueryResult<unknown>>;

export type TransactionRunner = <T>(body: () => TxBody<T>) => Promise<T>;

/** Executes `query` in the surrounding transaction body; `yield* run(query)` gives its typed result. */
export function* run<R>(
  query: Compilable<R>,
): Generator<CompiledQuery, QueryResult<R>, QueryResult<unknown>> {
  // The runner sends back the result of exactly the query we yielded, so its row type is R.
  return (yield query.compile()) as QueryResult<R>;
}

export function sqliteTransactions(raw: BetterSqlite3.Database): TransactionRunner {
  return <T>(body: () => TxBody<T>): Promise<T> => {
    try {
      const transaction = raw.transaction((): T => {
        const steps = body();
        let step = steps.next();
        while (!step.done) step = steps.next(executeSqlite(raw, step.value));
        return step.value;
      });
      return Promise.resolve(transaction.immediate());
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
  };
}

export function postgresTransactions(db: Kysely<Schema>): TransactionRunner {
  return <T>(body: () => TxBody<T>): Promise<T> =>
    db.transaction().execute(async (trx) => {
      const steps = body();
      let step = steps.next();
      while (!step.done) step = steps.next(await trx.executeQuery(step.value));
      return step.value;
    });
}

/** What Kysely's own SQLite driver does for one query, synchronously. */
function executeSqlite(raw: BetterSqlite3.Database, query: CompiledQuery): QueryResult<unknown> {
  const statement = raw.prepare<unknown[], unknown>(query.sql);
  if (statement.reader) return { rows: statement.all(...query.parameters) };
  const { changes } = statement.run(...query.parameters);
  return { rows: [], numAffectedRows: BigInt(changes) };
}
