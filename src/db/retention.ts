import type { Kysely } from "kysely";
import { ACTIVE_STATUSES, type Schema } from "./schema.js";
import type { RetentionRepository } from "./types.js";

/**
 * The retention sweep's queries. Marking comes first and is the commit point (a conditional
 * update, so sweeps in several processes at once mark each row once and never one that a job
 * creation has just named); deleting the object follows and is recorded, so a sweep that dies in
 * between leaves the object to the next sweep.
 */
export function createRetentionRepository(db: Kysely<Schema>): RetentionRepository {
  return {
    async acquireLease(name, owner, ttlMs) {
      const now = Date.now();
      const row = await db
        .insertInto("leases")
        .values({ name, owner, expires_at: now + ttlMs })
        .onConflict((oc) =>
          oc
            .column("name")
            .doUpdateSet({ owner, expires_at: now + ttlMs })
            .where((eb) => eb.or([eb("leases.owner", "=", owner), eb("leases.expires_at", "<", now)])),
        )
        .returning("owner")
        .executeTakeFirst();
      return row?.owner === owner;
    },

    async releaseLease(name, owner) {
      await db.deleteFrom("leases").where("name", "=", name).where("owner", "=", owner).execute();
    },

    async expireUploads({ unusedBefore, namedBefore, uploadSourcePrefix }) {
      // One statement, so an upload's naming count and its jobs come from the same snapshot.
      const candidates = await db
        .selectFrom("uploads")
        .leftJoin("jobs", (join) =>
          join.on((eb) =>
            eb("jobs.source_url", "=", eb(eb.val(uploadSourcePrefix), "||", eb.ref("uploads.id"))),
          ),
        )
        .select((eb) => [
          "uploads.id",
          "uploads.named",
          "uploads.named_at",
          "uploads.expires_at",
          eb.fn.count<number | string>("jobs.id").as("jobs"),
          eb.fn
            .sum<number | string | null>(
              eb.case().when("jobs.status", "in", ACTIVE_STATUSES).then(1).else(0).end(),
            )
            .as("active"),
        ])
        .where("uploads.deleted_at", "is", null)
        .groupBy(["uploads.id", "uploads.named", "uploads.named_at", "uploads.expires_at"])
        .execute();
      let marked = 0;
      for (const upload of candidates) {
        const jobs = Number(upload.jobs);
        const named = Number(upload.named);
        if (Number(upload.active ?? 0) > 0) continue;
        const expired = Number(upload.expires_at) < unusedBefore;
        const namedAt = upload.named_at === null ? null : Number(upload.named_at);
        // Every job creation that named it inserted its job, and all of those jobs have finished.
        const finished = jobs > 0 && jobs >= named;
        // Never named: its URL expired, plus the retention, without a job.
        const unused = named === 0 && expired;
        // A naming whose job never came (the creating process died), long enough ago.
        const stray = jobs < named && expired && namedAt !== null && namedAt < namedBefore;
        if (!(finished || unused || stray)) continue;
        const result = await db
          .updateTable("uploads")
          .set({ deleted_at: Date.now() })
          .where("id", "=", upload.id)
          .where("deleted_at", "is", null)
          // A job creation that named it since the snapshot keeps it.
          .where("named", "=", named)
          .where((eb) => (namedAt === null ? eb("named_at", "is", null) : eb("named_at", "=", namedAt)))
          .executeTakeFirst();
        if (result.numUpdatedRows > 0n) marked++;
      }
      return marked;
    },

    async expireResults(completedBefore) {
      // A completed job is never written again, so its `updated_at` is when it completed.
      const result = await db
        .updateTable("jobs")
        .set({ output_expired_at: Date.now() })
        .where("status", "=", "completed")
        .where("output_expired_at", "is", null)
        .where("output_key", "is not", null)
        .where("updated_at", "<", completedBefore)
        .executeTakeFirst();
      return Number(result.numUpdatedRows);
    },

    async objectsToPurge(limit) {
      const [uploads, results] = await Promise.all([
        db
          .selectFrom("uploads")
          .select(["id", "object_key"])
          .where("deleted_at", "is not", null)
          .where("purged_at", "is", null)
          .limit(limit)
          .execute(),
        db
          .selectFrom("jobs")
          .select(["id", "output_key"])
          .where("output_expired_at", "is not", null)
          .where("output_key", "is not", null)
          .limit(limit)
          .execute(),
      ]);
      return [
        ...uploads.map((row) => ({ kind: "upload" as const, id: row.id, objectKey: row.object_key })),
        ...results.map((row) => ({ kind: "result" as const, id: row.id, objectKey: row.output_key! })),
      ];
    },

    async purged(kind, id) {
      if (kind === "upload") {
        await db
          .updateTable("uploads")
          .set({ purged_at: Date.now() })
          .where("id", "=", id)
          .where("purged_at", "is", null)
          .execute();
      } else {
        await db
          .updateTable("jobs")
          .set({ output_key: null })
          .where("id", "=", id)
          .where("output_expired_at", "is not", null)
          .execute();
      }
    },
  };
}
