import { spawn } from "node:child_process";
import { once } from "node:events";
import { createHash, randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import BetterSqlite3 from "better-sqlite3";
import { Kysely, Migrator, PostgresDialect, sql, SqliteDialect } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { InsufficientBalanceError } from "../../src/db/billing.js";
import { ActiveJobsLimitError } from "../../src/db/job-records.js";
import { openDatabase, parseDatabaseUrl } from "../../src/db/index.js";
import { migrationProvider } from "../../src/db/migrations.js";
import type { Database, JobProgress, JobRecord } from "../../src/db/types.js";
import { createTestDatabase, postgresProblem } from "../support/postgres.js";

/**
 * The database layer against real databases: the same suite on SQLite (a temporary file) and on
 * PostgreSQL (a fresh database per run, dropped afterwards; skipped when the server is unreachable).
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const TABLES = ["ledger_entries", "jobs", "uploads", "api_keys", "accounts", "leases"] as const;

/** Plain SQL on the test database, behind the layer's back, for checks and cleanup. */
interface Raw {
  query(text: string, params?: readonly unknown[]): Promise<Record<string, unknown>[]>;
  close(): Promise<void>;
}

interface Backend {
  /** URL of the database shared by the suite. */
  readonly url: string;
  readonly raw: Raw;
  /** Another empty database (dropped at teardown), for tests that need their own. */
  fresh(): Promise<string>;
  teardown(): Promise<void>;
}

async function sqliteBackend(): Promise<Backend> {
  const dir = await mkdtemp(path.join(tmpdir(), "relay-db-test-"));
  const file = path.join(dir, "main.db");
  let opened: BetterSqlite3.Database | undefined;
  const handle = (): BetterSqlite3.Database => (opened ??= new BetterSqlite3(file, { timeout: 5_000 }));
  return {
    url: `sqlite:${file}`,
    raw: {
      query: async (text, params = []) => {
        const statement = handle().prepare<unknown[], Record<string, unknown>>(text);
        if (statement.reader) return statement.all(...params);
        statement.run(...params);
        return [];
      },
      close: async () => {
        opened?.close();
      },
    },
    fresh: async () => `sqlite:${path.join(dir, `${randomUUID()}.db`)}`,
    teardown: () => rm(dir, { recursive: true, force: true }),
  };
}

async function postgresBackend(): Promise<Backend> {
  const created: { drop(): Promise<void> }[] = [];
  const create = async (): Promise<string> => {
    const database = await createTestDatabase();
    created.push(database);
    return database.url;
  };
  const main = await create();
  const client = new pg.Client({ connectionString: main });
  await client.connect();
  return {
    url: main,
    raw: {
      query: async (text, params = []) => {
        // The layer's placeholders are `?` on SQLite; number them for pg.
        let n = 0;
        const result = await client.query<Record<string, unknown>>(
          text.replace(/\?/gu, () => `$${++n}`),
          [...params],
        );
        return result.rows;
      },
      close: () => client.end(),
    },
    fresh: create,
    teardown: async () => {
      for (const database of created) await database.drop();
    },
  };
}

const pgProblem = await postgresProblem();
if (pgProblem !== undefined) {
  console.warn(`[db] skipping the PostgreSQL suite: PostgreSQL unavailable (${pgProblem})`);
}

/** A database brought up to `migration` only (as an older release left it), open for raw SQL. */
async function databaseAt(url: string, migration: string): Promise<Kysely<unknown>> {
  const location = parseDatabaseUrl(url);
  const db = new Kysely<unknown>({
    dialect:
      location.kind === "sqlite"
        ? new SqliteDialect({ database: new BetterSqlite3(location.path) })
        : new PostgresDialect({ pool: new pg.Pool({ connectionString: location.connectionString }) }),
  });
  const { error } = await new Migrator({ db, provider: migrationProvider }).migrateTo(migration);
  if (error !== undefined) throw error instanceof Error ? error : new Error(String(error));
  return db;
}

/** Resolves once the clock has moved on to the next millisecond. */
async function nextMillisecond(): Promise<void> {
  const now = Date.now();
  while (Date.now() === now) await new Promise((resolve) => setImmediate(resolve));
}
const sha256 = (text: string): string => createHash("sha256").update(text).digest("hex");
const progress = (percent: number, stage = "asr"): JobProgress => ({ stage, stageName: stage, percent });

function dbSuite(name: string, skip: boolean, makeBackend: () => Promise<Backend>): void {
  describe.skipIf(skip)(`database layer on ${name}`, () => {
    let backend: Backend;
    /** Two independent instances (two connections / pools) on the same database, like two processes. */
    let db: Database;
    let db2: Database;

    beforeAll(async () => {
      backend = await makeBackend();
      db = await openDatabase(backend.url);
      db2 = await openDatabase(backend.url);
    });

    afterAll(async () => {
      await db?.close();
      await db2?.close();
      await backend?.raw.close();
      await backend?.teardown();
    });

    beforeEach(async () => {
      for (const table of TABLES) await backend.raw.query(`DELETE FROM ${table}`);
    });

    async function account(balanceUsd = 10): Promise<string> {
      const key = `key-${randomUUID()}`;
      return (await db.accounts.ensureKey(key, { balanceUsd, entitlements: ["dubbing"] })).id;
    }

    async function createJobs(accountId: string, count: number, prefix = "job"): Promise<JobRecord[]> {
      const jobs: JobRecord[] = [];
      for (let i = 0; i < count; i++) {
        const { job } = await db.jobs.create({
          id: `${prefix}-${String(i).padStart(3, "0")}`,
          accountId,
          sourceUrl: `https://example.com/${i}.mp4`,
          sourceLang: "en",
          targetLang: "es",
        });
        jobs.push(job);
      }
      return jobs;
    }

    /** Ends every running lease now, as if its worker had died long ago (no racing a short timer). */
    async function expireLeases(): Promise<void> {
      await backend.raw.query("UPDATE jobs SET lease_expires_at = ? WHERE lease_expires_at IS NOT NULL", [
        Date.now() - 1,
      ]);
    }

    async function count(table: string, where = "1 = 1", params: readonly unknown[] = []): Promise<number> {
      const rows = await backend.raw.query(`SELECT COUNT(*) AS n FROM ${table} WHERE ${where}`, params);
      return Number(rows[0]?.n);
    }

    describe("migrations", () => {
      it("are recorded once and re-opening an up-to-date database is a no-op", async () => {
        const again = await openDatabase(backend.url);
        await again.close();
        const rows = await backend.raw.query("SELECT name FROM kysely_migration");
        expect(rows.map((row) => row.name)).toEqual([
          "0001_dubbing",
          "0002_holds_and_error_messages",
          "0003_job_voices",
          "0004_processes",
          "0005_key_management",
          "0006_storage_retention",
          "0007_fair_claims",
          "0008_job_context",
        ]);
        // The instances opened earlier still work after the re-open.
        expect(await db.accounts.findByKey("nobody")).toBeUndefined();
      });

      it("several instances opening a new database at once migrate it exactly once", async () => {
        const url = await backend.fresh();
        const instances = await Promise.all(Array.from({ length: 4 }, () => openDatabase(url)));
        try {
          const accounts = await Promise.all(
            instances.map((instance) =>
              instance.accounts.ensureKey("shared", { balanceUsd: 1, entitlements: [] }),
            ),
          );
          expect(new Set(accounts.map((a) => a.id)).size).toBe(1);
          expect(instances[0]!.kind).toBe(name === "SQLite" ? "sqlite" : "postgres");
        } finally {
          await Promise.all(instances.map((instance) => instance.close()));
        }
      });

      it("0002 splits the failures 0001 stored as '<code>: <message>' into the code and its message", async () => {
        const url = await backend.fresh();
        const old = await databaseAt(url, "0001_dubbing");
        try {
          await sql`insert into accounts (id, created_at) values ('acct_old', 1)`.execute(old);
          const failures = [
            ["j1", "download_failed: the source answered HTTP 404"],
            ["j2", "video_too_long: the input lasts 700.0 s; the limit is 600 s"],
            ["j3", "insufficient_balance: dubbing 7.2 s costs 0.07 USD; the balance is 0.05 USD"],
            ["j4", "something unforeseen"],
          ];
          for (const [id, error] of failures) {
            await sql`insert into jobs (id, account_id, status, source_url, source_lang, target_lang, error,
              attempts, created_at, updated_at) values (${id}, 'acct_old', 'failed', 'u', 'en', 'es', ${error},
              1, 1, 1)`.execute(old);
          }
        } finally {
          await old.destroy();
        }
        const migrated = await openDatabase(url);
        try {
          const read = async (id: string) => {
            const job = await migrated.jobs.get("acct_old", id);
            return [job?.error, job?.errorMessage];
          };
          expect(await read("j1")).toEqual(["download_failed", "the source answered HTTP 404"]);
          expect(await read("j2")).toEqual(["video_too_long", "the input lasts 700.0 s; the limit is 600 s"]);
          expect(await read("j3")).toEqual([
            "processing_failed",
            "insufficient balance: dubbing 7.2 s costs 0.07 USD; the balance is 0.05 USD",
          ]);
          expect(await read("j4")).toEqual(["processing_failed", "something unforeseen"]);
        } finally {
          await migrated.close();
        }
      });

      it("0003 records the voice of earlier jobs as female (they were dubbed in it); new jobs default to auto", async () => {
        const url = await backend.fresh();
        const old = await databaseAt(url, "0002_holds_and_error_messages");
        try {
          await sql`insert into accounts (id, created_at) values ('acct_old', 1)`.execute(old);
          await sql`insert into jobs (id, account_id, status, source_url, source_lang, target_lang,
            attempts, created_at, updated_at) values ('j1', 'acct_old', 'completed', 'u', 'en', 'es', 1, 1, 1)`.execute(
            old,
          );
        } finally {
          await old.destroy();
        }
        const migrated = await openDatabase(url);
        try {
          expect((await migrated.jobs.get("acct_old", "j1"))?.voice).toBe("female");
          const { job } = await migrated.jobs.create({
            id: "j2",
            accountId: "acct_old",
            sourceUrl: "u",
            sourceLang: "en",
            targetLang: "es",
          });
          expect(job.voice).toBe("auto");
        } finally {
          await migrated.close();
        }
      });

      it("close() is idempotent", async () => {
        const instance = await openDatabase(backend.url);
        await instance.close();
        await instance.close();
      });
    });

    describe("accounts", () => {
      it("ensureKey is idempotent: one account, one grant, the configured balance", async () => {
        const first = await db.accounts.ensureKey("dev-key", { balanceUsd: 12.5, entitlements: ["dubbing"] });
        const second = await db.accounts.ensureKey("dev-key", {
          balanceUsd: 12.5,
          entitlements: ["dubbing"],
        });
        expect(second).toEqual(first);
        expect(first.entitlements).toEqual(["dubbing"]);
        expect(await count("accounts")).toBe(1);
        expect(await count("ledger_entries", "kind = 'grant'")).toBe(1);
        expect(await db.accounts.balanceUsd(first.id)).toBe(12.5);
      });

      it("ensureKey under concurrency (10 at once on two instances) still makes one account and one grant", async () => {
        const results = await Promise.all(
          Array.from({ length: 10 }, (_, i) =>
            (i % 2 === 0 ? db : db2).accounts.ensureKey("racy-key", {
              balanceUsd: 3.25,
              entitlements: ["realtime", "dubbing"],
            }),
          ),
        );
        expect(new Set(results.map((a) => a.id)).size).toBe(1);
        expect(await count("accounts")).toBe(1);
        expect(await count("api_keys")).toBe(1);
        expect(await count("ledger_entries")).toBe(1);
        expect(await db.accounts.balanceUsd(results[0]!.id)).toBe(3.25);
      });

      it("a later change of the configured balance does not grant again; entitlements follow the configuration", async () => {
        const first = await db.accounts.ensureKey("k", { balanceUsd: 5, entitlements: ["dubbing"] });
        const later = await db.accounts.ensureKey("k", { balanceUsd: 50, entitlements: ["realtime"] });
        expect(later.id).toBe(first.id);
        expect(later.entitlements).toEqual(["realtime"]);
        expect(await db.accounts.balanceUsd(first.id)).toBe(5);
        expect(await db.accounts.findByKey("k")).toEqual(later);
      });

      it("different keys get different accounts", async () => {
        const a = await db.accounts.ensureKey("key-a", { balanceUsd: 1, entitlements: [] });
        const b = await db.accounts.ensureKey("key-b", { balanceUsd: 2, entitlements: [] });
        expect(a.id).not.toBe(b.id);
        expect(await db.accounts.balanceUsd(a.id)).toBe(1);
        expect(await db.accounts.balanceUsd(b.id)).toBe(2);
      });

      it("findByKey finds the account by its key and nothing for a wrong key", async () => {
        const created = await db.accounts.ensureKey("right-key", {
          balanceUsd: 1,
          entitlements: ["dubbing"],
        });
        expect(await db2.accounts.findByKey("right-key")).toEqual(created);
        expect(await db.accounts.findByKey("wrong-key")).toBeUndefined();
        expect(await db.accounts.findByKey("right-key ")).toBeUndefined();
        expect(await db.accounts.findByKey("")).toBeUndefined();
      });

      it("keys are stored only as SHA-256 digests", async () => {
        const key = `sk-plaintext-${randomUUID()}`;
        await db.accounts.ensureKey(key, { balanceUsd: 1, entitlements: ["dubbing"] });
        const keys = await backend.raw.query("SELECT * FROM api_keys");
        expect(keys.map((row) => row.key_hash)).toEqual([sha256(key)]);
        for (const table of TABLES) {
          const dump = JSON.stringify(await backend.raw.query(`SELECT * FROM ${table}`));
          expect(dump).not.toContain(key);
        }
      });

      it("an account with no ledger entries has a zero balance", async () => {
        expect(await db.accounts.balanceUsd("acct_nobody")).toBe(0);
      });
    });

    describe("uploads", () => {
      it("creates and reads back an upload", async () => {
        const accountId = await account();
        const expiresAt = new Date(Date.now() + 3_600_000);
        const { record: created, maxBytes } = await db.uploads.create({
          id: "up-1",
          accountId,
          objectKey: "uploads/up-1",
          contentType: "video/mp4",
          filename: "talk.mp4",
          expiresAt,
          maxBytes: 1000,
          quotaBytes: 5000,
          sizesRecorded: true,
        });
        expect(maxBytes).toBe(1000);
        expect(created.expiresAt.getTime()).toBe(expiresAt.getTime());
        expect(created.createdAt).toBeInstanceOf(Date);
        expect(created.deletedAt).toBeNull();
        expect(await db2.uploads.get("up-1")).toEqual(created);
        expect(await db.uploads.get("up-missing")).toBeUndefined();
      });

      it("retention keeps an upload while a job naming it is unfinished or a naming has no job yet", async () => {
        const accountId = await account();
        const past = new Date(Date.now() - 60_000);
        const make = (id: string) =>
          db.uploads.create({
            id,
            accountId,
            objectKey: `uploads/${id}`,
            contentType: "video/mp4",
            filename: "talk.mp4",
            expiresAt: past,
            maxBytes: 10,
            quotaBytes: 1000,
            sizesRecorded: true,
          });
        const sweep = () =>
          db2.retention.expireUploads({
            unusedBefore: Date.now(),
            namedBefore: Date.now() - 3_600_000,
            uploadSourcePrefix: "upload:",
          });
        await make("ret-unused");
        await make("ret-named");
        // Named by a job creation whose job is not inserted yet: kept (its naming is recent).
        expect(await db.uploads.name("ret-named")).toBe(true);
        expect(await sweep()).toBe(1);
        expect((await db.uploads.get("ret-unused"))!.deletedAt).not.toBeNull();
        expect((await db.uploads.get("ret-named"))!.deletedAt).toBeNull();
        // Its job is inserted and pending: kept.
        const { job } = await db.jobs.create({
          id: `job-ret-${accountId}`,
          accountId,
          sourceUrl: "upload:ret-named",
          sourceLang: "en",
          targetLang: "es",
        });
        expect(await sweep()).toBe(0);
        // The job fails: the upload goes, once, and can no longer be named.
        const claimed = (await db.jobs.claim("w", 60_000))!;
        expect(claimed.id).toBe(job.id);
        await db.jobs.fail(job.id, "w", { code: "download_failed", message: "x" });
        expect(await sweep()).toBe(1);
        expect(await sweep()).toBe(0);
        expect(await db.uploads.name("ret-named")).toBe(false);
        const purge = await db.retention.objectsToPurge(10);
        expect(purge.map((o) => o.objectKey).sort()).toEqual(["uploads/ret-named", "uploads/ret-unused"]);
        for (const object of purge) await db2.retention.purged(object.kind, object.id);
        expect(await db.retention.objectsToPurge(10)).toEqual([]);
      });

      it("one process at a time holds the sweep lease", async () => {
        expect(await db.retention.acquireLease("sweep", "a", 60_000)).toBe(true);
        expect(await db2.retention.acquireLease("sweep", "b", 60_000)).toBe(false);
        expect(await db.retention.acquireLease("sweep", "a", 1)).toBe(true);
        // Free once a's 1 ms lease has run out.
        await vi.waitFor(async () =>
          expect(await db2.retention.acquireLease("sweep", "b", 60_000)).toBe(true),
        );
        expect(await db.retention.acquireLease("sweep", "a", 60_000)).toBe(false);
        await db2.retention.releaseLease("sweep", "b");
        expect(await db.retention.acquireLease("sweep", "a", 60_000)).toBe(true);
      });

      it("gives concurrent uploads of one account no more than its quota in all", async () => {
        const accountId = await account();
        const expiresAt = new Date(Date.now() + 3_600_000);
        const attempts = await Promise.allSettled(
          Array.from({ length: 6 }, (_, i) =>
            (i % 2 === 0 ? db : db2).uploads.create({
              id: `quota-${accountId}-${i}`,
              accountId,
              objectKey: `uploads/quota-${accountId}-${i}`,
              contentType: "video/mp4",
              filename: "talk.mp4",
              expiresAt,
              maxBytes: 400,
              quotaBytes: 1000,
              sizesRecorded: false,
            }),
          ),
        );
        const granted = attempts.flatMap((a) => (a.status === "fulfilled" ? [a.value.maxBytes] : []));
        // 400 + 400 + the 200 left; the others are refused.
        expect(granted.sort((a, b) => a - b)).toEqual([200, 400, 400]);
        for (const refused of attempts.filter((a) => a.status === "rejected")) {
          expect((refused.reason as Error).name).toBe("StorageQuotaError");
        }
      });
    });

    describe("jobs: create, get, list", () => {
      it("creates a pending job with empty results and reads it back scoped by account", async () => {
        const accountId = await account();
        const other = await account();
        const before = Date.now();
        const { job, created } = await db.jobs.create({
          id: "job-1",
          accountId,
          sourceUrl: "https://example.com/a.mp4",
          sourceLang: "en",
          targetLang: "fr",
        });
        expect(created).toBe(true);
        expect(job).toMatchObject({
          id: "job-1",
          accountId,
          status: "pending",
          sourceUrl: "https://example.com/a.mp4",
          sourceLang: "en",
          targetLang: "fr",
          progress: null,
          error: null,
          errorMessage: null,
          inputDurationSec: null,
          costUsd: null,
          outputKey: null,
          outputKind: null,
          segments: null,
          idempotencyKey: null,
          attempts: 0,
        });
        expect(job.createdAt.getTime()).toBeGreaterThanOrEqual(before);
        expect(job.updatedAt.getTime()).toBe(job.createdAt.getTime());
        expect(await db2.jobs.get(accountId, "job-1")).toEqual(job);
        expect(await db.jobs.get(other, "job-1")).toBeUndefined();
        expect(await db.jobs.get(accountId, "job-404")).toBeUndefined();
      });

      it("a duplicate job id is an error, not a silent no-op", async () => {
        const accountId = await account();
        await createJobs(accountId, 1);
        await expect(
          db.jobs.create({ id: "job-000", accountId, sourceUrl: "u", sourceLang: "en", targetLang: "es" }),
        ).rejects.toThrow();
      });

      it("lists newest first with limit, offset and the total, per account", async () => {
        const accountId = await account();
        const other = await account();
        await createJobs(other, 2, "other");
        for (let i = 0; i < 5; i++) {
          await createJobs(accountId, 1, `job-${i}`);
          await nextMillisecond(); // distinct creation times; equal ones fall back to id order
        }
        const page1 = await db.jobs.list(accountId, 2, 0);
        expect(page1.total).toBe(5);
        expect(page1.jobs.map((j) => j.id)).toEqual(["job-4-000", "job-3-000"]);
        const page3 = await db.jobs.list(accountId, 2, 4);
        expect(page3.jobs.map((j) => j.id)).toEqual(["job-0-000"]);
        expect(page3.total).toBe(5);
        const all = await db2.jobs.list(accountId, 100, 0);
        expect(all.jobs.map((j) => j.id)).toEqual([
          "job-4-000",
          "job-3-000",
          "job-2-000",
          "job-1-000",
          "job-0-000",
        ]);
        expect((await db.jobs.list(other, 10, 0)).total).toBe(2);
        expect(await db.jobs.list(accountId, 10, 10)).toEqual({ jobs: [], total: 5 });
      });

      it("breaks ties in creation time by id, descending", async () => {
        const accountId = await account();
        await createJobs(accountId, 12);
        // Force equal timestamps, then the id decides.
        await backend.raw.query("UPDATE jobs SET created_at = 1000");
        const { jobs } = await db.jobs.list(accountId, 3, 0);
        expect(jobs.map((j) => j.id)).toEqual(["job-011", "job-010", "job-009"]);
      });

      it("an idempotency key returns the same job (also under concurrency), per account", async () => {
        const accountId = await account();
        const other = await account();
        const spec = { sourceUrl: "https://example.com/x.mp4", sourceLang: "en", targetLang: "de" };
        const first = await db.jobs.create({ id: "j-a", accountId, idempotencyKey: "idem-1", ...spec });
        const again = await db2.jobs.create({ id: "j-b", accountId, idempotencyKey: "idem-1", ...spec });
        expect(first.created).toBe(true);
        expect(again.created).toBe(false);
        expect(again.job).toEqual(first.job);
        expect(first.job.idempotencyKey).toBe("idem-1");

        const racing = await Promise.all(
          Array.from({ length: 8 }, (_, i) =>
            (i % 2 ? db : db2).jobs.create({ id: `race-${i}`, accountId, idempotencyKey: "idem-2", ...spec }),
          ),
        );
        expect(racing.filter((r) => r.created)).toHaveLength(1);
        expect(new Set(racing.map((r) => r.job.id)).size).toBe(1);

        const elsewhere = await db.jobs.create({
          id: "j-c",
          accountId: other,
          idempotencyKey: "idem-1",
          ...spec,
        });
        expect(elsewhere.created).toBe(true);
        expect(await count("jobs")).toBe(3);
      });
    });

    describe("jobs: leases", () => {
      it("claims the oldest claimable job, takes the lease and counts the attempt", async () => {
        const accountId = await account();
        await createJobs(accountId, 3);
        const claimed = await db.jobs.claim("w1", 60_000);
        expect(claimed).toMatchObject({ id: "job-000", status: "pending", attempts: 1 });
        const rows = await backend.raw.query("SELECT lease_owner, lease_expires_at FROM jobs WHERE id = ?", [
          "job-000",
        ]);
        expect(rows[0]?.lease_owner).toBe("w1");
        expect(Number(rows[0]?.lease_expires_at)).toBeGreaterThan(Date.now() + 50_000);
        // A claimed job, even still "pending", is not handed out again while its lease runs.
        expect((await db2.jobs.claim("w2", 60_000))?.id).toBe("job-001");
        expect((await db2.jobs.claim("w2", 60_000))?.id).toBe("job-002");
        expect(await db.jobs.claim("w3", 60_000)).toBeUndefined();
      });

      it("two instances with several workers claiming 20 jobs concurrently never share one", async () => {
        const accountId = await account();
        await createJobs(accountId, 20);
        const drain = async (instance: Database, worker: string): Promise<string[]> => {
          const got: string[] = [];
          for (;;) {
            const job = await instance.jobs.claim(worker, 60_000);
            if (!job) return got;
            got.push(job.id);
          }
        };
        const results = await Promise.all([
          drain(db, "w1"),
          drain(db2, "w2"),
          drain(db, "w3"),
          drain(db2, "w4"),
        ]);
        const all = results.flat();
        expect(all).toHaveLength(20);
        expect(new Set(all).size).toBe(20);
        const attempts = await backend.raw.query("SELECT DISTINCT attempts FROM jobs");
        expect(attempts.map((row) => Number(row.attempts))).toEqual([1]);
      });

      it("claims from the account with the fewest running jobs, round the accounts, oldest first within each", async () => {
        const [a, b, c] = [await account(), await account(), await account()];
        // Oldest first would take all of a's jobs before any of b's or c's.
        await createJobs(a, 3, "a");
        await createJobs(b, 2, "b");
        await createJobs(c, 1, "c");
        const order: string[] = [];
        for (let i = 0; ; i++) {
          const job = await (i % 2 ? db2 : db).jobs.claim(`w${i}`, 60_000);
          if (!job) break;
          order.push(job.id);
        }
        expect(order).toEqual(["a-000", "b-000", "c-000", "a-001", "b-001", "a-002"]);
      });

      it("one worker goes round the accounts: the account served least recently comes first", async () => {
        const [a, b] = [await account(), await account()];
        await createJobs(a, 3, "a");
        await createJobs(b, 1, "b");
        const served: string[] = [];
        for (;;) {
          const job = await db.jobs.claim("only", 60_000);
          if (!job) break;
          served.push(job.id);
          await db.jobs.fail(job.id, "only", { code: "download_failed", message: "x" });
        }
        expect(served).toEqual(["a-000", "b-000", "a-001", "a-002"]);
      });

      it("caps an account's unfinished jobs, counted in the database (two instances at once); finished ones free a place", async () => {
        const [busy, other] = [await account(), await account()];
        const limits = { maxActiveJobs: 3 };
        const attempt = (instance: Database, i: number) =>
          instance.jobs
            .create(
              {
                id: `cap-${i}`,
                accountId: busy,
                sourceUrl: "https://example.com/v.mp4",
                sourceLang: "en",
                targetLang: "es",
              },
              limits,
            )
            .then(
              () => "created",
              (error: unknown) => (error instanceof ActiveJobsLimitError ? `limit ${error.limit}` : error),
            );
        const outcomes = await Promise.all(Array.from({ length: 8 }, (_, i) => attempt(i % 2 ? db2 : db, i)));
        expect(outcomes.filter((o) => o === "created")).toHaveLength(3);
        expect(outcomes.filter((o) => o === "limit 3")).toHaveLength(5);
        // Another account is not affected.
        await db.jobs.create(
          {
            id: "other-0",
            accountId: other,
            sourceUrl: "https://example.com/v.mp4",
            sourceLang: "en",
            targetLang: "es",
          },
          limits,
        );
        const job = await db.jobs.claim("w", 60_000);
        expect(job?.accountId).toBe(busy);
        await db.jobs.fail(job!.id, "w", { code: "download_failed", message: "x" });
        expect(await attempt(db2, 100)).toBe("created");
        expect(await attempt(db, 101)).toBe("limit 3");
      });

      it("an expired lease is reclaimed by another worker; the job keeps its state and the old worker is locked out", async () => {
        const accountId = await account();
        const [job] = await createJobs(accountId, 1);
        await db.jobs.claim("dead", 60_000);
        expect(await db.jobs.update(job!.id, "dead", { status: "processing", progress: progress(30) })).toBe(
          true,
        );
        expect(await db2.jobs.claim("alive", 60_000)).toBeUndefined();
        await expireLeases();
        const reclaimed = await db2.jobs.claim("alive", 60_000);
        expect(reclaimed).toMatchObject({
          id: job!.id,
          status: "processing",
          attempts: 2,
          progress: progress(30),
        });
        expect(await db.jobs.heartbeat(job!.id, "dead", 60_000)).toBe(false);
        expect(await db.jobs.update(job!.id, "dead", { progress: progress(90) })).toBe(false);
        expect(await db.jobs.fail(job!.id, "dead", { code: "processing_failed", message: "late" })).toBe(
          false,
        );
        expect(
          await db.jobs.complete(job!.id, "dead", { outputKey: "x", costUsd: 1, progress: progress(100) }),
        ).toBe(false);
        expect(await db2.jobs.update(job!.id, "alive", { progress: progress(40) })).toBe(true);
        expect((await db.jobs.get(accountId, job!.id))?.progress).toEqual(progress(40));
      });

      it("heartbeat extends the lease so the job is not reclaimed", async () => {
        const accountId = await account();
        const [job] = await createJobs(accountId, 1);
        await db.jobs.claim("w1", 1_000);
        await expireLeases();
        expect(await db.jobs.heartbeat(job!.id, "w1", 60_000)).toBe(true);
        const rows = await backend.raw.query("SELECT lease_expires_at FROM jobs");
        expect(Number(rows[0]?.lease_expires_at)).toBeGreaterThan(Date.now() + 50_000);
        expect(await db2.jobs.claim("w2", 60_000)).toBeUndefined();
      });

      it("update and heartbeat by a worker without the lease are refused", async () => {
        const accountId = await account();
        const [job, unclaimed] = await createJobs(accountId, 2);
        await db.jobs.claim("owner", 60_000);
        expect(await db.jobs.heartbeat(job!.id, "intruder", 60_000)).toBe(false);
        expect(await db.jobs.update(job!.id, "intruder", { status: "processing" })).toBe(false);
        expect(await db.jobs.fail(job!.id, "intruder", { code: "processing_failed", message: "nope" })).toBe(
          false,
        );
        expect(await db.jobs.update(unclaimed!.id, "owner", { status: "processing" })).toBe(false);
        expect(await db.jobs.heartbeat("job-missing", "owner", 60_000)).toBe(false);
        expect((await db.jobs.get(accountId, job!.id))?.status).toBe("pending");
      });

      it("update applies the worker's fields", async () => {
        const accountId = await account();
        const [job] = await createJobs(accountId, 1);
        await db.jobs.claim("w", 60_000);
        const segments = [
          { startSec: 0, endSec: 1.5, speaker: "A", text: "Hello", translatedText: "Hola" },
          { startSec: 1.5, endSec: 3.25, text: "World", translatedText: "Mundo" },
        ];
        expect(
          await db.jobs.update(job!.id, "w", {
            status: "uploading",
            progress: progress(80, "mux"),
            inputDurationSec: 3.25,
            outputKind: "video",
            segments,
          }),
        ).toBe(true);
        const stored = await db2.jobs.get(accountId, job!.id);
        expect(stored).toMatchObject({
          status: "uploading",
          progress: progress(80, "mux"),
          inputDurationSec: 3.25,
          outputKind: "video",
          segments,
        });
        expect(stored!.updatedAt.getTime()).toBeGreaterThanOrEqual(stored!.createdAt.getTime());
        await expect(db.jobs.update(job!.id, "w", { status: "completed" })).rejects.toThrow(/complete/);
      });

      it("progress.percent never decreases through update or complete", async () => {
        const accountId = await account();
        const [job] = await createJobs(accountId, 1);
        await db.jobs.claim("w", 60_000);
        await db.jobs.update(job!.id, "w", { progress: progress(40, "asr") });
        await db.jobs.update(job!.id, "w", { progress: progress(10, "translate") });
        expect((await db.jobs.get(accountId, job!.id))?.progress).toEqual(progress(40, "translate"));
        await db.jobs.update(job!.id, "w", { progress: progress(70, "tts") });
        expect((await db.jobs.get(accountId, job!.id))?.progress).toEqual(progress(70, "tts"));
        await db.jobs.update(job!.id, "w", { status: "uploading" });
        expect((await db.jobs.get(accountId, job!.id))?.progress).toEqual(progress(70, "tts"));
        await db.jobs.complete(job!.id, "w", { outputKey: "o", costUsd: 0, progress: progress(50, "done") });
        expect((await db.jobs.get(accountId, job!.id))?.progress).toEqual(progress(70, "done"));
      });
    });

    describe("jobs: completion and billing", () => {
      it("complete records the result, releases the lease and charges once even when repeated", async () => {
        const accountId = await account(10);
        const [job] = await createJobs(accountId, 1);
        await db.jobs.claim("w", 60_000);
        const result = {
          outputKey: "results/job-000.mp4",
          costUsd: 0.123456,
          progress: progress(100, "done"),
        };
        expect(await db.jobs.complete(job!.id, "w", result)).toBe(true);
        expect(await db.jobs.complete(job!.id, "w", result)).toBe(false);
        expect(await db2.jobs.complete(job!.id, "w", { ...result, costUsd: 5 })).toBe(false);
        const stored = await db.jobs.get(accountId, job!.id);
        expect(stored).toMatchObject({
          status: "completed",
          outputKey: "results/job-000.mp4",
          costUsd: 0.123456,
          progress: progress(100, "done"),
          attempts: 1,
        });
        const lease = await backend.raw.query("SELECT lease_owner, lease_expires_at FROM jobs");
        expect(lease).toEqual([{ lease_owner: null, lease_expires_at: null }]);
        expect(await count("ledger_entries", "kind = 'charge'")).toBe(1);
        expect(await db.accounts.balanceUsd(accountId)).toBe(9.876544);
        // Completed jobs are never claimed again.
        expect(await db.jobs.claim("w2", 60_000)).toBeUndefined();
      });

      it("two workers completing the same job at once charge exactly once", async () => {
        const accountId = await account(10);
        const [job] = await createJobs(accountId, 1);
        await db.jobs.claim("slow", 60_000);
        await expireLeases();
        await db2.jobs.claim("fast", 60_000);
        const result = { outputKey: "out", costUsd: 2, progress: progress(100) };
        const outcomes = await Promise.all([
          db.jobs.complete(job!.id, "slow", result),
          db2.jobs.complete(job!.id, "fast", result),
          db.jobs.complete(job!.id, "fast", result),
          db2.jobs.complete(job!.id, "fast", result),
        ]);
        expect(outcomes[0]).toBe(false);
        expect(outcomes.filter(Boolean)).toHaveLength(1);
        expect(await count("ledger_entries", "kind = 'charge' AND job_id = ?", [job!.id])).toBe(1);
        expect(await db.accounts.balanceUsd(accountId)).toBe(8);
      });

      it("failed jobs cost nothing, keep their error and are not claimed again", async () => {
        const accountId = await account(10);
        const [job] = await createJobs(accountId, 1);
        await db.jobs.claim("w", 60_000);
        const reason = { code: "download_failed", message: "the source answered HTTP 404" } as const;
        expect(await db.jobs.fail(job!.id, "w", reason)).toBe(true);
        expect(await db.jobs.fail(job!.id, "w", { code: "processing_failed", message: "again" })).toBe(false);
        expect(
          await db.jobs.complete(job!.id, "w", { outputKey: "o", costUsd: 3, progress: progress(100) }),
        ).toBe(false);
        expect(await db.jobs.get(accountId, job!.id)).toMatchObject({
          status: "failed",
          error: "download_failed",
          errorMessage: "the source answered HTTP 404",
          costUsd: null,
        });
        expect(await count("ledger_entries", "kind = 'charge'")).toBe(0);
        expect(await db.accounts.balanceUsd(accountId)).toBe(10);
        expect(await db.jobs.claim("w2", 60_000)).toBeUndefined();
      });

      it("the balance is grants minus charges, exact to the micro-dollar", async () => {
        const accountId = await account(1);
        const other = await account(1);
        await createJobs(accountId, 3);
        await createJobs(other, 1, "other");
        const costs = [0.000001, 0.25, 0.333333];
        for (;;) {
          const job = await db.jobs.claim("w", 60_000);
          if (!job) break;
          const costUsd = job.accountId === accountId ? costs.shift()! : 0.5;
          expect(
            await db.jobs.complete(job.id, "w", { outputKey: job.id, costUsd, progress: progress(100) }),
          ).toBe(true);
        }
        expect(await db.accounts.balanceUsd(accountId)).toBe(0.416666);
        expect(await db.accounts.balanceUsd(other)).toBe(0.5);
        const entries = await backend.raw.query(
          "SELECT kind, amount_micro_usd FROM ledger_entries WHERE account_id = ? ORDER BY amount_micro_usd",
          [accountId],
        );
        expect(entries.map((e) => [e.kind, Number(e.amount_micro_usd)])).toEqual([
          ["charge", -333333],
          ["charge", -250000],
          ["charge", -1],
          ["grant", 1_000_000],
        ]);
      });

      it("a charge can overdraw the account (the balance goes negative, never re-charged)", async () => {
        const accountId = await account(1);
        const [job] = await createJobs(accountId, 1);
        await db.jobs.claim("w", 60_000);
        expect(
          await db.jobs.complete(job!.id, "w", { outputKey: "o", costUsd: 2.5, progress: progress(100) }),
        ).toBe(true);
        expect(await db.accounts.balanceUsd(accountId)).toBe(-1.5);
      });
    });

    describe("jobs: balance holds", () => {
      /** Claims every pending job, each by its own worker (its `holder`). */
      async function claimAll(): Promise<{ job: JobRecord; holder: string }[]> {
        const claimed: { job: JobRecord; holder: string }[] = [];
        for (let i = 0; ; i++) {
          const holder = `w-${i}`;
          const job = await (i % 2 ? db2 : db).jobs.claim(holder, 60_000);
          if (!job) return claimed;
          claimed.push({ job, holder });
        }
      }

      it("concurrent holds from two instances never exceed the balance; the ledger never goes negative", async () => {
        const accountId = await account(7.5);
        await createJobs(accountId, 20);
        const jobs = await claimAll();
        const outcomes = await Promise.all(
          jobs.map(({ job, holder }, i) => (i % 2 ? db2 : db).jobs.reserve(job.id, holder, 1)),
        );
        const held = jobs.filter((_, i) => outcomes[i]!.status === "reserved");
        expect(held).toHaveLength(7);
        for (const outcome of outcomes.filter((o) => o.status !== "reserved")) {
          expect(outcome).toEqual({ status: "insufficient", availableUsd: expect.any(Number) });
          expect((outcome as { availableUsd: number }).availableUsd).toBeLessThan(1);
        }
        expect(await db.accounts.availableUsd(accountId)).toBe(0.5);
        expect(await db.accounts.balanceUsd(accountId)).toBe(7.5);
        for (const claimed of jobs) {
          const { job, holder } = claimed;
          if (held.includes(claimed)) {
            await db.jobs.complete(job.id, holder, { outputKey: "o", costUsd: 1, progress: progress(100) });
          } else {
            await db2.jobs.fail(job.id, holder, { code: "processing_failed", message: "uncovered" });
          }
        }
        expect(await db.accounts.balanceUsd(accountId)).toBe(0.5);
        expect(await db.accounts.availableUsd(accountId)).toBe(0.5);
        expect(await count("ledger_entries", "kind = 'charge'")).toBe(7);
      });

      it("holds racing completions (charge in, hold out) still never exceed the balance", async () => {
        const accountId = await account(5);
        await createJobs(accountId, 10);
        const jobs = await claimAll();
        const [first, rest] = [jobs.slice(0, 3), jobs.slice(3)];
        for (const { job, holder } of first)
          expect((await db.jobs.reserve(job.id, holder, 1)).status).toBe("reserved");
        const result = { outputKey: "o", costUsd: 1, progress: progress(100) };
        const [, outcomes] = await Promise.all([
          Promise.all(
            first.map(({ job, holder }, i) => (i % 2 ? db : db2).jobs.complete(job.id, holder, result)),
          ),
          Promise.all(rest.map(({ job, holder }, i) => (i % 2 ? db2 : db).jobs.reserve(job.id, holder, 1))),
        ]);
        const held = rest.filter((_, i) => outcomes[i]!.status === "reserved");
        expect(held).toHaveLength(2);
        for (const { job, holder } of held) await db.jobs.complete(job.id, holder, result);
        expect(await db.accounts.balanceUsd(accountId)).toBe(0);
        expect(await db.accounts.availableUsd(accountId)).toBe(0);
      });

      it("a job resumed after a crash holds and is charged once (holds are per job, not added up)", async () => {
        const accountId = await account(3);
        const [job] = await createJobs(accountId, 1);
        await db.jobs.claim("crashed", 60_000);
        expect(await db.jobs.reserve(job!.id, "crashed", 2)).toEqual({ status: "reserved" });
        expect(await db.accounts.availableUsd(accountId)).toBe(1);
        await expireLeases();
        await db2.jobs.claim("successor", 60_000);
        expect(await db.jobs.reserve(job!.id, "crashed", 2)).toEqual({ status: "lost" });
        expect(await db2.jobs.reserve(job!.id, "successor", 2)).toEqual({ status: "reserved" });
        expect(await db2.jobs.reserve(job!.id, "successor", 2)).toEqual({ status: "reserved" });
        expect(await db.accounts.availableUsd(accountId)).toBe(1);
        // More than the balance minus the others' holds is refused; the earlier hold stays.
        expect(await db2.jobs.reserve(job!.id, "successor", 3.5)).toEqual({
          status: "insufficient",
          availableUsd: 3,
        });
        expect(await db.accounts.availableUsd(accountId)).toBe(1);
        const result = { outputKey: "o", costUsd: 2, progress: progress(100) };
        expect(await db2.jobs.complete(job!.id, "successor", result)).toBe(true);
        expect(await count("ledger_entries", "kind = 'charge'")).toBe(1);
        expect(await db.accounts.balanceUsd(accountId)).toBe(1);
        expect(await db.accounts.availableUsd(accountId)).toBe(1);
      });

      it("a graceful release frees the lease at once without counting the attempt and keeps the hold; failing drops it", async () => {
        const accountId = await account(2);
        const [job] = await createJobs(accountId, 1);
        await db.jobs.claim("stopping", 60_000);
        await db.jobs.reserve(job!.id, "stopping", 1.5);
        expect(await db.jobs.release(job!.id, "intruder")).toBe(false);
        expect(await db.jobs.release(job!.id, "stopping")).toBe(true);
        expect(await db.jobs.release(job!.id, "stopping")).toBe(false);
        const rows = await backend.raw.query("SELECT lease_owner, lease_expires_at, attempts FROM jobs");
        expect(rows.map((r) => [r.lease_owner, r.lease_expires_at, Number(r.attempts)])).toEqual([
          [null, null, 0],
        ]);
        expect(await db.accounts.availableUsd(accountId)).toBe(0.5);
        // No waiting for an expiry: the next worker takes it over straight away, as its first attempt.
        expect(await db2.jobs.claim("next", 60_000)).toMatchObject({ id: job!.id, attempts: 1 });
        await db2.jobs.fail(job!.id, "next", { code: "processing_failed", message: "x" });
        expect(await db.accounts.availableUsd(accountId)).toBe(2);
        expect(await db.accounts.balanceUsd(accountId)).toBe(2);
      });

      it("a job created with a hold takes it atomically with its creation, or is not created (402 material)", async () => {
        const accountId = await account(1);
        const spec = { accountId, sourceUrl: "upload:u", sourceLang: "en", targetLang: "es" };
        const reservation = { costUsd: 0.3, inputDurationSec: 36 };
        const attempts = await Promise.allSettled(
          Array.from({ length: 6 }, (_, i) =>
            (i % 2 ? db2 : db).jobs.create({ id: `held-${i}`, ...spec, reservation }),
          ),
        );
        const created = attempts.filter((a) => a.status === "fulfilled");
        expect(created).toHaveLength(3);
        for (const refused of attempts.filter((a) => a.status === "rejected")) {
          expect(refused.reason).toBeInstanceOf(InsufficientBalanceError);
          expect(refused.reason).toMatchObject({ requiredUsd: 0.3, availableUsd: expect.closeTo(0.1, 6) });
        }
        expect(await count("jobs")).toBe(3);
        expect(await db.accounts.availableUsd(accountId)).toBe(0.1);
        const [first] = created.map((a) => (a as PromiseFulfilledResult<{ job: JobRecord }>).value.job);
        expect(first).toMatchObject({ inputDurationSec: 36, costUsd: null });

        // A retry by idempotency key gets its job back even though another could not be covered now.
        const keyed = await db.jobs.create({
          id: "k-1",
          ...spec,
          idempotencyKey: "k",
          reservation: { costUsd: 0.1, inputDurationSec: 12 },
        });
        expect(keyed.created).toBe(true);
        const retried = await db2.jobs.create({ id: "k-2", ...spec, idempotencyKey: "k", reservation });
        expect(retried).toEqual({ job: keyed.job, created: false });
        await expect(db.jobs.create({ id: "k-3", ...spec, reservation })).rejects.toBeInstanceOf(
          InsufficientBalanceError,
        );

        // The worker's own hold of the same cost succeeds: creation's hold is the job's, not another's.
        const claimed = await db.jobs.claim("w", 60_000);
        expect(await db.jobs.reserve(claimed!.id, "w", 0.3)).toEqual({ status: "reserved" });
        expect(await db.accounts.availableUsd(accountId)).toBe(0);
      });
    });

    describe("the process table", () => {
      const heartbeat = (workerId: string, seenAt: number, live = 0) => ({
        workerId,
        address: `http://${workerId}:8080`,
        sharedSetup: "{}",
        live,
        capacity: 4,
        draining: false,
        startedAt: 1,
        seenAt,
      });

      it("keeps one row per process, refreshed by each heartbeat, read by the others", async () => {
        await backend.raw.query("DELETE FROM processes");
        await db.processes.beat(heartbeat("a", 1_000));
        await db2.processes.beat(heartbeat("b", 1_000));
        await db.processes.beat(heartbeat("a", 5_000, 3));
        expect(await db2.processes.seenSince(2_000)).toEqual([heartbeat("a", 5_000, 3)]);
        expect((await db2.processes.seenSince(0)).map((p) => p.workerId).sort()).toEqual(["a", "b"]);
        await db.processes.forgetUnseenSince(2_000);
        await db2.processes.remove("a");
        expect(await db.processes.seenSince(0)).toEqual([]);
      });
    });

    describe("separate processes", () => {
      let dir: string;
      beforeAll(async () => {
        dir = await mkdtemp(path.join(tmpdir(), "relay-db-proc-"));
      });
      afterAll(async () => {
        await rm(dir, { recursive: true, force: true });
      });

      it("migrate, seed, submit and work the same new database at once without double claims or charges", async () => {
        const url = await backend.fresh();
        const script = path.join(dir, "worker.mjs");
        // Each process opens the new database (migrations race), provisions the same key, submits the
        // same 30 jobs by idempotency key, then works jobs until none is left.
        await writeFile(
          script,
          `import { once } from "node:events";
import { openDatabase } from ${JSON.stringify(path.join(ROOT, "dist/db/index.js"))};
const [url, worker] = process.argv.slice(2);
const db = await openDatabase(url);
const account = await db.accounts.ensureKey("multi-process", { balanceUsd: 100, entitlements: ["dubbing"] });
for (let i = 0; i < 30; i++) {
  await db.jobs.create({ id: worker + "-" + i, accountId: account.id, sourceUrl: "u" + i, sourceLang: "en",
    targetLang: "es", idempotencyKey: "k" + i });
}
// Claim only once every process has submitted (the test answers "go" on stdin), so claims race.
console.log("submitted");
await once(process.stdin, "data");
const claimed = [];
for (;;) {
  const job = await db.jobs.claim(worker, 60000);
  if (!job) break;
  claimed.push(job.id);
  await db.jobs.update(job.id, worker, { status: "processing", progress: { stage: "a", stageName: "A", percent: 50 } });
  await db.jobs.complete(job.id, worker, { outputKey: job.id, costUsd: 0.5, progress: { stage: "z", stageName: "Z", percent: 100 } });
}
console.log(JSON.stringify({ account: account.id, claimed }));
await db.close();
`,
        );
        const workers = ["p1", "p2", "p3"].map((worker) => {
          const child = spawn(process.execPath, [script, url, worker], {
            cwd: ROOT,
            stdio: ["pipe", "pipe", "inherit"],
            timeout: 45_000,
          });
          let stdout = "";
          const submitted = new Promise<void>((resolve) =>
            child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
              stdout += chunk;
              if (stdout.includes("submitted\n")) resolve();
            }),
          );
          const exited = once(child, "close").then(() => ({ stdout }));
          return { child, submitted, exited };
        });
        await Promise.all(workers.map((w) => w.submitted));
        for (const { child } of workers) child.stdin.end("go\n");
        const outputs = await Promise.all(workers.map((w) => w.exited));
        const results = outputs.map(
          ({ stdout }) =>
            JSON.parse(stdout.trim().split("\n").at(-1)!) as { account: string; claimed: string[] },
        );
        expect(new Set(results.map((r) => r.account)).size).toBe(1);
        const claimed = results.flatMap((r) => r.claimed);
        expect(claimed).toHaveLength(30);
        expect(new Set(claimed).size).toBe(30);

        const check = await openDatabase(url);
        try {
          expect(await check.accounts.balanceUsd(results[0]!.account)).toBe(85);
          const { jobs, total } = await check.jobs.list(results[0]!.account, 100, 0);
          expect(total).toBe(30);
          expect(jobs.every((job) => job.status === "completed" && job.attempts === 1)).toBe(true);
        } finally {
          await check.close();
        }
      });
    });
  });
}

