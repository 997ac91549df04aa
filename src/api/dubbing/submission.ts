import { randomUUID } from "node:crypto";
import type { FastifyInstance } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { InsufficientBalanceError } from "../../db/billing.js";
import { ActiveJobsLimitError } from "../../db/job-records.js";
import { StorageQuotaError } from "../../db/uploads.js";
import type { JobRecord, NewJob, UploadRecord } from "../../db/types.js";
import { creationHold, formatUsd, type CreationHold } from "../../dubbing/jobs/pricing.js";
import { UPLOAD_SOURCE_SCHEME } from "../../dubbing/media/source.js";
import { uploadDurationSec, urlDurationSec } from "../../dubbing/jobs/upload-duration.js";
import type { EngineRegistry } from "../../engines/routing/registry.js";
import type { LanguageCode } from "../../core/contracts.js";
import {
  dubbingAutoSource,
  isDubbingLanguage,
  recognitionAdvice,
  recognitionTier,
  translatableSources,
  unservable,
  type Requirement,
  type Unservable,
} from "../../engines/routing/languages.js";
import { DEFAULT_VOICE_TYPES } from "../../voices/voice-defaults.js";
import { accountOf, authenticated } from "../authenticate.js";
import { ApiError } from "../errors.js";
import { BEARER, errorResponses } from "../openapi.js";
import type { DubbingRouteOptions } from "./options.js";
import { jobCreated, jobRequest, jobRequestErrors, uploadUrlRequest, uploadUrlResponse } from "./schemas.js";

/** Path of the `source_url` handed out for an upload (`<public base>/api/dubbing/uploads/<id>`). */
const UPLOAD_SOURCE_PATH = "/api/dubbing/uploads/";

/**
 * `POST /api/dubbing/upload-url` and `POST /api/dubbing/jobs`: storing a source and creating the job
 * that dubs it, with what creation checks (engines, ownership, quota, balance, active jobs).
 */
export async function submissionRoutes(app: FastifyInstance, options: DubbingRouteOptions): Promise<void> {
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
        // The embedded store's URL at the origin the client used (PUBLIC_BASE_URL when set).
        baseUrl: options.publicBaseUrl(request),
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
        context: body.context ?? "",
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
}

/**
 * The configured engines must serve the pair; the error names the missing part. "auto" is checked
 * as what it means with these engines (`dubbingAutoSource`): identification, or the one language
 * the recognizers know; with several and no identifier it is refused, naming the languages that work.
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
    const from = problem.from === "auto" ? "any recognized language" : `"${problem.from}"`;
    return `no translation into "${problem.language}" from ${from} with the configured engines`;
  }
  if (problem.language !== "auto") {
    return (
      `source_lang "${problem.language}" cannot be recognized by the configured engines ` +
      `(recognition: ${problem.available.join(", ")})${recognitionAdvice(recognitionTier(registry))}`
    );
  }
  const named = translatableSources(registry, target).filter(isDubbingLanguage);
  return (
    `source_lang "auto"${defaulted ? " (the default when source_lang is omitted)" : ""} needs a recognizer ` +
    "that identifies languages when the configured recognizers know several languages " +
    `(${problem.available.join(", ")}), and none identifies; name the spoken language instead` +
    (named.length > 0 ? ` (source_lang ${named.map((l) => `"${l}"`).join(" or ")})` : "")
  );
}
