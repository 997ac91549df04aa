import type { Kysely } from "kysely";
import { toUploadRecord, type Schema } from "./schema.js";
import type { UploadsRepository } from "./types.js";

export function createUploadsRepository(db: Kysely<Schema>): UploadsRepository {
  return {
    async create(upload) {
      const row = await db
        .insertInto("uploads")
        .values({
          id: upload.id,
          account_id: upload.accountId,
          object_key: upload.objectKey,
          content_type: upload.contentType,
          filename: upload.filename,
          expires_at: upload.expiresAt.getTime(),
          created_at: Date.now(),
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      return toUploadRecord(row);
    },

    async get(id) {
      const row = await db.selectFrom("uploads").selectAll().where("id", "=", id).executeTakeFirst();
      return row && toUploadRecord(row);
    },
  };
}
