import type { FastifyBaseLogger } from "fastify";
import type { Config } from "../../config.js";
import type { Database } from "../../db/types.js";
import type { ExpiryRule, ObjectStore, UploadGate } from "../../storage/types.js";
import { UPLOAD_SOURCE_SCHEME } from "../media/source.js";

/**
 * What the object store keeps, and for how long. An upload is deleted once every job that named it
 * has finished (completed or failed), or — named by none — `uploadRetentionMs` after its URL
 * expired; never while a job that names it is unfinished (pending, running, or waiting for
 * another worker after its worker died). A result is deleted `resultRetentionMs` after its job
 * completed; the job then says so. One process of a fleet sweeps at a time (a lease in the
 * database); the marks are conditional updates and deleting an object is idempotent, so a second
 * sweeper, or one that dies half-way, loses nothing and deletes nothing twice.
 */

const SWEEP_LEASE = "retention-sweep";
/** Objects deleted per batch of a sweep. */
const PURGE_BATCH = 100;
/**
 * A job creation names the upload before inserting its job; a naming with no job after this long
 * (its process died in between) no longer keeps the upload.
 */
const STRAY_NAMING_MS = 3600_000;
/**
 * S3 lifecycle rules are a backstop behind the sweep (for objects it does not know, e.g. a PUT that
 * finished after its upload was deleted): uploads expire this many days after the longest the sweep
 * keeps an unnamed one, results a day after the sweep deletes them.
 */
const UPLOAD_LIFECYCLE_MARGIN_DAYS = 7;
const DAY_MS = 86_400_000;

export interface RetentionSettings {
  readonly uploadRetentionMs: number;
  readonly resultRetentionMs: number;
  readonly sweepIntervalMs: number;
  readonly uploadUrlTtlSec: number;
  readonly s3Lifecycle: boolean;
}

/** The expiration rules relay asks an S3 bucket for. */
export function lifecycleRules(settings: RetentionSettings): ExpiryRule[] {
  const unnamedUploadMs = settings.uploadUrlTtlSec * 1000 + settings.uploadRetentionMs;
  return [
    {
      id: "relay-uploads",
      prefix: "uploads/",
      days: Math.ceil(unnamedUploadMs / DAY_MS) + UPLOAD_LIFECYCLE_MARGIN_DAYS,
    },
    { id: "relay-results", prefix: "results/", days: Math.ceil(settings.resultRetentionMs / DAY_MS) + 1 },
  ];
}

export class RetentionSweeper {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly db: Database,
    private readonly store: ObjectStore,
    private readonly owner: string,
    private readonly settings: RetentionSettings,
    private readonly log: FastifyBaseLogger,
  ) {}

  start(): void {
    if (this.settings.s3Lifecycle && this.store.ensureExpiryRules) {
      const rules = lifecycleRules(this.settings);
      this.store.ensureExpiryRules(rules).then(
        () => this.log.info({ rules }, "S3 lifecycle rules for uploads/ and results/ in place"),
        (error: unknown) =>
          this.log.warn(
            { err: error, rules },
            "could not set the bucket's lifecycle rules (set S3_LIFECYCLE=false to stop trying); " +
              "the retention sweep still deletes what it knows, but an operator should add these " +
              "expiration rules to the bucket",
          ),
      );
    }
    this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
    await this.db.retention.releaseLease(SWEEP_LEASE, this.owner).catch(() => undefined);
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.sweep()
        .catch((error: unknown) => this.log.error({ err: error }, "retention sweep failed"))
        .finally(() => this.schedule(this.settings.sweepIntervalMs));
    }, delayMs);
    this.timer.unref();
  }

  /** One pass, when this process holds (or takes) the sweep lease. */
  async sweep(): Promise<void> {
    const { db, settings } = this;
    // Held across two intervals: the holder renews it each pass; another process takes over when
    // this one has stopped sweeping.
    if (!(await db.retention.acquireLease(SWEEP_LEASE, this.owner, 2 * settings.sweepIntervalMs))) return;
    const now = Date.now();
    const results = await db.retention.expireResults(now - settings.resultRetentionMs);
    const uploads = await db.retention.expireUploads({
      unusedBefore: now - settings.uploadRetentionMs,
      namedBefore: now - Math.max(settings.uploadRetentionMs, STRAY_NAMING_MS),
      uploadSourcePrefix: UPLOAD_SOURCE_SCHEME,
    });
    let deleted = 0;
    for (;;) {
      const batch = await db.retention.objectsToPurge(PURGE_BATCH);
      if (batch.length === 0 || this.stopped) break;
      for (const object of batch) {
        await this.store.delete(object.objectKey);
        await db.retention.purged(object.kind, object.id);
        deleted++;
      }
    }
    if (results + uploads + deleted > 0) {
      this.log.info({ results, uploads, deleted }, "retention: expired results and uploads deleted");
    }
  }
}

/** Starts the retention sweep of this process (it sweeps while it holds the fleet's lease). */
export function startRetention(
  config: Config,
  services: { readonly db: Database; readonly store: ObjectStore },
  log: FastifyBaseLogger,
): RetentionSweeper {
  const sweeper = new RetentionSweeper(services.db, services.store, config.workerId, config.retention, log);
  sweeper.start();
  return sweeper;
}

/**
 * What the embedded store's PUT route asks about uploads: a deleted upload takes no object, and a
 * stored object's size is recorded (the quota counts it instead of the URL's allowance). An object
 * that arrived for an upload deleted while it streamed is deleted at once.
 */
export function uploadGate(db: Database, store: ObjectStore): UploadGate {
  return {
    accepts: (key) => db.uploads.acceptsObject(key),
    async stored(key, bytes) {
      if (await db.uploads.recordSize(key, bytes)) return true;
      await store.delete(key);
      return false;
    },
  };
}
