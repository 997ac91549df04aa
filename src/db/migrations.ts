import { sql, type Kysely, type Migration, type MigrationProvider } from "kysely";

/**
 * The schema, as in-code migrations run by Kysely's `Migrator` at open. One definition serves both
 * dialects, so only portable types are used (text, integer, bigint, double precision); see
 * `schema.ts` for the storage conventions. Append new migrations; never edit applied ones.
 */
const migrations: Record<string, Migration> = {
  "0001_dubbing": {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable("accounts")
        .addColumn("id", "text", (col) => col.primaryKey())
        .addColumn("created_at", "bigint", (col) => col.notNull())
        .execute();

      await db.schema
        .createTable("api_keys")
        .addColumn("key_hash", "text", (col) => col.primaryKey())
        .addColumn("account_id", "text", (col) => col.notNull().references("accounts.id"))
        .addColumn("entitlements", "text", (col) => col.notNull())
        .addColumn("created_at", "bigint", (col) => col.notNull())
        .execute();
      await db.schema.createIndex("api_keys_account_idx").on("api_keys").column("account_id").execute();

      await db.schema
        .createTable("uploads")
        .addColumn("id", "text", (col) => col.primaryKey())
        .addColumn("account_id", "text", (col) => col.notNull().references("accounts.id"))
        .addColumn("object_key", "text", (col) => col.notNull())
        .addColumn("content_type", "text", (col) => col.notNull())
        .addColumn("filename", "text", (col) => col.notNull())
        .addColumn("expires_at", "bigint", (col) => col.notNull())
        .addColumn("created_at", "bigint", (col) => col.notNull())
        .execute();
      await db.schema.createIndex("uploads_account_idx").on("uploads").column("account_id").execute();

      await db.schema
        .createTable("jobs")
        .addColumn("id", "text", (col) => col.primaryKey())
        .addColumn("account_id", "text", (col) => col.notNull().references("accounts.id"))
        .addColumn("status", "text", (col) => col.notNull())
        .addColumn("source_url", "text", (col) => col.notNull())
        .addColumn("source_lang", "text", (col) => col.notNull())
        .addColumn("target_lang", "text", (col) => col.notNull())
        .addColumn("progress", "text")
        .addColumn("error", "text")
        .addColumn("input_duration_sec", "double precision")
        .addColumn("cost_micro_usd", "bigint")
        .addColumn("output_key", "text")
        .addColumn("output_kind", "text")
        .addColumn("segments", "text")
        .addColumn("idempotency_key", "text")
        .addColumn("attempts", "integer", (col) => col.notNull().defaultTo(0))
        .addColumn("lease_owner", "text")
        .addColumn("lease_expires_at", "bigint")
        .addColumn("created_at", "bigint", (col) => col.notNull())
        .addColumn("updated_at", "bigint", (col) => col.notNull())
        .addCheckConstraint(
          "jobs_status_check",
          sql`status in ('pending', 'downloading', 'processing', 'uploading', 'completed', 'failed')`,
        )
        .addCheckConstraint(
          "jobs_output_kind_check",
          sql`output_kind is null or output_kind in ('video', 'audio')`,
        )
        // NULL keys never conflict (both dialects), so jobs without a key are unconstrained.
        .addUniqueConstraint("jobs_account_idempotency_key", ["account_id", "idempotency_key"])
        .execute();
      // Listing: newest first per account, with the id tie-break.
      await db.schema
        .createIndex("jobs_account_created_idx")
        .on("jobs")
        .columns(["account_id", "created_at", "id"])
        .execute();
      // Claiming: oldest job among the active statuses.
      await db.schema.createIndex("jobs_claim_idx").on("jobs").columns(["status", "created_at"]).execute();

      await db.schema
        .createTable("ledger_entries")
        .addColumn("id", "text", (col) => col.primaryKey())
        .addColumn("account_id", "text", (col) => col.notNull().references("accounts.id"))
        .addColumn("amount_micro_usd", "bigint", (col) => col.notNull())
        .addColumn("kind", "text", (col) => col.notNull())
        .addColumn("job_id", "text", (col) => col.references("jobs.id"))
        .addColumn("created_at", "bigint", (col) => col.notNull())
        .addCheckConstraint("ledger_entries_kind_check", sql`kind in ('grant', 'charge')`)
        // A job is charged at most once; grants (job_id NULL) are made unique by their id instead.
        .addUniqueConstraint("ledger_entries_job_kind", ["job_id", "kind"])
        .execute();
      await db.schema
        .createIndex("ledger_entries_account_idx")
        .on("ledger_entries")
        .column("account_id")
        .execute();
    },

    async down(db: Kysely<unknown>): Promise<void> {
      for (const table of ["ledger_entries", "jobs", "uploads", "api_keys", "accounts"]) {
        await db.schema.dropTable(table).execute();
      }
    },
  },
  "0002_holds_and_error_messages": {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema.alterTable("jobs").addColumn("reserved_micro_usd", "bigint").execute();
      await db.schema.alterTable("jobs").addColumn("error_message", "text").execute();
      // Balance checks sum the holds of an account's unfinished jobs.
      await db.schema
        .createIndex("jobs_account_status_idx")
        .on("jobs")
        .columns(["account_id", "status"])
        .execute();
      // Failures were stored as "<code>: <message>"; `error` now holds the spec's code alone.
      for (const code of LEGACY_ERROR_CODES) {
        await sql`update jobs set error = ${code}, error_message = substr(error, ${code.length + 3})
          where error like ${`${code}: %`}`.execute(db);
      }
      // The old balance failure has no code of its own in the spec.
      await sql`update jobs set error = 'processing_failed',
          error_message = 'insufficient balance: ' || substr(error, 23)
        where error like 'insufficient_balance: %'`.execute(db);
      await sql`update jobs set error_message = error, error = 'processing_failed'
        where error is not null and error_message is null`.execute(db);
    },

    async down(db: Kysely<unknown>): Promise<void> {
      await sql`update jobs set error = error || ': ' || error_message where error_message is not null`.execute(
        db,
      );
      await db.schema.dropIndex("jobs_account_status_idx").execute();
      await db.schema.alterTable("jobs").dropColumn("error_message").execute();
      await db.schema.alterTable("jobs").dropColumn("reserved_micro_usd").execute();
    },
  },
  "0003_job_voices": {
    async up(db: Kysely<unknown>): Promise<void> {
      // The voice a job is dubbed in: "auto" (each speaker matched), "female", "male" or a library
      // id. Jobs created before it were dubbed in the female default.
      await db.schema.alterTable("jobs").addColumn("voice", "text").execute();
      await sql`update jobs set voice = 'female'`.execute(db);
    },

    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.alterTable("jobs").dropColumn("voice").execute();
    },
  },
  "0004_processes": {
    async up(db: Kysely<unknown>): Promise<void> {
      // The service processes using this database, each refreshing its row every few seconds.
      await db.schema
        .createTable("processes")
        .addColumn("worker_id", "text", (col) => col.primaryKey())
        .addColumn("address", "text", (col) => col.notNull())
        .addColumn("shared_setup", "text", (col) => col.notNull())
        .addColumn("live", "integer", (col) => col.notNull())
        .addColumn("capacity", "integer", (col) => col.notNull())
        .addColumn("draining", "integer", (col) => col.notNull())
        .addColumn("started_at", "bigint", (col) => col.notNull())
        .addColumn("seen_at", "bigint", (col) => col.notNull())
        .execute();
    },

    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.dropTable("processes").execute();
    },
  },
  "0005_key_management": {
    async up(db: Kysely<unknown>): Promise<void> {
      // Keys made with `relay keys create` carry a label; a revoked key stays (for the ledger's
      // history) but no longer authenticates.
      await db.schema.alterTable("api_keys").addColumn("label", "text").execute();
      await db.schema.alterTable("api_keys").addColumn("revoked_at", "bigint").execute();
    },

    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.alterTable("api_keys").dropColumn("revoked_at").execute();
      await db.schema.alterTable("api_keys").dropColumn("label").execute();
    },
  },
  "0006_storage_retention": {
    async up(db: Kysely<unknown>): Promise<void> {
      // Uploads: the size the URL allows (counted against the account's quota until the real size
      // is known), the real size once stored, how many job creations named it (and when last), and
      // when retention deleted it (the row) and its object (purged).
      for (const column of ["max_bytes", "bytes", "named_at", "deleted_at", "purged_at"]) {
        await db.schema.alterTable("uploads").addColumn(column, "bigint").execute();
      }
      await db.schema
        .alterTable("uploads")
        .addColumn("named", "integer", (col) => col.notNull().defaultTo(0))
        .execute();
      // Uploads from before: every job that named one counts as a naming.
      await sql`update uploads set named = (select count(*) from jobs where jobs.source_url = 'upload:' || uploads.id)`.execute(
        db,
      );
      // Results: when retention deleted the job's output.
      await db.schema.alterTable("jobs").addColumn("output_expired_at", "bigint").execute();
      // The sweep finds the jobs naming an upload by their source.
      await db.schema.createIndex("jobs_source_url_idx").on("jobs").column("source_url").execute();
      // Named leases: one process of a fleet at a time runs the retention sweep.
      await db.schema
        .createTable("leases")
        .addColumn("name", "text", (col) => col.primaryKey())
        .addColumn("owner", "text", (col) => col.notNull())
        .addColumn("expires_at", "bigint", (col) => col.notNull())
        .execute();
    },

    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.dropTable("leases").execute();
      await db.schema.dropIndex("jobs_source_url_idx").execute();
      await db.schema.alterTable("jobs").dropColumn("output_expired_at").execute();
      for (const column of ["named", "purged_at", "deleted_at", "named_at", "bytes", "max_bytes"]) {
        await db.schema.alterTable("uploads").dropColumn(column).execute();
      }
    },
  },
  "0007_fair_claims": {
    async up(db: Kysely<unknown>): Promise<void> {
      // When a worker last took a job of the account: claims go round the accounts (jobs.ts).
      await db.schema.alterTable("accounts").addColumn("job_claimed_at", "bigint").execute();
    },

    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.alterTable("accounts").dropColumn("job_claimed_at").execute();
    },
  },
  "0008_job_context": {
    async up(db: Kysely<unknown>): Promise<void> {
      // Names and jargon for the job's recognition, translation and subtitles (src/core/glossary.ts).
      await db.schema
        .alterTable("jobs")
        .addColumn("context", "text", (column) => column.notNull().defaultTo(""))
        .execute();
    },

    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.alterTable("jobs").dropColumn("context").execute();
    },
  },
};

/** The failure codes of the spec, as 0001-era rows prefix their `error` with. */
const LEGACY_ERROR_CODES = [
  "video_too_long",
  "video_too_large",
  "unsupported_format",
  "download_failed",
  "processing_failed",
] as const;

export const migrationProvider: MigrationProvider = {
  getMigrations: () => Promise.resolve(migrations),
};
