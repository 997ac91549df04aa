import { randomUUID } from "node:crypto";
import type { FastifyInstance, FastifyRequest, preValidationAsyncHookHandler } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import type { Accounts } from "../../auth/accounts.js";
import { InsufficientBalanceError } from "../../db/billing.js";
import { ActiveJobsLimitError } from "../../db/jobs.js";
import { StorageQuotaError } from "../../db/uploads.js";
import type { Database, JobRecord, NewJob, UploadRecord } from "../../db/types.js";
import { creationHold, formatUsd, type CreationHold } from "../../dubbing/pricing.js";
import { UPLOAD_SOURCE_SCHEME } from "../../dubbing/source.js";
import { toSrt, toWebVtt } from "../../dubbing/subtitles.js";
import { uploadDurationSec, urlDurationSec } from "../../dubbing/upload-duration.js";
import type { EngineRegistry } from "../../engines/registry.js";
import type { LanguageCode } from "../../engines/types.js";
import {
  DUBBING_LANGUAGES,
  dubbingAutoSource,
  isDubbingLanguage,
  parseLanguageTag,
  translatableSources,
  unservable,
  type Requirement,
  type Unservable,
} from "../../languages.js";
import { DEFAULT_VOICE_TYPES, dubbingVoice } from "../../speech-plan.js";
import type { ObjectStore } from "../../storage/types.js";
import { accountOf, authenticated } from "../authenticate.js";
import { ApiError, type ValidationErrorMapping } from "../errors.js";
import { BEARER, errorResponses } from "../openapi.js";
import type { AccountRateLimit } from "../rate-limit.js";

/** The dubbing half of the REST interface: upload URLs, jobs, results (and subtitles, beyond the spec). */

export { DUBBING_LANGUAGES } from "../../languages.js";
/** The spec's video types, plus the audio formats the pipeline accepts (audio in gives MP3 out). */
const UPLOAD_TYPES = [
  "video/mp4",
  "video/quicktime",
  "video/x-matroska",
  "audio/wav",
  "audio/x-wav",
  "audio/mpeg",
  "audio/flac",
  "audio/ogg",
  "audio/mp4",
] as const;
const OUTPUT_URL_TTL_SEC = 48 * 3600;

export interface DubbingRouteOptions {
  readonly db: Database;
  readonly store: ObjectStore;
  readonly accounts: Accounts;
  readonly registry: EngineRegistry;
  readonly publicBaseUrl: (request: FastifyRequest) => string;
  readonly maxFileBytes: number;
  readonly maxDurationSec: number;
  /** Where S3 uploads are copied to be probed at job creation. */
  readonly workDir: string;
  /** Jobs one account may have pending or running. */
  readonly jobsPerAccount: number;
  /** How long creation may spend reading a `source_url`'s duration, and whether it may be private. */
  readonly sourceProbeMs: number;
  readonly allowPrivateSources: boolean;
  /** The per-account limit shared with room sessions. */
  readonly rateLimit: AccountRateLimit;
  /** Upload URL lifetime, per-account storage quota and how long results are kept. */
  readonly retention: {
    readonly uploadUrlTtlSec: number;
    readonly quotaBytes: number;
    readonly resultRetentionMs: number;
  };
}

/** Path of the `source_url` handed out for an upload (`<public base>/api/dubbing/uploads/<id>`). */
const UPLOAD_SOURCE_PATH = "/api/dubbing/uploads/";

/**
 * A dubbing language: a language tag ("es", "es-MX") whose primary language is one of the spec's
 * list. Which of them this server serves follows from the configured engines (`checkServable`).
 */
function dubbingLanguage(extra: readonly string[] = []) {
  return z.string().transform((tag, context): LanguageCode => {
    if (extra.includes(tag)) return tag;
    const parsed = parseLanguageTag(tag);
    if (parsed.ok && isDubbingLanguage(parsed.language)) return parsed.language;
    context.addIssue({
      code: "custom",
      message:
        `"${tag}" is not a dubbing language; use one of: ` + [...extra, ...DUBBING_LANGUAGES].join(", "),
    });
    return z.NEVER;
  });
}

const JSON_OBJECT = { error: "the body must be a JSON object" } as const;

const uploadUrlRequest = z.object(
  {
    filename: z.string().min(1).max(255),
    content_type: z.enum(UPLOAD_TYPES),
  },
  JSON_OBJECT,
);

