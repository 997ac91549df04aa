import { randomUUID } from "node:crypto";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import type { Accounts } from "../../auth/accounts.js";
import { InsufficientBalanceError } from "../../db/billing.js";
import type { Database, JobRecord, NewJob, UploadRecord } from "../../db/types.js";
import { costOf, formatUsd } from "../../dubbing/pricing.js";
import { UPLOAD_SOURCE_SCHEME } from "../../dubbing/source.js";
import { toSrt, toWebVtt } from "../../dubbing/subtitles.js";
import { uploadDurationSec } from "../../dubbing/upload-duration.js";
import type { EngineRegistry } from "../../engines/registry.js";
import type { ObjectStore } from "../../storage/types.js";
import type { AccountRateLimit } from "../rate-limit.js";
import { ApiError } from "../errors.js";

/** The dubbing half of the REST interface: upload URLs, jobs, results (and subtitles, beyond the spec). */

export const DUBBING_LANGUAGES = ["en", "es", "fr", "de", "it", "pt", "ru", "ja", "ko", "zh"] as const;
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
const UPLOAD_URL_TTL_SEC = 3600;
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
  /** The per-account limit shared with room sessions. */
  readonly rateLimit: AccountRateLimit;
}

/** Path of the `source_url` handed out for an upload (`<public base>/api/dubbing/uploads/<id>`). */
const UPLOAD_SOURCE_PATH = "/api/dubbing/uploads/";

function parseBody<T>(schema: z.ZodType<T>, body: unknown, codeFor: (path: string) => string): T {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new ApiError(400, "invalid_request", "the body must be a JSON object");
  }
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const path = issue.path.join(".");
  throw new ApiError(400, codeFor(path), `${path || "body"}: ${issue.message}`);
}

