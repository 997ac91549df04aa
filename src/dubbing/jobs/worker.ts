import { mkdir, mkdtemp, readdir, rm } from "node:fs/promises";
import path from "node:path";
import type { FastifyBaseLogger } from "fastify";
import type { Services } from "../../services.js";
import type { Config } from "../../config.js";
import type { Database, JobErrorCode, JobProgress, JobRecord } from "../../db/types.js";
import type { EngineRegistry } from "../../engines/routing/registry.js";
import { ObjectNotFoundError, ObjectTooLargeError, type ObjectStore } from "../../storage/types.js";
import { dubbingVoice } from "../../voices/voice-defaults.js";
import {
  dubMedia,
  MediaTooShortError,
  MediaToolError,
  overallProgress,
  probe,
  UnsupportedFormatError,
  UnsupportedLanguageError,
  type DubStage,
} from "../index.js";
import { withoutPaths } from "../media/errors.js";
import { costOf, formatUsd } from "./pricing.js";
import {
  DownloadError,
  downloadSource,
  SourceTooLargeError,
  UPLOAD_SOURCE_SCHEME,
  type DownloadDeadline,
} from "../media/source.js";

/**
 * Runs dubbing jobs from the database. A job is held under a lease renewed by heartbeats; a worker
 * that dies (even kill -9) stops renewing, its lease expires and another worker (or this one after
 * a restart) claims the job again, removes what the dead attempt left in the work directory and
 * runs it from the start. A worker that is stopped (SIGTERM) hands its job back at once instead.
 * A job holds of the balance from its creation (`creationHold`); once the input's duration is
 * known the hold becomes its exact price (refused when the balance less other jobs' holds cannot
 * cover it); completion and the charge are one transaction, so a job is never charged twice; a
 * failed job is never charged. A URL source's download has a deadline (`DownloadDeadline`).
 */

/** A job whose worker died this many times (a crash it causes itself, say) is failed rather than retried forever. */
const MAX_ATTEMPTS = 3;
/** What a failed job says when the cause is internal (the details are in the server's log only). */
const INTERNAL_FAILURE = "an internal error stopped the processing; it was logged on the server";

export interface WorkerOptions {
  readonly db: Database;
  readonly store: ObjectStore;
  readonly registry: EngineRegistry;
  readonly workerId: string;
  readonly workDir: string;
  readonly maxBytes: number;
  readonly maxDurationSec: number;
  readonly allowPrivateSources: boolean;
  /** The time limit of a URL source's whole download (none without it). */
  readonly downloadDeadline?: DownloadDeadline;
  readonly leaseMs?: number;
  readonly pollMs?: number;
  readonly log: FastifyBaseLogger;
  readonly observer?: WorkerObserver;
}

/** Where workers report their jobs (the service's metrics). */
export interface WorkerObserver {
  /** A job spent `seconds` in `stage` (one of the progress stages). */
  stage(stage: string, seconds: number): void;
  /** A job run ended: completed, failed, handed back (released) or left to its lease (abandoned). */
  finished(outcome: "completed" | "failed" | "released" | "abandoned"): void;
}

