import { mkdir, mkdtemp, rm } from "node:fs/promises";
import path from "node:path";
import type { FastifyBaseLogger } from "fastify";
import type { Services } from "../app.js";
import type { Config } from "../config.js";
import type { Database, JobProgress, JobRecord } from "../db/types.js";
import type { EngineRegistry } from "../engines/registry.js";
import { ObjectNotFoundError, ObjectTooLargeError, type ObjectStore } from "../storage/types.js";
import {
  dubMedia,
  MediaTooShortError,
  overallProgress,
  probe,
  UnsupportedFormatError,
  type DubStage,
} from "./index.js";
import { DownloadError, downloadSource, SourceTooLargeError, UPLOAD_SOURCE_SCHEME } from "./source.js";

/**
 * Runs dubbing jobs from the database. A job is held under a lease renewed by heartbeats; a worker
 * that dies (even kill -9) stops renewing, its lease expires and another worker (or this one after
 * a restart) claims the job again and runs it from the start. Completion and the charge are one
 * transaction, so a job is never charged twice; a failed job is never charged.
 */

export const PRICE_USD_PER_MINUTE = 0.5;
/** A job whose worker died this many times (a crash it causes itself, say) is failed rather than retried forever. */
const MAX_ATTEMPTS = 3;

export interface WorkerOptions {
  readonly db: Database;
  readonly store: ObjectStore;
  readonly registry: EngineRegistry;
  readonly workerId: string;
  readonly workDir: string;
  readonly maxBytes: number;
  readonly maxDurationSec: number;
  readonly allowPrivateSources: boolean;
  readonly leaseMs?: number;
  readonly pollMs?: number;
  readonly log: FastifyBaseLogger;
}

/** A failure with one of the spec's error codes. */
class JobFailure extends Error {
  constructor(
    readonly code:
      | "video_too_long"
      | "video_too_large"
      | "unsupported_format"
      | "download_failed"
      | "processing_failed"
      | "insufficient_balance",
    message: string,
  ) {
    super(message);
  }
}

/** The job stops here without failing: another worker (or this one, restarted) resumes it from its lease. */
class Abandoned extends Error {}