export async function dubbingRoutes(app: FastifyInstance, options: DubbingRouteOptions): Promise<void> {
  const { db, store, accounts, registry } = options;
  app.post("/api/dubbing/upload-url", async (request) => {
    const account = await accounts.authenticate(request.headers.authorization, "dubbing");
    const body = parseBody(
      z.object({
        filename: z.string().min(1).max(255),
        content_type: z.enum(UPLOAD_TYPES),
      }),
      request.body,
      () => "invalid_request",
    );
    await options.rateLimit(request, account);
    const id = randomUUID();
    const objectKey = `uploads/${id}`;
    const upload = await store.presignUpload(objectKey, {
      contentType: body.content_type,
      maxBytes: options.maxFileBytes,
      expiresInSec: UPLOAD_URL_TTL_SEC,
    });
    await db.uploads.create({
      id,
      accountId: account.id,
      objectKey,
      contentType: body.content_type,
      filename: body.filename,
      expiresAt: upload.expiresAt,
    });
    return {
      upload_url: upload.url,
      source_url: `${options.publicBaseUrl(request)}${UPLOAD_SOURCE_PATH}${id}`,
      upload_id: id,
      max_file_size_bytes: options.maxFileBytes,
      expires_in_sec: UPLOAD_URL_TTL_SEC,
      // Beyond the spec: the headers the PUT must carry.
      upload_headers: upload.headers,
    };
  });

  app.post("/api/dubbing/jobs", async (request, reply) => {
    const account = await accounts.authenticate(request.headers.authorization, "dubbing");
    const body = parseBody(
      z.object({
        source_url: z
          .string()
          .url()
          .refine((u) => /^https?:\/\//iu.test(u), "must be an http(s) URL"),
        target_lang: z.enum(DUBBING_LANGUAGES),
        source_lang: z.enum(["auto", ...DUBBING_LANGUAGES]).optional(),
      }),
      request.body,
      (path) =>
        path === "source_url"
          ? "invalid_url"
          : path.endsWith("_lang")
            ? "unsupported_language"
            : "invalid_request",
    );
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
    if (idempotencyKey !== undefined && (typeof idempotencyKey !== "string" || idempotencyKey.length > 200)) {
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
      idempotencyKey,
      ...(upload && (await reservationFor(upload))),
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
  });

  app.get("/api/dubbing/jobs", async (request) => {
    const account = await accounts.authenticate(request.headers.authorization, "dubbing");
    const query = z
      .object({
        limit: z.coerce.number().int().min(1).max(100).default(20),
        offset: z.coerce.number().int().min(0).default(0),
      })
      .safeParse(request.query);
    if (!query.success) {
      const issue = query.error.issues[0]!;
      throw new ApiError(400, "invalid_request", `${issue.path.join(".")}: ${issue.message}`);
    }
    const { limit, offset } = query.data;
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
  });

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
    return { sourceUrl: `${UPLOAD_SOURCE_SCHEME}${id}`, upload };
  }

  /**
   * An upload's price is known at creation: the job is created holding it (or refused with 402).
   * None when the upload cannot be read as media or is over the length limit: its worker then
   * fails the job with the spec's code.
   */
  async function reservationFor(upload: UploadRecord): Promise<Pick<NewJob, "reservation">> {
    const durationSec = await uploadDurationSec(store, upload.objectKey, {
      maxBytes: options.maxFileBytes,
      tempDir: options.workDir,
    });
    if (durationSec === undefined || durationSec > options.maxDurationSec) return {};
    return { reservation: { costUsd: costOf(durationSec), inputDurationSec: durationSec } };
  }

  async function createJob(job: NewJob): Promise<{ job: JobRecord; created: boolean }> {
    try {
      return await db.jobs.create(job);
    } catch (error) {
      if (!(error instanceof InsufficientBalanceError)) throw error;
      throw new ApiError(
        402,
        "insufficient_balance",
        `dubbing this ${job.reservation!.inputDurationSec.toFixed(1)} s upload costs ${formatUsd(error.requiredUsd)}; ` +
          `the account has ${formatUsd(error.availableUsd)} available (its balance less what its unfinished jobs hold)`,
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

  app.get("/api/dubbing/jobs/:id", async (request) => {
    const job = await ownJob(request);
    const output = job.status === "completed" ? await presignResult(job) : undefined;
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
      created_at: job.createdAt.toISOString(),
      updated_at: job.updatedAt.toISOString(),
      // Beyond the spec: what was heard and said, and where the subtitles are.
      segments: job.segments?.map((s) => ({
        start: s.startSec,
        end: s.endSec,
        ...(s.speaker ? { speaker: s.speaker } : {}),
        text: s.text,
        translated_text: s.translatedText,
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
  });

  app.get("/api/dubbing/jobs/:id/result", async (request) => {
    const job = await ownJob(request);
    if (job.status !== "completed") {
      throw new ApiError(
        404,
        "not_found",
        `job ${job.id} is ${job.status}; the result exists once it is completed`,
      );
    }
    const output = await presignResult(job);
    return { job_id: job.id, download_url: output.url, expires_at: output.expiresAt.toISOString() };
  });

  app.get("/api/dubbing/jobs/:id/subtitles", async (request, reply) => {
    const job = await ownJob(request);
    const query = z
      .object({ track: z.enum(["original", "translated"]), format: z.enum(["srt", "vtt"]) })
      .safeParse(request.query);
    if (!query.success)
      throw new ApiError(400, "invalid_request", "track=original|translated and format=srt|vtt");
    if (!job.segments) throw new ApiError(404, "not_found", `job ${job.id} has no segments yet`);
    const { track, format } = query.data;
    reply.type(format === "srt" ? "application/x-subrip; charset=utf-8" : "text/vtt; charset=utf-8");
    return format === "srt" ? toSrt(job.segments, track) : toWebVtt(job.segments, track);
  });

  async function presignResult(job: JobRecord) {
    const extension = job.outputKind === "audio" ? "mp3" : "mp4";
    return store.presignDownload(job.outputKey!, {
      expiresInSec: OUTPUT_URL_TTL_SEC,
      downloadName: `dubbed-${job.targetLang}-${job.id}.${extension}`,
    });
  }
}

/**
 * The configured engines must serve the pair; the error names the missing part. "auto" needs a
 * recogniser that identifies languages: without one it would silently mean whichever language the
 * recognisers happen to know, so it is refused, naming the source languages that work.
 */
function checkServable(registry: EngineRegistry, source: string, target: string, defaulted: boolean): void {
  const sources = source === "auto" ? registry.recognitionLanguages() : [source];
  if (source !== "auto" && !registry.recognizer(source)) {
    throw new ApiError(
      400,
      "unsupported_language",
      `source_lang "${source}" cannot be recognised by the configured engines (recognition: ${registry.recognitionLanguages().join(", ")})`,
    );
  }
  if (!registry.synthesizer(target)) {
    throw new ApiError(
      400,
      "unsupported_language",
      `target_lang "${target}" has no voice output with the configured engines`,
    );
  }
  const workable = sources.filter((from) => registry.translationRoute(from, target) !== undefined);
  if (workable.length === 0) {
    throw new ApiError(
      400,
      "unsupported_language",
      `no translation into "${target}" from ${source === "auto" ? "any recognised language" : `"${source}"`} with the configured engines`,
    );
  }
  if (source === "auto" && !registry.languageIdentifier()) {
    const named = workable.filter((from) => (DUBBING_LANGUAGES as readonly string[]).includes(from));
    throw new ApiError(
      400,
      "unsupported_language",
      `source_lang "auto"${defaulted ? " (the default when source_lang is omitted)" : ""} needs a recogniser ` +
        "that identifies languages, and the configured engines have none; name the spoken language instead" +
        (named.length > 0 ? ` (source_lang ${named.map((l) => `"${l}"`).join(" or ")})` : ""),
    );
  }
}