/** A failure with one of the spec's error codes and a reason the customer can read. */
class JobFailure extends Error {
  constructor(
    readonly code: JobErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/** The job stops here without failing: another worker (or this one, restarted) resumes it from its lease. */
class Abandoned extends Error {}

/** The worker is stopping: the job is handed back at once and the interrupted attempt not counted. */
class Stopping extends Abandoned {}

/** The spec's failure for a pipeline error; undefined for internal errors (whose text stays in the log). */
function failureOf(error: unknown): JobFailure | undefined {
  if (error instanceof JobFailure) return error;
  if (error instanceof UnsupportedFormatError) return new JobFailure("unsupported_format", error.message);
  // The spec's failure codes are a closed list; the language problem is named in the message.
  if (error instanceof UnsupportedLanguageError)
    return new JobFailure("processing_failed", `unsupported_language: ${error.message}`);
  if (error instanceof MediaTooShortError || error instanceof MediaToolError) {
    return new JobFailure("processing_failed", error.message);
  }
  return undefined;
}

/** Removes the work folders of earlier attempts on the job that crashed (in this worker's work directory). */
async function removeStaleWorkDirs(root: string, jobId: string): Promise<void> {
  const prefix = `job-${jobId}-`;
  for (const name of await readdir(root)) {
    if (name.startsWith(prefix)) await rm(path.join(root, name), { recursive: true, force: true });
  }
}

/** Human-readable stage names; processing stages take 10-95 % of the job, weighted by `overallProgress`. */
const STAGE_NAMES: Record<string, string> = {
  downloading: "Downloading the source",
  probing: "Reading the media",
  segmenting: "Finding speech",
  recognizing: "Recognizing speech",
  translating: "Translating",
  synthesizing: "Synthesizing the dubbed voice",
  fitting: "Fitting speech to the timing",
  mixing: "Mixing the soundtrack",
  muxing: "Writing the output file",
  uploading: "Uploading the result",
  completed: "Completed",
};

function percentOf(stage: string, fraction: number): number {
  if (stage === "downloading") return 10 * fraction;
  if (stage === "uploading") return 95 + 4 * fraction;
  return 10 + 85 * overallProgress(stage as DubStage, fraction);
}

export class DubbingWorker {
  private running = false;
  private loop: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  private current: AbortController | undefined;

  constructor(private readonly options: WorkerOptions) {}

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
  }

  /** Stops taking jobs; a job in progress is handed back at once (the next worker resumes it). */
  async stop(): Promise<void> {
    this.running = false;
    this.wake?.();
    this.current?.abort(new Stopping("worker stopping"));
    await this.loop;
  }

  /** Checks for work now instead of at the next poll (called when a job is created). */
  poke(): void {
    this.wake?.();
  }

  private async run(): Promise<void> {
    const { db, workerId, log } = this.options;
    const leaseMs = this.options.leaseMs ?? 30_000;
    while (this.running) {
      let job: JobRecord | undefined;
      try {
        job = await db.jobs.claim(workerId, leaseMs);
      } catch (error) {
        log.error({ err: error }, "claiming a dubbing job failed");
      }
      if (!job) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, this.options.pollMs ?? 1000);
          this.wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        continue;
      }
      await this.process(job, leaseMs);
    }
  }

  private async process(job: JobRecord, leaseMs: number): Promise<void> {
    const { db, workerId, log } = this.options;
    const abort = new AbortController();
    this.current = abort;
    // Claimed while stop() was under way: hand it straight back.
    if (!this.running) abort.abort(new Stopping("worker stopping"));
    const heartbeat = setInterval(() => {
      db.jobs.heartbeat(job.id, workerId, leaseMs).then(
        (held) => held || abort.abort(new Abandoned(`lease on job ${job.id} lost`)),
        (error: unknown) => log.warn({ err: error, job: job.id }, "heartbeat failed"),
      );
    }, leaseMs / 3);
    let workDir: string | undefined;
    let percent = job.progress?.percent ?? 0;
    // The stage running and since when, for the stage durations the observer gets.
    let stageNow: { stage: string; since: number } | undefined;
    const enterStage = (stage: string | undefined) => {
      if (stageNow?.stage === stage) return;
      const now = performance.now();
      if (stageNow) this.options.observer?.stage(stageNow.stage, (now - stageNow.since) / 1000);
      stageNow = stage === undefined ? undefined : { stage, since: now };
    };
    const report = async (status: JobRecord["status"], stage: string, fraction: number) => {
      abort.signal.throwIfAborted();
      enterStage(stage);
      percent = Math.max(percent, Math.round(percentOf(stage, Math.min(1, Math.max(0, fraction)))));
      const progress: JobProgress = { stage, stageName: STAGE_NAMES[stage] ?? stage, percent };
      if (!(await db.jobs.update(job.id, workerId, { status, progress })))
        throw new Abandoned(`lease on job ${job.id} lost`);
    };
    try {
      await mkdir(this.options.workDir, { recursive: true });
      await removeStaleWorkDirs(this.options.workDir, job.id);
      if (job.attempts > MAX_ATTEMPTS) {
        throw new JobFailure(
          "processing_failed",
          `gave up after ${MAX_ATTEMPTS} attempts whose worker died before finishing`,
        );
      }
      workDir = await mkdtemp(path.join(this.options.workDir, `job-${job.id}-`));
      log.info({ job: job.id, attempt: job.attempts }, "dubbing job started");
      await report("downloading", "downloading", 0);
      const sourcePath = path.join(workDir, "source");
      await this.fetchSource(job, sourcePath, abort.signal);
      await report("processing", "probing", 0);

      const media = await probe(sourcePath, { signal: abort.signal });
      if (media.durationSec > this.options.maxDurationSec) {
        throw new JobFailure(
          "video_too_long",
          `the input lasts ${media.durationSec.toFixed(1)} s; the limit is ${this.options.maxDurationSec} s`,
        );
      }
      await this.hold(job, media.durationSec);
      await db.jobs.update(job.id, workerId, { inputDurationSec: media.durationSec });

      const updates: Promise<void>[] = [];
      const record = (update: Promise<unknown>) =>
        void updates.push(update.then(() => undefined).catch((error: unknown) => abort.abort(error)));
      const result = await dubMedia({
        inputPath: sourcePath,
        outputDir: workDir,
        registry: this.options.registry,
        sourceLang: job.sourceLang,
        targetLang: job.targetLang,
        // Checked when the job was created; a library id that no longer exists falls back to "auto".
        voice: dubbingVoice(job.voice) ?? "auto",
        context: job.context,
        account: job.accountId,
        signal: abort.signal,
        onProgress: (stage, fraction) => record(report("processing", stage, fraction)),
        // "auto" is stored as the language it resolved to, so the status says what was dubbed from.
        onSourceLanguage: (language) => {
          if (language !== job.sourceLang) record(db.jobs.update(job.id, workerId, { sourceLang: language }));
        },
      });
      await Promise.all(updates);
      await db.jobs.update(job.id, workerId, {
        outputKind: result.outputKind,
        segments: result.segments.map((s) => ({ ...s })),
      });

      await report("uploading", "uploading", 0);
      const outputKey = `results/${job.id}.${result.outputKind === "audio" ? "mp3" : "mp4"}`;
      await this.options.store.putFile(
        outputKey,
        result.outputPath,
        result.outputKind === "audio" ? "audio/mpeg" : "video/mp4",
      );
      const cost = costOf(media.durationSec);
      const completed = await db.jobs.complete(job.id, workerId, {
        outputKey,
        costUsd: cost,
        progress: { stage: "completed", stageName: STAGE_NAMES.completed!, percent: 100 },
      });
      if (!completed) throw new Abandoned(`lease on job ${job.id} lost before completion`);
      log.info({ job: job.id, cost }, "dubbing job completed");
      this.options.observer?.finished("completed");
    } catch (error) {
      await this.endAttempt(job, abort.signal.reason instanceof Abandoned ? abort.signal.reason : error);
    } finally {
      enterStage(undefined);
      this.current = undefined;
      clearInterval(heartbeat);
      if (workDir) await rm(workDir, { recursive: true, force: true });
    }
  }

  /**
   * Holds the job's cost of the account's balance, or fails the job when the balance less what
   * the account's other unfinished jobs hold cannot cover it.
   */
  private async hold(job: JobRecord, durationSec: number): Promise<void> {
    const cost = costOf(durationSec);
    const held = await this.options.db.jobs.reserve(job.id, this.options.workerId, cost);
    if (held.status === "lost") throw new Abandoned(`lease on job ${job.id} lost`);
    if (held.status === "insufficient") {
      throw new JobFailure(
        "processing_failed",
        `insufficient balance: dubbing ${durationSec.toFixed(1)} s costs ${formatUsd(cost)}; the account has ` +
          `${formatUsd(held.availableUsd)} available (its balance less what its unfinished jobs hold)`,
      );
    }
  }

  /** Records how an attempt that did not complete ended: handed back, left to its lease, or failed. */
  private async endAttempt(job: JobRecord, error: unknown): Promise<void> {
    const { db, workerId, log } = this.options;
    if (error instanceof Stopping) {
      const released = await db.jobs.release(job.id, workerId).catch((e: unknown) => {
        log.error({ err: e, job: job.id }, "handing a job back failed; it resumes when its lease expires");
        return false;
      });
      if (released) log.info({ job: job.id }, "dubbing job handed back (worker stopping)");
      this.options.observer?.finished("released");
      return;
    }
    if (error instanceof Abandoned) {
      log.warn({ job: job.id, reason: error.message }, "dubbing job left to its lease");
      this.options.observer?.finished("abandoned");
      return;
    }
    this.options.observer?.finished("failed");
    const failure = failureOf(error);
    if (failure) log.info({ job: job.id, code: failure.code, reason: failure.message }, "dubbing job failed");
    else log.error({ err: error, job: job.id }, "dubbing job failed");
    const recorded = {
      code: failure?.code ?? "processing_failed",
      message: failure ? withoutPaths(failure.message) : INTERNAL_FAILURE,
    } as const;
    await db.jobs.fail(job.id, workerId, recorded).catch((e: unknown) => {
      log.error({ err: e, job: job.id }, "recording a job failure failed");
    });
  }

  private async fetchSource(job: JobRecord, destination: string, signal: AbortSignal): Promise<void> {
    const { db, store, maxBytes } = this.options;
    const uploadId = job.sourceUrl.startsWith(UPLOAD_SOURCE_SCHEME)
      ? job.sourceUrl.slice(UPLOAD_SOURCE_SCHEME.length)
      : undefined;
    try {
      if (uploadId !== undefined) {
        const upload = await db.uploads.get(uploadId);
        if (!upload || upload.accountId !== job.accountId) {
          throw new JobFailure("download_failed", `no upload ${uploadId} for this account`);
        }
        await store.getToFile(upload.objectKey, destination, maxBytes);
        return;
      }
      await downloadSource(job.sourceUrl, destination, {
        maxBytes,
        allowPrivate: this.options.allowPrivateSources,
        signal,
        ...(this.options.downloadDeadline && { deadline: this.options.downloadDeadline }),
      });
    } catch (error) {
      if (error instanceof JobFailure) throw error;
      if (error instanceof SourceTooLargeError || error instanceof ObjectTooLargeError) {
        throw new JobFailure("video_too_large", `the source is larger than ${maxBytes} bytes`);
      }
      if (error instanceof ObjectNotFoundError) {
        throw new JobFailure("download_failed", "the upload was never completed (no object was stored)");
      }
      if (error instanceof DownloadError) {
        if (error.detail) this.options.log.info({ job: job.id, detail: error.detail }, "source refused");
        throw new JobFailure("download_failed", error.message);
      }
      throw error;
    }
  }
}

/** Starts `config.dubbing.workers` workers in this process. */
export function startDubbingWorkers(
  config: Config,
  services: Services,
  log: FastifyBaseLogger,
  tuning: { pollMs?: number; observer?: WorkerObserver } = {},
): { stop(): Promise<void> } {
  const workers = Array.from(
    { length: config.dubbing.workers },
    (_, i) =>
      new DubbingWorker({
        ...services,
        ...tuning,
        leaseMs: config.dubbing.leaseMs,
        workerId: `${config.workerId}/${i}`,
        workDir: config.dubbing.workDir,
        maxBytes: config.dubbing.maxFileBytes,
        maxDurationSec: config.dubbing.maxDurationSec,
        allowPrivateSources: config.dubbing.allowPrivateSources,
        downloadDeadline: config.dubbing.downloadDeadline,
        log,
      }),
  );
  for (const worker of workers) worker.start();
  return {
    async stop() {
      await Promise.all(workers.map((worker) => worker.stop()));
    },
  };
}
