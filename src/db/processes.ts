import type { Kysely, Selectable } from "kysely";
import type { ProcessesTable, Schema } from "./schema.js";
import type { ProcessesRepository, ProcessRecord } from "./types.js";

export function createProcessesRepository(db: Kysely<Schema>): ProcessesRepository {
  return {
    async beat(process) {
      const row = {
        worker_id: process.workerId,
        address: process.address,
        shared_setup: process.sharedSetup,
        live: process.live,
        capacity: process.capacity,
        draining: process.draining ? 1 : 0,
        started_at: process.startedAt,
        seen_at: process.seenAt,
      };
      await db
        .insertInto("processes")
        .values(row)
        .onConflict((conflict) => conflict.column("worker_id").doUpdateSet(row))
        .execute();
    },

    async seenSince(since) {
      const rows = await db.selectFrom("processes").selectAll().where("seen_at", ">=", since).execute();
      return rows.map(toProcessRecord);
    },

    async remove(workerId) {
      await db.deleteFrom("processes").where("worker_id", "=", workerId).execute();
    },

    async forgetUnseenSince(since) {
      await db.deleteFrom("processes").where("seen_at", "<", since).execute();
    },
  };
}

function toProcessRecord(row: Selectable<ProcessesTable>): ProcessRecord {
  return {
    workerId: row.worker_id,
    address: row.address,
    sharedSetup: row.shared_setup,
    live: Number(row.live),
    capacity: Number(row.capacity),
    draining: Number(row.draining) === 1,
    startedAt: Number(row.started_at),
    seenAt: Number(row.seen_at),
  };
}
