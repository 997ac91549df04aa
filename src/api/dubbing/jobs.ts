import type { FastifyInstance, FastifyRequest, preValidationAsyncHookHandler } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import type { JobRecord } from "../../db/types.js";
import { toSrt, toWebVtt } from "../../dubbing/stages/subtitles.js";
import { accountOf, authenticated } from "../authenticate.js";
import { ApiError } from "../errors.js";
import { BEARER, errorResponses } from "../openapi.js";
import type { DubbingRouteOptions } from "./options.js";
import { jobList, jobListQuery, jobStatus, subtitlesQuery } from "./schemas.js";

const OUTPUT_URL_TTL_SEC = 48 * 3600;

/**
 * The account's jobs: `GET /api/dubbing/jobs` (the list), a job's status, its result's download URL
 * and (beyond the spec) its subtitles.
 */
export async function jobRoutes(app: FastifyInstance, options: DubbingRouteOptions): Promise<void> {
  const { db, store, accounts } = options;
  const routes = app.withTypeProvider<ZodTypeProvider>();
  const dubbingAccount = authenticated(accounts, "dubbing");

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
        job.status === "completed" && !job.outputExpiredAt ? await presignResult(job, request) : undefined;
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
      const output = await presignResult(job, request);
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

  /** The result's URL, at the origin the client used (PUBLIC_BASE_URL when set). */
  async function presignResult(job: JobRecord, request: FastifyRequest) {
    const extension = job.outputKind === "audio" ? "mp3" : "mp4";
    // Never valid past the result's deletion (at least a second, which presigning needs).
    const retainedSec = Math.floor((retainedUntil(job).getTime() - Date.now()) / 1000);
    return store.presignDownload(job.outputKey!, {
      expiresInSec: Math.max(1, Math.min(OUTPUT_URL_TTL_SEC, retainedSec)),
      downloadName: `dubbed-${job.targetLang}-${job.id}.${extension}`,
      baseUrl: options.publicBaseUrl(request),
    });
  }
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