dbSuite("SQLite", false, sqliteBackend);
dbSuite("PostgreSQL", pgProblem !== undefined, postgresBackend);

describe("opening", () => {
  it("opens sqlite::memory: with the full schema", async () => {
    const db = await openDatabase("sqlite::memory:");
    try {
      expect(db.kind).toBe("sqlite");
      const account = await db.accounts.ensureKey("mem", { balanceUsd: 2, entitlements: ["dubbing"] });
      const { job } = await db.jobs.create({
        id: "m1",
        accountId: account.id,
        sourceUrl: "u",
        sourceLang: "en",
        targetLang: "es",
      });
      expect((await db.jobs.claim("w", 1_000))?.id).toBe(job.id);
      expect(
        await db.jobs.complete(job.id, "w", { outputKey: "o", costUsd: 0.5, progress: progress(100) }),
      ).toBe(true);
      expect(await db.accounts.balanceUsd(account.id)).toBe(1.5);
    } finally {
      await db.close();
    }
  });

  it("a file that is not a database fails the open cleanly, and the path can be opened again once fixed", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "relay-db-bad-"));
    try {
      const file = path.join(dir, "garbage.db");
      await writeFile(file, "this is not an SQLite database, just text padded out. ".repeat(100));
      await expect(openDatabase(`sqlite:${file}`)).rejects.toThrow(/not a database/);
      await rm(file);
      const db = await openDatabase(`sqlite:${file}`);
      await db.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("an unreachable PostgreSQL server fails the open", async () => {
    await expect(openDatabase("postgres://postgres@127.0.0.1:1/nothing")).rejects.toThrow();
  });

  it("rejects unsupported URLs", async () => {
    await expect(openDatabase("mysql://root@localhost/db")).rejects.toThrow(/unsupported database URL/);
  });
});