/** Human-readable stage names; processing stages take 10-95 % of the job, weighted by `overallProgress`. */
const STAGE_NAMES: Record<string, string> = {
  downloading: "Downloading the source",
  probing: "Reading the media",
  segmenting: "Finding speech",
  recognizing: "Recognising speech",
  translating: "Translating",
  synthesizing: "Synthesising the dubbed voice",
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

export function costOf(durationSec: number): number {
  // 0.50 USD per minute, prorated to the (started) second.
  return Math.round(((Math.ceil(durationSec) * PRICE_USD_PER_MINUTE) / 60) * 1e6) / 1e6;
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

  /** Stops taking jobs; a job in progress is abandoned to its lease (another worker resumes it). */
  async stop(): Promise<void> {
    this.running = false;
    this.wake?.();
    this.current?.abort(new Abandoned("worker stopping"));
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
    const heartbeat = setInterval(() => {
      db.jobs.heartbeat(job.id, workerId, leaseMs).then(
        (held) => held || abort.abort(new Abandoned(`lease on job ${job.id} lost`)),
        (error: unknown) => log.warn({ err: error, job: job.id }, "heartbeat failed"),
      );
    }, leaseMs / 3);
    await mkdir(this.options.workDir, { recursive: true });
    const workDir = await mkdtemp(path.join(this.options.workDir, `job-${job.id}-`));
    let percent = job.progress?.percent ?? 0;
    const report = async (status: JobRecord["status"], stage: string, fraction: number) => {
      percent = Math.max(percent, Math.round(percentOf(stage, Math.min(1, Math.max(0, fraction)))));
      const progress: JobProgress = { stage, stageName: STAGE_NAMES[stage] ?? stage, percent };
      if (!(await db.jobs.update(job.id, workerId, { status, progress })))
        throw new Abandoned(`lease on job ${job.id} lost`);
    };
    try {
      if (job.attempts > MAX_ATTEMPTS) {
        throw new JobFailure(
          "processing_failed",
          `gave up after ${MAX_ATTEMPTS} attempts that did not finish`,
        );
      }
      log.info({ job: job.id, attempt: job.attempts }, "dubbing job started");
      await report("downloading", "downloading", 0);
      const sourcePath = path.join(workDir, "source");
      await this.fetchSource(job, sourcePath, abort.signal);
      await report("processing", "probing", 0);

      const media = await probe(sourcePath).catch((error: unknown) => {
        throw error instanceof UnsupportedFormatError
          ? new JobFailure("unsupported_format", error.message)
          : error;
      });
      if (media.durationSec > this.options.maxDurationSec) {
        throw new JobFailure(
          "video_too_long",
          `the input lasts ${media.durationSec.toFixed(1)} s; the limit is ${this.options.maxDurationSec} s`,
        );
      }
      const cost = costOf(media.durationSec);
      const balance = await db.accounts.balanceUsd(job.accountId);
      if (balance < cost) {
        throw new JobFailure(
          "insufficient_balance",
          `dubbing ${media.durationSec.toFixed(1)} s costs ${cost.toFixed(2)} USD; the balance is ${balance.toFixed(2)} USD`,
        );
      }
      await db.jobs.update(job.id, workerId, { inputDurationSec: media.durationSec });

      const stageQueue: Promise<void>[] = [];
      const result = await dubMedia({
        inputPath: sourcePath,
        outputDir: workDir,
        registry: this.options.registry,
        sourceLang: job.sourceLang,
        targetLang: job.targetLang,
        signal: abort.signal,
        onProgress: (stage, fraction) =>
          void stageQueue.push(report("processing", stage, fraction).catch(() => abort.abort())),
      }).catch((error: unknown) => {
        if (error instanceof UnsupportedFormatError)
          throw new JobFailure("unsupported_format", error.message);
        if (error instanceof MediaTooShortError) throw new JobFailure("processing_failed", error.message);
        throw error;
      });
      await Promise.all(stageQueue);
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
      const completed = await db.jobs.complete(job.id, workerId, {
        outputKey,
        costUsd: cost,
        progress: { stage: "completed", stageName: STAGE_NAMES.completed!, percent: 100 },
      });
      if (!completed) throw new Abandoned(`lease on job ${job.id} lost before completion`);
      log.info({ job: job.id, cost }, "dubbing job completed");
    } catch (error) {
      if (error instanceof Abandoned || abort.signal.reason instanceof Abandoned) {
        log.warn(
          { job: job.id, reason: String(abort.signal.reason ?? error) },
          "dubbing job left to its lease",
        );
      } else {
        const failure =
          error instanceof JobFailure ? error : new JobFailure("processing_failed", (error as Error).message);
        if (!(error instanceof JobFailure)) log.error({ err: error, job: job.id }, "dubbing job failed");
        await db.jobs.fail(job.id, workerId, `${failure.code}: ${failure.message}`).catch((e: unknown) => {
          log.error({ err: e, job: job.id }, "recording a job failure failed");
        });
      }
    } finally {
      this.current = undefined;
      clearInterval(heartbeat);
      await rm(workDir, { recursive: true, force: true });
    }
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
      });
    } catch (error) {
      if (error instanceof JobFailure) throw error;
      if (error instanceof SourceTooLargeError || error instanceof ObjectTooLargeError) {
        throw new JobFailure("video_too_large", `the source is larger than ${maxBytes} bytes`);
      }
      if (error instanceof ObjectNotFoundError) {
        throw new JobFailure("download_failed", "the upload was never completed (no object was stored)");
      }
      if (error instanceof DownloadError) throw new JobFailure("download_failed", error.message);
      throw error;
    }
  }
}

/** Starts `config.dubbing.workers` workers in this process. */
export function startDubbingWorkers(
  config: Config,
  services: Services,
  log: FastifyBaseLogger,
  tuning: { pollMs?: number } = {},
): { stop(): Promise<void> } {
  const workers = Array.from(
    { length: config.dubbing.workers },
    (_, i) =>
      new DubbingWorker({
        ...services,
        ...tuning,
        leaseMs: config.dubbing.leaseMs,
        workerId: `${config.workerId}/${i}`,
        workDir: path.join(config.dataDir, "work"),
        maxBytes: config.dubbing.maxFileBytes,
        maxDurationSec: config.dubbing.maxDurationSec,
        allowPrivateSources: config.dubbing.allowPrivateSources,
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
