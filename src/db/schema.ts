import type { ColumnType, Selectable } from "kysely";
import type { JobErrorCode, JobProgress, JobRecord, JobSegment, JobStatus, UploadRecord } from "./types.js";

/**
 * Column types of the tables, shared by both dialects. Conventions:
 * - timestamps are epoch milliseconds in BIGINT columns (numeric comparison and ordering, no time
 *   zone or text-format differences between SQLite and PostgreSQL);
 * - money is integer micro-dollars in BIGINT columns (exact sums; 1 µUSD = $0.000001);
 * - JSON (progress, segments, entitlements) is TEXT.
 * node-postgres returns BIGINT (and SUM/COUNT) as strings, so reads of those are `number | string`
 * and always go through `Number()`; values stay far below 2^53.
 */
type Int8 = ColumnType<number | string, number, number>;
type NullableInt8 = ColumnType<number | string | null, number | null, number | null>;

export interface AccountsTable {
  id: string;
  created_at: Int8;
  /** When a worker last took one of the account's jobs (fair claiming, jobs.ts). */
  job_claimed_at: NullableInt8;
}

export interface ApiKeysTable {
  /** SHA-256 of the plaintext key, lowercase hex; the plaintext is never stored. */
  key_hash: string;
  account_id: string;
  /** JSON array of strings. */
  entitlements: string;
  created_at: Int8;
  label: string | null;
  /** Set when the key was revoked; it then authenticates nothing. */
  revoked_at: NullableInt8;
}

export type LedgerKind = "grant" | "charge";

export interface LedgerEntriesTable {
  id: string;
  account_id: string;
  /** Positive for grants, negative for charges. */
  amount_micro_usd: Int8;
  kind: LedgerKind;
  job_id: string | null;
  created_at: Int8;
}

export interface UploadsTable {
  id: string;
  account_id: string;
  object_key: string;
  content_type: string;
  filename: string;
  expires_at: Int8;
  created_at: Int8;
  /** The largest object the upload URL allows; counted against the quota until `bytes` is known. */
  max_bytes: NullableInt8;
  /** The stored object's size, once known (the embedded store records it when the PUT completes). */
  bytes: NullableInt8;
  /** Job creations that named the upload (a job is inserted after each), and when the last did. */
  named: ColumnType<number, number | undefined, number>;
  named_at: NullableInt8;
  /** When retention deleted the upload (its object goes next), and when the object was deleted. */
  deleted_at: NullableInt8;
  purged_at: NullableInt8;
}

export interface JobsTable {
  id: string;
  account_id: string;
  status: JobStatus;
  source_url: string;
  source_lang: string;
  target_lang: string;
  /** `JobVoice`: "auto", "female", "male" or a library voice id. */
  voice: string;
  /** Names and jargon ("" for none). */
  context: ColumnType<string, string | undefined, string>;
  /** JSON `JobProgress`. */
  progress: string | null;
  /** One of the spec's failure codes; the human-readable reason is `error_message`. */
  error: JobErrorCode | null;
  error_message: string | null;
  input_duration_sec: number | null;
  cost_micro_usd: NullableInt8;
  /**
   * What the job holds of its account's balance until it finishes (set once its duration is known):
   * the balance available to other jobs is the ledger sum less the holds of unfinished jobs.
   */
  reserved_micro_usd: NullableInt8;
  output_key: string | null;
  output_kind: "video" | "audio" | null;
  /** JSON `JobSegment[]`. */
  segments: string | null;
  idempotency_key: string | null;
  attempts: ColumnType<number, number | undefined, number>;
  lease_owner: string | null;
  lease_expires_at: NullableInt8;
  created_at: Int8;
  updated_at: Int8;
  /** When retention deleted the result (`output_key` is cleared once its object is gone). */
  output_expired_at: NullableInt8;
}

export interface Schema {
  accounts: AccountsTable;
  api_keys: ApiKeysTable;
  ledger_entries: LedgerEntriesTable;
  uploads: UploadsTable;
  jobs: JobsTable;
  processes: ProcessesTable;
  leases: LeasesTable;
}

/** A named lease: what one process of a fleet does at a time (the retention sweep). */
export interface LeasesTable {
  name: string;
  owner: string;
  expires_at: Int8;
}

export interface ProcessesTable {
  worker_id: string;
  /** Where the other processes reach this one (forwarded room connections). */
  address: string;
  /** JSON: what every process of the fleet must share (see src/fleet/membership.ts). */
  shared_setup: string;
  live: number;
  capacity: number;
  /** 1 while shutting down. */
  draining: number;
  started_at: Int8;
  seen_at: Int8;
}

/** Statuses a worker may hold a lease on; `completed` and `failed` are terminal. */
export const ACTIVE_STATUSES: readonly JobStatus[] = ["pending", "downloading", "processing", "uploading"];

export function isTerminal(status: JobStatus): boolean {
  return status === "completed" || status === "failed";
}

export function toMicroUsd(usd: number): number {
  if (!Number.isFinite(usd)) throw new RangeError(`amount must be a finite number of dollars, got ${usd}`);
  return Math.round(usd * 1_000_000);
}

export function fromMicroUsd(micro: number | string): number {
  return Number(micro) / 1_000_000;
}

export function toJobRecord(row: Selectable<JobsTable>): JobRecord {
  return {
    id: row.id,
    accountId: row.account_id,
    status: row.status,
    sourceUrl: row.source_url,
    sourceLang: row.source_lang,
    targetLang: row.target_lang,
    voice: row.voice,
    context: row.context,
    progress: row.progress === null ? null : (JSON.parse(row.progress) as JobProgress),
    error: row.error,
    errorMessage: row.error_message,
    inputDurationSec: row.input_duration_sec,
    costUsd: row.cost_micro_usd === null ? null : fromMicroUsd(row.cost_micro_usd),
    outputKey: row.output_key,
    outputKind: row.output_kind,
    segments: row.segments === null ? null : (JSON.parse(row.segments) as JobSegment[]),
    idempotencyKey: row.idempotency_key,
    attempts: Number(row.attempts),
    createdAt: new Date(Number(row.created_at)),
    updatedAt: new Date(Number(row.updated_at)),
    outputExpiredAt: row.output_expired_at === null ? null : new Date(Number(row.output_expired_at)),
  };
}

export function toUploadRecord(row: Selectable<UploadsTable>): UploadRecord {
  return {
    id: row.id,
    accountId: row.account_id,
    objectKey: row.object_key,
    contentType: row.content_type,
    filename: row.filename,
    expiresAt: new Date(Number(row.expires_at)),
    createdAt: new Date(Number(row.created_at)),
    deletedAt: row.deleted_at === null ? null : new Date(Number(row.deleted_at)),
  };
}

/** Progress as stored after `next`: `percent` never goes below what the client has already seen. */
export function monotonicProgress(previous: string | null, next: JobProgress): JobProgress {
  const before = previous === null ? undefined : (JSON.parse(previous) as JobProgress);
  if (before === undefined || !(before.percent > next.percent)) return next;
  return { ...next, percent: before.percent };
}
