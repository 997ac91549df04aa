import type { Kysely } from "kysely";
import { availableMicroUsd, InsufficientBalanceError, lockAccount } from "./billing.js";
import { ACTIVE_STATUSES, fromMicroUsd, toJobRecord, toMicroUsd, type Schema } from "./schema.js";
import { run, type TransactionRunner, type TxBody } from "./transactions.js";
import type { JobRecord, JobRecords, JobStatus, NewJob } from "./types.js";

/** The account already has `limit` jobs pending or running. */
export class ActiveJobsLimitError extends Error {
  override readonly name = "ActiveJobsLimitError";
  constructor(readonly limit: number) {
    super(`the account already has ${limit} unfinished jobs`);
  }
}

/** The API's side of the jobs table (the workers' side: src/db/job-leases.ts). */
export function createJobRecords(
  db: Kysely<Schema>,
  dialect: "sqlite" | "postgres",
  transaction: TransactionRunner,
): JobRecords {
  function* existingTx(job: NewJob): TxBody<JobRecord | undefined> {
    if (job.idempotencyKey === undefined) return undefined;
    const { rows } = yield* run(
      db
        .selectFrom("jobs")
        .selectAll()
        .where("account_id", "=", job.accountId)
        .where("idempotency_key", "=", job.idempotencyKey),
    );
    return rows[0] && toJobRecord(rows[0]);
  }

  function* createTx(
    job: NewJob,
    maxActiveJobs: number | undefined,
  ): TxBody<{ job: JobRecord; created: boolean }> {
    // A retried request gets its job back, even if the balance could no longer cover it.
    const earlier = yield* existingTx(job);
    if (earlier) return { job: earlier, created: false };
    const reserved = job.reservation && toMicroUsd(job.reservation.costUsd);
    if (reserved !== undefined || maxActiveJobs !== undefined) {
      yield* lockAccount(db, dialect, job.accountId);
    }
    if (maxActiveJobs !== undefined) {
      const { rows } = yield* run(
        db
          .selectFrom("jobs")
          .select((eb) => eb.fn.countAll<number | string>().as("active"))
          .where("account_id", "=", job.accountId)
          .where("status", "in", ACTIVE_STATUSES),
      );
      if (Number(rows[0]?.active ?? 0) >= maxActiveJobs) throw new ActiveJobsLimitError(maxActiveJobs);
    }
    if (reserved !== undefined) {
      const available = yield* availableMicroUsd(db, job.accountId);
      if (available < reserved) {
        throw new InsufficientBalanceError(fromMicroUsd(reserved), fromMicroUsd(available));
      }
    }
    const now = Date.now();
    const { rows } = yield* run(
      db
        .insertInto("jobs")
        .values({
          id: job.id,
          account_id: job.accountId,
          status: "pending",
          source_url: job.sourceUrl,
          source_lang: job.sourceLang,
          target_lang: job.targetLang,
          voice: job.voice ?? "auto",
          context: job.context ?? "",
          progress: null,
          error: null,
          error_message: null,
          input_duration_sec: job.reservation?.inputDurationSec ?? null,
          cost_micro_usd: null,
          reserved_micro_usd: reserved ?? null,
          output_key: null,
          output_kind: null,
          segments: null,
          idempotency_key: job.idempotencyKey ?? null,
          attempts: 0,
          lease_owner: null,
          lease_expires_at: null,
          created_at: now,
          updated_at: now,
        })
        // Only the idempotency key may collide quietly (a concurrent retry on PostgreSQL, which
        // waits for the other insert); a duplicate job id is still an error.
        .onConflict((oc) => oc.columns(["account_id", "idempotency_key"]).doNothing())
        .returningAll(),
    );
    if (rows[0]) return { job: toJobRecord(rows[0]), created: true };
    const existing = yield* existingTx(job);
    if (!existing) throw new Error(`job with idempotency key ${job.idempotencyKey} vanished`);
    return { job: existing, created: false };
  }

  return {
    async create(job, limits) {
      return transaction(() => createTx(job, limits?.maxActiveJobs));
    },

    async get(accountId, jobId) {
      const row = await db
        .selectFrom("jobs")
        .selectAll()
        .where("id", "=", jobId)
        .where("account_id", "=", accountId)
        .executeTakeFirst();
      return row && toJobRecord(row);
    },

    async list(accountId, limit, offset) {
      const [rows, count] = await Promise.all([
        db
          .selectFrom("jobs")
          .selectAll()
          .where("account_id", "=", accountId)
          .orderBy("created_at", "desc")
          .orderBy("id", "desc")
          .limit(limit)
          .offset(offset)
          .execute(),
        db
          .selectFrom("jobs")
          .select((eb) => eb.fn.countAll<number | string>().as("total"))
          .where("account_id", "=", accountId)
          .executeTakeFirstOrThrow(),
      ]);
      return { jobs: rows.map(toJobRecord), total: Number(count.total) };
    },

    async countByStatus() {
      const rows = await db
        .selectFrom("jobs")
        .select(["status", (eb) => eb.fn.countAll<number | string>().as("count")])
        .groupBy("status")
        .execute();
      const counts: Record<JobStatus, number> = {
        pending: 0,
        downloading: 0,
        processing: 0,
        uploading: 0,
        completed: 0,
        failed: 0,
      };
      for (const row of rows) counts[row.status] = Number(row.count);
      return counts;
    },
  };
}
