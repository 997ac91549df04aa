import type { Expression, ExpressionBuilder, Kysely, Selectable, SqlBool } from "kysely";
import { availableMicroUsd, lockAccount } from "./billing.js";
import {
  ACTIVE_STATUSES,
  fromMicroUsd,
  isTerminal,
  monotonicProgress,
  toJobRecord,
  toMicroUsd,
  type JobsTable,
  type Schema,
} from "./schema.js";
import { run, type TransactionRunner, type TxBody } from "./transactions.js";
import type { JobLeases, JobProgress, JobRecord, JobUpdate, ReserveResult } from "./types.js";

type JobsExpressions = ExpressionBuilder<Schema, "jobs">;

/** The worker's write guard: it holds the lease and the job has not finished. */
function heldBy(jobId: string, workerId: string) {
  return (eb: JobsExpressions): Expression<SqlBool> =>
    eb.and([eb("id", "=", jobId), eb("lease_owner", "=", workerId), eb("status", "in", ACTIVE_STATUSES)]);
}

function checkLeaseMs(leaseMs: number): void {
  if (!Number.isFinite(leaseMs) || leaseMs <= 0)
    throw new RangeError(`leaseMs must be positive, got ${leaseMs}`);
}

/** The dubbing workers' side of the jobs table (the API's side: src/db/job-records.ts). */
export function createJobLeases(
  db: Kysely<Schema>,
  dialect: "sqlite" | "postgres",
  transaction: TransactionRunner,
): JobLeases {
  // Row locks only exist on PostgreSQL; SQLite transactions already hold the database write lock.
  const postgres = dialect === "postgres";

  /**
   * The worker's job row, locked for the rest of the transaction (`FOR UPDATE` on PostgreSQL; SQLite
   * already holds the write lock); undefined once the lease is lost or the job has finished.
   */
  function* heldRowTx<C extends keyof JobsTable & string>(
    jobId: string,
    workerId: string,
    columns: readonly C[],
  ): TxBody<Pick<Selectable<JobsTable>, C> | undefined> {
    const { rows } = yield* run(
      db
        .selectFrom("jobs")
        .select(columns)
        .where(heldBy(jobId, workerId))
        .$if(postgres, (qb) => qb.forUpdate()),
    );
    // Kysely cannot reduce its selection type over a generic column list; it is this Pick.
    return rows[0] as Pick<Selectable<JobsTable>, C> | undefined;
  }

  function* updateTx(jobId: string, workerId: string, update: JobUpdate): TxBody<boolean> {
    const current = yield* heldRowTx(jobId, workerId, ["progress"]);
    if (!current) return false;
    yield* run(
      db
        .updateTable("jobs")
        .set({
          updated_at: Date.now(),
          ...(update.status !== undefined && { status: update.status }),
          ...(update.sourceLang !== undefined && { source_lang: update.sourceLang }),
          ...(update.progress !== undefined && {
            progress: JSON.stringify(monotonicProgress(current.progress, update.progress)),
          }),
          ...(update.inputDurationSec !== undefined && { input_duration_sec: update.inputDurationSec }),
          ...(update.outputKind !== undefined && { output_kind: update.outputKind }),
          ...(update.segments !== undefined && { segments: JSON.stringify(update.segments) }),
        })
        .where(heldBy(jobId, workerId)),
    );
    return true;
  }

  function* completeTx(
    jobId: string,
    workerId: string,
    result: { outputKey: string; costMicroUsd: number; progress: JobProgress },
  ): TxBody<boolean> {
    const current = yield* heldRowTx(jobId, workerId, ["account_id", "progress"]);
    if (!current) return false;
    // UNIQUE(job_id, kind) (and the derived id) make this a no-op if the job was ever charged.
    yield* run(
      db
        .insertInto("ledger_entries")
        .values({
          id: `charge:${jobId}`,
          account_id: current.account_id,
          amount_micro_usd: -result.costMicroUsd,
          kind: "charge",
          job_id: jobId,
          created_at: Date.now(),
        })
        .onConflict((oc) => oc.doNothing()),
    );
    yield* run(
      db
        .updateTable("jobs")
        .set({
          status: "completed",
          output_key: result.outputKey,
          cost_micro_usd: result.costMicroUsd,
          progress: JSON.stringify(monotonicProgress(current.progress, result.progress)),
          lease_owner: null,
          lease_expires_at: null,
          updated_at: Date.now(),
        })
        .where(heldBy(jobId, workerId)),
    );
    return true;
  }
  function* reserveTx(jobId: string, workerId: string, reserved: number): TxBody<ReserveResult> {
    const current = yield* heldRowTx(jobId, workerId, ["account_id"]);
    if (!current) return { status: "lost" };
    yield* lockAccount(db, dialect, current.account_id);
    // The job's own earlier hold (an attempt before a crash, or creation) is not counted against it.
    const available = yield* availableMicroUsd(db, current.account_id, jobId);
    if (available < reserved) return { status: "insufficient", availableUsd: fromMicroUsd(available) };
    yield* run(
      db
        .updateTable("jobs")
        .set({ reserved_micro_usd: reserved, updated_at: Date.now() })
        .where(heldBy(jobId, workerId)),
    );
    return { status: "reserved" };
  }

  function* claimTx(workerId: string, leaseMs: number): TxBody<JobRecord | undefined> {
    const now = Date.now();
    // One statement chooses and takes the job: SQLite runs it under the database write lock; on
    // PostgreSQL, SKIP LOCKED lets concurrent claimers pass over a row another claimer has just
    // locked instead of queueing for it. A job is claimable when active and unleased (never
    // claimed) or its lease has expired (its worker died); it keeps its status and progress, and
    // the new worker restarts it. Fairness: the account with the fewest running jobs first, so one
    // account's slow jobs cannot hold every worker; among equals the account served least recently
    // (round robin, even with one worker); within the account its oldest job.
    const { rows } = yield* run(
      db
        .updateTable("jobs")
        .set((eb) => ({
          lease_owner: workerId,
          lease_expires_at: now + leaseMs,
          attempts: eb("attempts", "+", 1),
          updated_at: now,
        }))
        .where((eb) =>
          eb(
            "id",
            "=",
            eb
              .selectFrom("jobs as candidate")
              .select("candidate.id")
              .where("candidate.status", "in", ACTIVE_STATUSES)
              .where((inner) =>
                inner.or([
                  inner("candidate.lease_expires_at", "is", null),
                  inner("candidate.lease_expires_at", "<", now),
                ]),
              )
              .orderBy((inner) =>
                inner
                  .selectFrom("jobs as running")
                  .select((count) => count.fn.countAll().as("running"))
                  .whereRef("running.account_id", "=", "candidate.account_id")
                  .where("running.status", "in", ACTIVE_STATUSES)
                  .where("running.lease_expires_at", ">=", now),
              )
              .orderBy((inner) =>
                inner
                  .selectFrom("accounts")
                  .select((served) =>
                    served.fn.coalesce("accounts.job_claimed_at", served.lit(0)).as("served"),
                  )
                  .whereRef("accounts.id", "=", "candidate.account_id"),
              )
              .orderBy("candidate.created_at")
              .orderBy("candidate.id")
              .limit(1)
              .$if(postgres, (qb) => qb.forUpdate().skipLocked()),
          ),
        )
        .returningAll(),
    );
    const row = rows[0];
    if (!row) return undefined;
    yield* run(db.updateTable("accounts").set({ job_claimed_at: now }).where("id", "=", row.account_id));
    return toJobRecord(row);
  }

  return {
    async claim(workerId, leaseMs) {
      checkLeaseMs(leaseMs);
      return transaction(() => claimTx(workerId, leaseMs));
    },

    async heartbeat(jobId, workerId, leaseMs) {
      checkLeaseMs(leaseMs);
      const result = await db
        .updateTable("jobs")
        .set({ lease_expires_at: Date.now() + leaseMs })
        .where(heldBy(jobId, workerId))
        .executeTakeFirst();
      return result.numUpdatedRows > 0n;
    },

    async update(jobId, workerId, update) {
      // Finishing goes through complete() (which charges) or fail(), never a bare status change.
      if (update.status !== undefined && isTerminal(update.status)) {
        throw new Error(`update() cannot set status "${update.status}"; use complete() or fail()`);
      }
      // Read-modify-write in a transaction: progress.percent is kept at its maximum.
      return transaction(() => updateTx(jobId, workerId, update));
    },

    async reserve(jobId, workerId, costUsd) {
      if (!(costUsd >= 0)) throw new RangeError(`costUsd must be ≥ 0, got ${costUsd}`);
      const reserved = toMicroUsd(costUsd);
      return transaction(() => reserveTx(jobId, workerId, reserved));
    },

    async release(jobId, workerId) {
      const result = await db
        .updateTable("jobs")
        .set((eb) => ({
          lease_owner: null,
          lease_expires_at: null,
          attempts: eb("attempts", "-", 1),
          updated_at: Date.now(),
        }))
        .where(heldBy(jobId, workerId))
        .executeTakeFirst();
      return result.numUpdatedRows > 0n;
    },

    async complete(jobId, workerId, result) {
      if (!(result.costUsd >= 0)) throw new RangeError(`costUsd must be ≥ 0, got ${result.costUsd}`);
      const costMicroUsd = toMicroUsd(result.costUsd);
      return transaction(() =>
        completeTx(jobId, workerId, { outputKey: result.outputKey, costMicroUsd, progress: result.progress }),
      );
    },

    async fail(jobId, workerId, error) {
      const result = await db
        .updateTable("jobs")
        .set({
          status: "failed",
          error: error.code,
          error_message: error.message,
          lease_owner: null,
          lease_expires_at: null,
          updated_at: Date.now(),
        })
        .where(heldBy(jobId, workerId))
        .executeTakeFirst();
      return result.numUpdatedRows > 0n;
    },
  };
}
