/**
 * The service's durable state: accounts, hashed API keys, the billing ledger, uploads and dubbing
 * jobs. One schema and one set of queries (Kysely) on SQLite (embedded default) and PostgreSQL.
 */

export type JobStatus = "pending" | "downloading" | "processing" | "uploading" | "completed" | "failed";

/** The spec's reasons for a failed job (`error`); the details go in `error_message`. */
export type JobErrorCode =
  "video_too_long" | "video_too_large" | "unsupported_format" | "download_failed" | "processing_failed";

/** Why a job failed: the spec's code and a human-readable reason for the customer. */
export interface JobError {
  readonly code: JobErrorCode;
  readonly message: string;
}

export interface JobProgress {
  readonly stage: string;
  readonly stageName: string;
  readonly percent: number;
}

export interface JobSegment {
  readonly startSec: number;
  readonly endSec: number;
  readonly speaker?: string;
  readonly text: string;
  readonly translatedText: string;
  /** The library voice that dubbed it. */
  readonly voiceId?: number;
}

export interface JobRecord {
  readonly id: string;
  readonly accountId: string;
  readonly status: JobStatus;
  readonly sourceUrl: string;
  readonly sourceLang: string;
  readonly targetLang: string;
  /** The voice it is dubbed in: "auto" (each speaker's matched voice), "female", "male" or a library id. */
  readonly voice: string;
  readonly progress: JobProgress | null;
  readonly error: JobErrorCode | null;
  readonly errorMessage: string | null;
  readonly inputDurationSec: number | null;
  readonly costUsd: number | null;
  /** Storage key of the result, once completed. */
  readonly outputKey: string | null;
  /** "video" (MP4) or "audio" (MP3), once known. */
  readonly outputKind: "video" | "audio" | null;
  readonly segments: readonly JobSegment[] | null;
  readonly idempotencyKey: string | null;
  /** Attempts started on the job, less those a graceful stop handed back. */
  readonly attempts: number;
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

export interface NewJob {
  readonly id: string;
  readonly accountId: string;
  readonly sourceUrl: string;
  readonly sourceLang: string;
  readonly targetLang: string;
  /** Default "auto". */
  readonly voice?: string;
  readonly idempotencyKey?: string;
  /**
   * When the input's duration is known at creation (an upload probed then): the job is created
   * holding `costUsd` of the balance, or not at all (InsufficientBalanceError).
   */
  readonly reservation?: { readonly costUsd: number; readonly inputDurationSec: number };
}

/** Fields a worker holding the lease may change while a job runs. */
export interface JobUpdate {
  readonly status?: JobStatus;
  readonly progress?: JobProgress;
  /** The language actually dubbed from, once "auto" is resolved. */
  readonly sourceLang?: string;
  readonly inputDurationSec?: number;
  readonly outputKind?: "video" | "audio";
  readonly segments?: readonly JobSegment[];
}

export interface Account {
  readonly id: string;
  readonly entitlements: readonly string[];
}

export interface AccountsRepository {
  /** Idempotently provisions a key from configuration: its account, the hashed key and one development grant. */
  ensureKey(key: string, options: { balanceUsd: number; entitlements: readonly string[] }): Promise<Account>;
  /** The account behind a plaintext key (looked up by its hash), if any. */
  findByKey(key: string): Promise<Account | undefined>;
  /** Sum of the account's ledger entries. */
  balanceUsd(accountId: string): Promise<number>;
  /** The balance less what the account's unfinished jobs hold (what a new job can still use). */
  availableUsd(accountId: string): Promise<number>;
  /** A new account with a new random key (returned once, stored hashed) and an opening grant. */
  createKey(options: {
    balanceUsd: number;
    entitlements: readonly string[];
    label?: string;
  }): Promise<{ key: string; record: ApiKeyRecord }>;
  /** Every key, newest first. */
  listKeys(): Promise<ApiKeyRecord[]>;
  /** Revokes the key named by its id (a prefix of its hash) or the key itself; undefined when none or several match. */
  revokeKey(keyOrId: string): Promise<ApiKeyRecord | undefined>;
  /** Adds `amountUsd` (positive) to the account of the key named by its id or the key itself. */
  grant(keyOrId: string, amountUsd: number): Promise<ApiKeyRecord | undefined>;
}

/** An API key as an operator sees it: never the key itself. */
export interface ApiKeyRecord {
  /** The first 12 hex digits of the key's SHA-256: names the key in `relay keys`. */
  readonly id: string;
  readonly accountId: string;
  readonly label: string | null;
  readonly entitlements: readonly string[];
  readonly createdAt: Date;
  readonly revokedAt: Date | null;
  readonly balanceUsd: number;
}

export type ReserveResult =
  | { readonly status: "reserved" }
  | { readonly status: "insufficient"; readonly availableUsd: number }
  /** The worker no longer holds the job's lease. */
  | { readonly status: "lost" };

export interface UploadRecord {
  readonly id: string;
  readonly accountId: string;
  readonly objectKey: string;
  readonly contentType: string;
  readonly filename: string;
  readonly expiresAt: Date;
  readonly createdAt: Date;
}

export interface UploadsRepository {
  create(upload: Omit<UploadRecord, "createdAt">): Promise<UploadRecord>;
  get(id: string): Promise<UploadRecord | undefined>;
}

/** One service process as it last reported itself (a heartbeat). */
export interface ProcessRecord {
  readonly workerId: string;
  readonly address: string;
  /** What every process of the fleet must share, as the process describes it (JSON). */
  readonly sharedSetup: string;
  readonly live: number;
  readonly capacity: number;
  readonly draining: boolean;
  readonly startedAt: number;
  readonly seenAt: number;
}

export interface ProcessesRepository {
  /** Records (or refreshes) a process's heartbeat. */
  beat(process: ProcessRecord): Promise<void>;
  /** Processes seen at or after `since` (epoch ms). */
  seenSince(since: number): Promise<ProcessRecord[]>;
  remove(workerId: string): Promise<void>;
  /** Removes the rows of processes not seen since `since` (killed ones never remove their own). */
  forgetUnseenSince(since: number): Promise<void>;
}

export interface JobsRepository {
  /**
   * Creates a pending job. With an idempotency key already used by the account, returns the
   * existing job and `created: false` instead. With a `reservation` the balance check and the hold
   * are atomic with the insert; throws InsufficientBalanceError when the account cannot cover it.
   */
  create(job: NewJob): Promise<{ job: JobRecord; created: boolean }>;
  get(accountId: string, jobId: string): Promise<JobRecord | undefined>;
  /** Newest first. */
  list(accountId: string, limit: number, offset: number): Promise<{ jobs: JobRecord[]; total: number }>;
  /** Jobs of every account per status (metrics; `pending` is the queue depth). */
  countByStatus(): Promise<Record<JobStatus, number>>;
  /**
   * Atomically takes the oldest job that is pending, or running with an expired lease (its worker
   * died), for `workerId` until now + `leaseMs`; increments `attempts`. Safe with many workers.
   */
  claim(workerId: string, leaseMs: number): Promise<JobRecord | undefined>;
  /** Extends the lease; false when the worker no longer holds it. */
  heartbeat(jobId: string, workerId: string, leaseMs: number): Promise<boolean>;
  /** Applies `update` when `workerId` holds the lease; false otherwise. */
  update(jobId: string, workerId: string, update: JobUpdate): Promise<boolean>;
  /**
   * Holds `costUsd` of the account's balance for the job, atomically with the check that the
   * balance less the holds of the account's other unfinished jobs covers it (concurrent jobs
   * cannot both pass). Idempotent per job: the job's own earlier hold is replaced, never added to,
   * so a job resumed after a crash does not reserve twice. The hold ends when the job does.
   */
  reserve(jobId: string, workerId: string, costUsd: number): Promise<ReserveResult>;
  /**
   * Hands the job back at once (graceful stop): the lease ends now rather than at its expiry, and
   * the interrupted attempt does not count towards the attempt limit. Its hold stays.
   */
  release(jobId: string, workerId: string): Promise<boolean>;
  /**
   * Marks the job completed and charges `costUsd` to its account in ONE transaction; the ledger
   * makes the charge unique per job, so a repeated call never charges twice. Releases the lease.
   */
  complete(
    jobId: string,
    workerId: string,
    result: { outputKey: string; costUsd: number; progress: JobProgress },
  ): Promise<boolean>;
  /** Marks the job failed with `error` (no charge, its hold ends); releases the lease. */
  fail(jobId: string, workerId: string, error: JobError): Promise<boolean>;
}

export interface Database {
  readonly kind: "sqlite" | "postgres";
  readonly accounts: AccountsRepository;
  readonly uploads: UploadsRepository;
  readonly jobs: JobsRepository;
  readonly processes: ProcessesRepository;
  close(): Promise<void>;
}