const jobRequest = z.object(
  {
    source_url: z
      .string()
      .url()
      .refine((u) => /^https?:\/\//iu.test(u), "must be an http(s) URL"),
    target_lang: dubbingLanguage(),
    source_lang: dubbingLanguage(["auto"]).optional(),
    // Beyond the spec: "auto" (each speaker dubbed in the voice matched to theirs), "female",
    // "male", or a library voice id (GET /v1/voices).
    voice: z
      .union([z.string(), z.number().int()])
      .transform(String)
      .refine((value) => dubbingVoice(value) !== undefined, {
        message: 'must be "auto", "female", "male" or a voice id from GET /v1/voices',
      })
      .optional(),
  },
  JSON_OBJECT,
);

/** The spec's codes: a bad `source_url` is `invalid_url`, a bad language `unsupported_language`. */
const jobRequestErrors: ValidationErrorMapping = {
  code: ({ field }) =>
    field === "source_url"
      ? "invalid_url"
      : field.endsWith("_lang")
        ? "unsupported_language"
        : "invalid_request",
};

const jobListQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(20),
  offset: z.coerce.number().int().min(0).default(0),
});

const subtitlesQuery = z.object({
  track: z.enum(["original", "translated"]),
  format: z.enum(["srt", "vtt"]),
  /** Name each cue's speaker (WebVTT voice spans; "1: " before SubRip lines). */
  speakers: z.enum(["true", "false"]).default("false"),
});

const uploadUrlResponse = z.object({
  upload_url: z.string().describe("PUT the file here, with upload_headers"),
  source_url: z.string().describe("Name this in POST /api/dubbing/jobs"),
  upload_id: z.string(),
  max_file_size_bytes: z.number().int(),
  expires_in_sec: z.number().int(),
  upload_headers: z.record(z.string(), z.string()).describe("Beyond the spec: headers the PUT must carry"),
});

const JOB_STATUSES = ["pending", "downloading", "processing", "uploading", "completed", "failed"] as const;

const jobCreated = z.object({
  job_id: z.string(),
  status: z.enum(JOB_STATUSES),
  source_lang: z.string(),
  target_lang: z.string(),
  created_at: z.string(),
  limits: z.object({ max_duration_sec: z.number(), max_file_size_bytes: z.number().int() }),
});

const jobList = z.object({
  jobs: z.array(
    z.object({
      job_id: z.string(),
      status: z.enum(JOB_STATUSES),
      source_lang: z.string(),
      target_lang: z.string(),
      created_at: z.string(),
      updated_at: z.string(),
    }),
  ),
  total: z.number().int(),
  limit: z.number().int(),
  offset: z.number().int(),
});

const jobStatus = z.object({
  job_id: z.string(),
  status: z.enum(JOB_STATUSES),
  source_lang: z.string(),
  target_lang: z.string(),
  error: z
    .enum(["video_too_long", "video_too_large", "unsupported_format", "download_failed", "processing_failed"])
    .nullable(),
  error_message: z.string().nullable().describe("Beyond the spec: why, in words"),
  progress: z.object({ stage: z.string(), stage_name: z.string(), percent: z.number() }).nullable(),
  input_duration_sec: z.number().nullable(),
  cost_usd: z.number().nullable(),
  output_url: z
    .string()
    .nullable()
    .describe("Completed jobs: the dubbed file, valid 48 hours (less when its retention ends sooner)"),
  output_expires_at: z.string().nullable(),
  output_retained_until: z
    .string()
    .nullable()
    .describe(
      "Beyond the spec: completed jobs: when the result is deleted (RESULT_RETENTION_SEC after completion)",
    ),
  output_expired: z
    .boolean()
    .describe("Beyond the spec: the result was deleted (output_url is then null and /result answers 404)"),
  created_at: z.string(),
  updated_at: z.string(),
  voice: z.string().describe('Beyond the spec: "auto", "female", "male" or a voice id'),
  segments: z
    .array(
      z.object({
        start: z.number(),
        end: z.number(),
        speaker: z.string().optional(),
        text: z.string(),
        translated_text: z.string(),
        voice_id: z.number().int().optional(),
      }),
    )
    .optional()
    .describe("Beyond the spec: what was heard and said, once known"),
  subtitles: z.record(z.string(), z.string()).optional().describe("Beyond the spec: subtitle URLs"),
});

