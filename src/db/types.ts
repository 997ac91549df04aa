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
  /** Names and jargon for its recognition, translation and subtitles ("" for none). */
  readonly context: string;
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
  /** When retention deleted the result (completed jobs; `updatedAt` is when it completed). */
  readonly outputExpiredAt: Date | null;
}

export interface NewJob {
  readonly id: string;
  readonly accountId: string;
  readonly sourceUrl: string;
  readonly sourceLang: string;
  readonly targetLang: string;
  /** Default "auto". */
  readonly voice?: string;
  /** Default "". */
  readonly context?: string;
  readonly idempotencyKey?: string;
  /**
   * The job is created holding `costUsd` of the balance, or not at all (InsufficientBalanceError);
   * `inputDurationSec` when the input's duration was learned at creation.
   */
  readonly reservation?: { readonly costUsd: number; readonly inputDurationSec?: number };
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
  /** Of these accounts, those left without a key that is not revoked (their sessions must end). */
  revokedAccounts(accountIds: readonly string[]): Promise<Set<string>>;
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
  /** When retention deleted it (its object is then gone or about to be). */
  readonly deletedAt: Date | null;
}

export interface NewUpload extends Omit<UploadRecord, "createdAt" | "deletedAt"> {
  /** The most one object may hold; the upload is given less when the quota leaves less. */
  readonly maxBytes: number;
  /** What the account's uploads not yet deleted may hold in all. */
  readonly quotaBytes: number;
  /**
   * Whether the store records each object's size when it arrives (the embedded store): then an
   * expired upload URL with no size recorded holds nothing. Otherwise (S3) an upload counts its
   * allowance until it is deleted.
   */
  readonly sizesRecorded: boolean;
}

export interface UploadsRepository {
  /**
   * Records a new upload allowed min(maxBytes, what the quota leaves), checked and taken in one
   * transaction (concurrent requests cannot both take the last of the quota); throws
   * StorageQuotaError when nothing is left.
   */
  create(upload: NewUpload): Promise<{ record: UploadRecord; maxBytes: number }>;
  get(id: string): Promise<UploadRecord | undefined>;
  /**
   * Records the stored object's size (the embedded store, when a PUT completes); false when no
   * upload not yet deleted has that key.
   */
  recordSize(objectKey: string, bytes: number): Promise<boolean>;
  /** Whether an object may be stored for the upload with that key: it exists and is not deleted. */
  acceptsObject(objectKey: string): Promise<boolean>;
  /**
   * Counts a job creation about to name the upload, so retention keeps it; false when retention
   * already deleted it. Call `unname` when no job was created after all.
   */
  name(id: string): Promise<boolean>;
  unname(id: string): Promise<void>;
}

/** What the retention sweep reads and marks (see src/dubbing/jobs/retention.ts). */
export interface RetentionRepository {
  /** Takes or renews the named lease for `owner` until now + `ttlMs`; false while another holds it. */
  acquireLease(name: string, owner: string, ttlMs: number): Promise<boolean>;
  releaseLease(name: string, owner: string): Promise<void>;
  /**
   * Marks deleted every upload no unfinished job names whose jobs have all finished, or whose
   * retention ended (`unusedBefore`: its URL expired, or its last naming happened, before then
   * with no job created since); returns how many.
   */
  expireUploads(options: {
    unusedBefore: number;
    namedBefore: number;
    /** A job's `source_url` naming an upload is this prefix and the upload's id. */
    uploadSourcePrefix: string;
  }): Promise<number>;
  /** Marks expired the results of jobs completed before `completedBefore`; returns how many. */
  expireResults(completedBefore: number): Promise<number>;
  /** Objects of deleted uploads and expired results still in the store. */
  objectsToPurge(limit: number): Promise<{ kind: "upload" | "result"; id: string; objectKey: string }[]>;
  /** Records that the object is gone (idempotent). */
  purged(kind: "upload" | "result", id: string): Promise<void>;
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

/** Jobs as the API sees them: created by a request, read by their account, counted for metrics. */
export interface JobRecords {
  /**
   * Creates a pending job. With an idempotency key already used by the account, returns the
   * existing job and `created: false` instead. With a `reservation` the balance check and the hold
   * are atomic with the insert; throws InsufficientBalanceError when the account cannot cover it.
   * With `limits.maxActiveJobs`, throws ActiveJobsLimitError when the account already has that many
   * jobs pending or running (counted in the same transaction, so concurrent creations in any number
   * of processes cannot exceed it).
   */
  create(
    job: NewJob,
    limits?: { readonly maxActiveJobs?: number },
  ): Promise<{ job: JobRecord; created: boolean }>;
  get(accountId: string, jobId: string): Promise<JobRecord | undefined>;
  /** Newest first. */
  list(accountId: string, limit: number, offset: number): Promise<{ jobs: JobRecord[]; total: number }>;
  /** Jobs of every account per status (metrics; `pending` is the queue depth). */
  countByStatus(): Promise<Record<JobStatus, number>>;
}

/**
 * Jobs as the dubbing workers see them: taken under a lease and written only while it is held (a
 * worker that has lost the lease changes nothing).
 */
export interface JobLeases {
  /**
   * Atomically takes a job that is pending, or running with an expired lease (its worker died), for
   * `workerId` until now + `leaseMs`; increments `attempts`. Safe with many workers. Fair across
   * accounts: from the account with the fewest running jobs, among those the one served least
   * recently, its oldest job.
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

export type JobsRepository = JobRecords & JobLeases;

export interface Database {
  readonly kind: "sqlite" | "postgres";
  readonly accounts: AccountsRepository;
  readonly uploads: UploadsRepository;
  readonly retention: RetentionRepository;
  readonly jobs: JobsRepository;
  readonly processes: ProcessesRepository;
  close(): Promise<void>;
}
