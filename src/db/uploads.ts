import { sql, type Kysely } from "kysely";
import { lockAccount } from "./billing.js";
import { toUploadRecord, type Schema } from "./schema.js";
import { run, type TransactionRunner, type TxBody } from "./transactions.js";
import type { NewUpload, UploadRecord, UploadsRepository } from "./types.js";

/** The account's uploads not yet deleted already hold its whole storage quota. */
export class StorageQuotaError extends Error {
  override readonly name = "StorageQuotaError";
  constructor(
    readonly usedBytes: number,
    readonly quotaBytes: number,
  ) {
    super(`${usedBytes} of ${quotaBytes} bytes of storage in use`);
  }
}

export function createUploadsRepository(
  db: Kysely<Schema>,
  dialect: "sqlite" | "postgres",
  transaction: TransactionRunner,
): UploadsRepository {
  /**
   * Bytes the account's uploads not yet deleted hold: the stored size where known, else what the
   * URL allows — while it can still be used, or for as long as the upload exists when the store
   * does not record sizes (an S3 object may have arrived unseen).
   */
  function usedBytesQuery(accountId: string, now: number, sizesRecorded: boolean) {
    return db
      .selectFrom("uploads")
      .select(
        sql<number | string | null>`sum(coalesce(bytes, case when ${sizesRecorded ? 0 : 1} = 1
          or expires_at > ${now} then max_bytes else 0 end))`.as("used"),
      )
      .where("account_id", "=", accountId)
      .where("deleted_at", "is", null);
  }

  function* createTx(upload: NewUpload): TxBody<{ record: UploadRecord; maxBytes: number }> {
    const now = Date.now();
    yield* lockAccount(db, dialect, upload.accountId);
    const { rows } = yield* run(usedBytesQuery(upload.accountId, now, upload.sizesRecorded));
    const used = Number(rows[0]?.used ?? 0);
    const maxBytes = Math.min(upload.maxBytes, upload.quotaBytes - used);
    if (maxBytes <= 0) throw new StorageQuotaError(used, upload.quotaBytes);
    const inserted = yield* run(
      db
        .insertInto("uploads")
        .values({
          id: upload.id,
          account_id: upload.accountId,
          object_key: upload.objectKey,
          content_type: upload.contentType,
          filename: upload.filename,
          expires_at: upload.expiresAt.getTime(),
          created_at: now,
          max_bytes: maxBytes,
          bytes: null,
          named_at: null,
          deleted_at: null,
          purged_at: null,
        })
        .returningAll(),
    );
    return { record: toUploadRecord(inserted.rows[0]!), maxBytes };
  }

  return {
    async create(upload) {
      return transaction(() => createTx(upload));
    },

    async get(id) {
      const row = await db.selectFrom("uploads").selectAll().where("id", "=", id).executeTakeFirst();
      return row && toUploadRecord(row);
    },

    async recordSize(objectKey, bytes) {
      const result = await db
        .updateTable("uploads")
        .set({ bytes })
        .where("object_key", "=", objectKey)
        .where("deleted_at", "is", null)
        .executeTakeFirst();
      return result.numUpdatedRows > 0n;
    },

    async acceptsObject(objectKey) {
      const row = await db
        .selectFrom("uploads")
        .select("deleted_at")
        .where("object_key", "=", objectKey)
        .executeTakeFirst();
      return row?.deleted_at === null;
    },

    async name(id) {
      // The retention sweep deletes an upload only with a condition on `named` (see
      // src/db/retention.ts): once this commits, it keeps the upload until the job inserted next
      // has finished; had the sweep committed first, this finds the upload deleted.
      const result = await db
        .updateTable("uploads")
        .set((eb) => ({ named: eb("named", "+", 1), named_at: Date.now() }))
        .where("id", "=", id)
        .where("deleted_at", "is", null)
        .executeTakeFirst();
      return result.numUpdatedRows > 0n;
    },

    async unname(id) {
      await db
        .updateTable("uploads")
        .set((eb) => ({ named: eb("named", "-", 1) }))
        .where("id", "=", id)
        .where("named", ">", 0)
        .execute();
    },
  };
}