export async function dubbingRoutes(app: FastifyInstance, options: DubbingRouteOptions): Promise<void> {
  const { db, store, accounts, registry } = options;
  const routes = app.withTypeProvider<ZodTypeProvider>();
  const dubbingAccount = authenticated(accounts, "dubbing");

  routes.post(
    "/api/dubbing/upload-url",
    {
      schema: {
        tags: ["dubbing"],
        summary: "A presigned URL to PUT a video (or audio) file to, and the source_url a job names",
        security: BEARER,
        body: uploadUrlRequest,
        response: { 200: uploadUrlResponse, ...errorResponses(400, 401, 402, 403, 429) },
      },
      preValidation: dubbingAccount,
    },
    async (request) => {
      const account = accountOf(request);
      const body = request.body;
      await options.rateLimit(request, account);
      // Storing a file is only useful for a job, which needs a positive balance too.
      await accounts.requireBalance(account);
      const id = randomUUID();
      const objectKey = `uploads/${id}`;
      const ttlSec = options.retention.uploadUrlTtlSec;
      // The row outlives the URL by up to a second (the URL's expiry is rounded down to a second).
      const expiresAt = new Date((Math.floor(Date.now() / 1000) + ttlSec + 1) * 1000);
      let maxBytes: number;
      try {
        ({ maxBytes } = await db.uploads.create({
          id,
          accountId: account.id,
          objectKey,
          contentType: body.content_type,
          filename: body.filename,
          expiresAt,
          maxBytes: options.maxFileBytes,
          quotaBytes: options.retention.quotaBytes,
          sizesRecorded: store.kind === "local",
        }));
      } catch (error) {
        if (!(error instanceof StorageQuotaError)) throw error;
        throw new ApiError(
          403,
          "storage_quota_exceeded",
          `the account's uploads already hold ${error.usedBytes} of its ${error.quotaBytes}-byte storage quota ` +
            "(an upload counts the size its URL allows until the file is stored, and is deleted once its " +
            "jobs have finished or its URL expired unused); try again once they are",
        );
      }
      const upload = await store.presignUpload(objectKey, {
        contentType: body.content_type,
        maxBytes,
        expiresInSec: ttlSec,
      });
      return {
        upload_url: upload.url,
        source_url: `${options.publicBaseUrl(request)}${UPLOAD_SOURCE_PATH}${id}`,
        upload_id: id,
        // What this URL accepts: the file size limit, or less when the storage quota leaves less.
        max_file_size_bytes: maxBytes,
        expires_in_sec: ttlSec,
        // Beyond the spec: the headers the PUT must carry.
        upload_headers: upload.headers,
      };
    },
  );

  routes.post(
    "/api/dubbing/jobs",
    {
      schema: {
        tags: ["dubbing"],
        summary: "Create a dubbing job (201; 200 with an Idempotency-Key already used)",
        description: "An Idempotency-Key header (at most 200 characters) makes retries create one job.",
        security: BEARER,
        body: jobRequest,
        response: {
          200: jobCreated.describe("The job an earlier request with this Idempotency-Key created"),
          201: jobCreated,
          ...errorResponses(400, 401, 402, 403, 429),
        },
      },
      config: { validationError: jobRequestErrors },
      preValidation: dubbingAccount,
    },
    async (request, reply) => {
      const account = accountOf(request);
      const body = request.body;
      const sourceLang = body.source_lang ?? "auto";
      checkServable(registry, sourceLang, body.target_lang, body.source_lang === undefined);
      const { sourceUrl, upload } = await resolveOwnUpload(
        body.source_url,
        `${options.publicBaseUrl(request)}${UPLOAD_SOURCE_PATH}`,
        account.id,
      );
      await options.rateLimit(request, account);
      await accounts.requireBalance(account);
      const idempotencyKey = request.headers["idempotency-key"];
      if (
        idempotencyKey !== undefined &&
        (typeof idempotencyKey !== "string" || idempotencyKey.length > 200)
      ) {
        throw new ApiError(
          400,
          "invalid_request",
          "Idempotency-Key must be one header of at most 200 characters",
        );
      }
      const { job, created } = await createJob({
        id: randomUUID(),
        accountId: account.id,
        sourceUrl,
        sourceLang,
        targetLang: body.target_lang,
        voice: body.voice ?? DEFAULT_VOICE_TYPES.dubbing,
        idempotencyKey,
        reservation: await reservationFor(sourceUrl, upload),
      });
      reply.code(created ? 201 : 200);
      return {
        job_id: job.id,
        status: created ? "pending" : job.status,
        source_lang: job.sourceLang,
        target_lang: job.targetLang,
        created_at: job.createdAt.toISOString(),
        limits: { max_duration_sec: options.maxDurationSec, max_file_size_bytes: options.maxFileBytes },
      };
    },
  );

  routes.get(
    "/api/dubbing/jobs",
    {
      schema: {
        tags: ["dubbing"],
        summary: "The account's jobs, newest first",
        security: BEARER,
        querystring: jobListQuery,
        response: { 200: jobList, ...errorResponses(400, 401, 403) },
      },
      preValidation: dubbingAccount,
    },
    async (request) => {
      const account = accountOf(request);
      const { limit, offset } = request.query;
      const { jobs, total } = await db.jobs.list(account.id, limit, offset);
      return {
        jobs: jobs.map((job) => ({
          job_id: job.id,
          status: job.status,
          source_lang: job.sourceLang,
          target_lang: job.targetLang,
          created_at: job.createdAt.toISOString(),
          updated_at: job.updatedAt.toISOString(),
        })),
        total,
        limit,
        offset,
      };
    },
  );

  /** A `source_url` of this service's own upload becomes `upload:<id>`; it must be the caller's upload. */
  async function resolveOwnUpload(
    sourceUrl: string,
    uploadPrefix: string,
    accountId: string,
  ): Promise<{ sourceUrl: string; upload?: UploadRecord }> {
    if (!sourceUrl.startsWith(uploadPrefix)) return { sourceUrl };
    const id = sourceUrl.slice(uploadPrefix.length);
    const upload = await db.uploads.get(id);
    if (!upload || upload.accountId !== accountId) {
      throw new ApiError(400, "invalid_url", `source_url names no upload of this account (${id})`);
    }
    if (upload.deletedAt) throw uploadDeleted(id);
    return { sourceUrl: `${UPLOAD_SOURCE_SCHEME}${id}`, upload };
  }

  function uploadDeleted(id: string): ApiError {
    return new ApiError(
      400,
      "invalid_url",
      `upload ${id} has been deleted (an upload is kept until the jobs naming it have finished, or ` +
        "until its URL expired if no job named it); upload the file again",
    );
  }

  /**
   * A job naming an upload counts as a naming of it before it is inserted, so retention keeps the
   * upload until the job has finished; the naming is undone when no job was created after all.
   */
  async function createJob(...args: Parameters<typeof insertJob>): ReturnType<typeof insertJob> {
    const [job] = args;
    if (!job.sourceUrl.startsWith(UPLOAD_SOURCE_SCHEME)) return insertJob(...args);
    const uploadId = job.sourceUrl.slice(UPLOAD_SOURCE_SCHEME.length);
    if (!(await db.uploads.name(uploadId))) throw uploadDeleted(uploadId);
    let created = false;
    try {
      const result = await insertJob(...args);
      created = result.created;
      return result;
    } finally {
      if (!created) await db.uploads.unname(uploadId);
    }
  }

  /**
   * What the job holds from its creation (`creationHold`): the source's duration is read first, an
   * upload's where it is stored, a URL's over HTTP within `sourceProbeMs`.
   */
  async function reservationFor(sourceUrl: string, upload: UploadRecord | undefined): Promise<CreationHold> {
    const durationSec = upload
      ? await uploadDurationSec(store, upload.objectKey, {
          maxBytes: options.maxFileBytes,
          tempDir: options.workDir,
        })
      : await urlDurationSec(sourceUrl, {
          allowPrivate: options.allowPrivateSources,
          timeoutMs: options.sourceProbeMs,
        });
    return creationHold(durationSec, options.maxDurationSec);
  }

  async function insertJob(job: NewJob): Promise<{ job: JobRecord; created: boolean }> {
    try {
      return await db.jobs.create(job, { maxActiveJobs: options.jobsPerAccount });
    } catch (error) {
      if (error instanceof ActiveJobsLimitError) {
        throw new ApiError(
          429,
          "rate_limited",
          `the account already has ${error.limit} dubbing jobs pending or running, the most it may have; ` +
            "create more once some have finished",
        );
      }
      if (!(error instanceof InsufficientBalanceError)) throw error;
      const durationSec = job.reservation?.inputDurationSec;
      const what =
        durationSec === undefined
          ? `this source's duration could not be read at creation (or is over the ${options.maxDurationSec} s limit), ` +
            `so the job must hold the price of the longest accepted input, ${formatUsd(error.requiredUsd)}`
          : `dubbing this ${durationSec.toFixed(1)} s source costs ${formatUsd(error.requiredUsd)}`;
      throw new ApiError(
        402,
        "insufficient_balance",
        `${what}; the account has ${formatUsd(error.availableUsd)} available (its balance less what its ` +
          "unfinished jobs hold)",
      );
    }
  }

  async function ownJob(request: FastifyRequest): Promise<JobRecord> {
    const account = await accounts.authenticate(request.headers.authorization, "dubbing");
    const { id } = request.params as { id: string };
    const job = await db.jobs.get(account.id, id);
    if (!job) throw new ApiError(404, "not_found", `no dubbing job ${id}`);
    return job;
  }

  const jobParams = z.object({ id: z.string() });
  routes.get(
    "/api/dubbing/jobs/:id",
    {
      schema: {
        tags: ["dubbing"],
        summary: "A job's status, progress, cost, result URL (48 h) and segments",
        security: BEARER,
        params: jobParams,
        response: { 200: jobStatus, ...errorResponses(401, 403, 404) },
      },
    },
    async (request) => {
      const job = await ownJob(request);
      const output =
        job.status === "completed" && !job.outputExpiredAt ? await presignResult(job) : undefined;
      return {
        job_id: job.id,
        status: job.status,
        source_lang: job.sourceLang,
        target_lang: job.targetLang,
        error: job.error,
        // Beyond the spec: why, in words (`error` is the spec's code alone).
        error_message: job.errorMessage,
        progress: job.progress && {
          stage: job.progress.stage,
          stage_name: job.progress.stageName,
          percent: job.progress.percent,
        },
        input_duration_sec: job.inputDurationSec,
        cost_usd: job.costUsd,
        output_url: output?.url ?? null,
        output_expires_at: output?.expiresAt.toISOString() ?? null,
        output_retained_until: job.status === "completed" ? retainedUntil(job).toISOString() : null,
        output_expired: job.outputExpiredAt !== null,
        created_at: job.createdAt.toISOString(),
        updated_at: job.updatedAt.toISOString(),
        // Beyond the spec: the voice asked for, what was heard and said (and by whom), and where the
        // subtitles are.
        voice: job.voice,
        segments: job.segments?.map((s) => ({
          start: s.startSec,
          end: s.endSec,
          ...(s.speaker ? { speaker: s.speaker } : {}),
          text: s.text,
          translated_text: s.translatedText,
          ...(s.voiceId !== undefined ? { voice_id: s.voiceId } : {}),
        })),
        subtitles: job.segments
          ? Object.fromEntries(
              (["original", "translated"] as const).flatMap((track) =>
                (["srt", "vtt"] as const).map((format) => [
                  `${track}_${format}`,
                  `/api/dubbing/jobs/${job.id}/subtitles?track=${track}&format=${format}`,
                ]),
              ),
            )
          : undefined,
      };
    },
  );

  routes.get(
    "/api/dubbing/jobs/:id/result",
    {
      schema: {
        tags: ["dubbing"],
        summary: "The dubbed file's download URL (valid 48 hours) once the job is completed",
        security: BEARER,
        params: jobParams,
        response: {
          200: z.object({ job_id: z.string(), download_url: z.string(), expires_at: z.string() }),
          ...errorResponses(401, 403, 404),
        },
      },
    },
    async (request) => {
      const job = await ownJob(request);
      if (job.status !== "completed") {
        throw new ApiError(
          404,
          "not_found",
          `job ${job.id} is ${job.status}; the result exists once it is completed`,
        );
      }
      if (job.outputExpiredAt) {
        throw new ApiError(
          404,
          "result_expired",
          `the result of job ${job.id} was deleted on ${job.outputExpiredAt.toISOString()}: results are kept ` +
            `${formatDuration(options.retention.resultRetentionMs)} after the job completed`,
        );
      }
      const output = await presignResult(job);
      return { job_id: job.id, download_url: output.url, expires_at: output.expiresAt.toISOString() };
    },
  );

  // The job is looked up before the query is validated: an unknown job is a 404 whatever the query.
  const loadOwnJob: preValidationAsyncHookHandler = async (request) => {
    request.dubbingJob = await ownJob(request);
  };
  routes.get(
    "/api/dubbing/jobs/:id/subtitles",
    {
      schema: {
        tags: ["dubbing"],
        summary: "Beyond the spec: the original or translated subtitles (SubRip or WebVTT text)",
        security: BEARER,
        params: jobParams,
        querystring: subtitlesQuery,
        response: {
          200: {
            description: "The subtitles as text: WebVTT (format=vtt) or SubRip (format=srt)",
            content: {
              "text/vtt": { schema: z.string().describe("WebVTT (format=vtt)") },
              "application/x-subrip": { schema: z.string().describe("SubRip (format=srt)") },
            },
          },
          ...errorResponses(400, 401, 403, 404),
        },
      },
      config: { validationError: { message: () => "track=original|translated and format=srt|vtt" } },
      preValidation: loadOwnJob,
    },
    async (request, reply) => {
      const job = request.dubbingJob!;
      if (!job.segments) throw new ApiError(404, "not_found", `job ${job.id} has no segments yet`);
      const { track, format } = request.query;
      const options = { speakers: request.query.speakers === "true" };
      reply.type(format === "srt" ? "application/x-subrip; charset=utf-8" : "text/vtt; charset=utf-8");
      return format === "srt" ? toSrt(job.segments, track, options) : toWebVtt(job.segments, track, options);
    },
  );

  /** When retention deletes a completed job's result (a completed job is never written again). */
  function retainedUntil(job: JobRecord): Date {
    return new Date(job.updatedAt.getTime() + options.retention.resultRetentionMs);
  }

  async function presignResult(job: JobRecord) {
    const extension = job.outputKind === "audio" ? "mp3" : "mp4";
    // Never valid past the result's deletion (at least a second, which presigning needs).
    const retainedSec = Math.floor((retainedUntil(job).getTime() - Date.now()) / 1000);
    return store.presignDownload(job.outputKey!, {
      expiresInSec: Math.max(1, Math.min(OUTPUT_URL_TTL_SEC, retainedSec)),
      downloadName: `dubbed-${job.targetLang}-${job.id}.${extension}`,
    });
  }
}

/**
 * The configured engines must serve the pair; the error names the missing part. "auto" is checked
 * as what it means with these engines (`dubbingAutoSource`): identification, or the one language
 * the recognisers know; with several and no identifier it is refused, naming the languages that work.
 */
function checkServable(
  registry: EngineRegistry,
  requested: LanguageCode | "auto",
  target: LanguageCode,
  defaulted: boolean,
): void {
  const source = requested === "auto" ? (dubbingAutoSource(registry) ?? "auto") : requested;
  const requirements: Requirement[] = [
    ...(source === "auto" ? [] : [{ kind: "recognition", language: source } as const]),
    { kind: "voice", language: target },
    { kind: "translation", from: source, to: target },
    ...(source === "auto" ? [{ kind: "recognition", language: "auto" } as const] : []),
  ];
  const problem = unservable(registry, requirements);
  if (!problem) return;
  throw new ApiError(400, "unsupported_language", unservableMessage(registry, problem, target, defaulted));
}

function unservableMessage(
  registry: EngineRegistry,
  problem: Unservable,
  target: LanguageCode,
  defaulted: boolean,
): string {
  if (problem.kind === "voice") {
    return `target_lang "${problem.language}" has no voice output with the configured engines`;
  }
  if (problem.kind === "translation") {
    const from = problem.from === "auto" ? "any recognised language" : `"${problem.from}"`;
    return `no translation into "${problem.language}" from ${from} with the configured engines`;
  }
  if (problem.language !== "auto") {
    return `source_lang "${problem.language}" cannot be recognised by the configured engines (recognition: ${problem.available.join(", ")})`;
  }
  const named = translatableSources(registry, target).filter(isDubbingLanguage);
  return (
    `source_lang "auto"${defaulted ? " (the default when source_lang is omitted)" : ""} needs a recogniser ` +
    "that identifies languages when the configured recognisers know several languages " +
    `(${problem.available.join(", ")}), and none identifies; name the spoken language instead` +
    (named.length > 0 ? ` (source_lang ${named.map((l) => `"${l}"`).join(" or ")})` : "")
  );
}

/** "30 days", "36 hours", "90 seconds": the largest unit that divides the duration. */
function formatDuration(ms: number): string {
  const seconds = Math.round(ms / 1000);
  for (const [unit, size] of [
    ["day", 86_400],
    ["hour", 3600],
    ["minute", 60],
  ] as const) {
    if (seconds >= size && seconds % size === 0) return plural(seconds / size, unit);
  }
  return plural(seconds, "second");
}

function plural(count: number, unit: string): string {
  return `${count} ${unit}${count === 1 ? "" : "s"}`;
}

declare module "fastify" {
  interface FastifyRequest {
    /** The caller's job named by the `:id` of a subtitles request. */
    dubbingJob?: JobRecord;
  }
}
