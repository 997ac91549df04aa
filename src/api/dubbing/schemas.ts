import { z } from "zod";
import { contextField } from "../context-field.js";
import type { LanguageCode } from "../../core/contracts.js";
import { parseLanguageTag } from "../../core/language-tags.js";
import { DUBBING_LANGUAGES, isDubbingLanguage } from "../../engines/routing/languages.js";
import { dubbingVoice } from "../../voices/voice-defaults.js";
import type { ValidationErrorMapping } from "../errors.js";

/** The dubbing interface's request and response schemas (its routes: src/api/dubbing/routes.ts). */

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

export const uploadUrlRequest = z.object(
  {
    filename: z.string().min(1).max(255),
    content_type: z.enum(UPLOAD_TYPES),
  },
  JSON_OBJECT,
);

export const jobRequest = z.object(
  {
    source_url: z
      .string()
      .url()
      .refine((u) => /^https?:\/\//iu.test(u), "must be an http(s) URL"),
    target_lang: dubbingLanguage(),
    source_lang: dubbingLanguage(["auto"]).optional(),
    // Beyond the spec: "auto" (each speaker dubbed in the library voice matched to theirs),
    // "clone" (in their own voice where a tone colour model is loaded), "female", "male", or a
    // library voice id (GET /v1/voices).
    voice: z
      .union([z.string(), z.number().int()])
      .transform(String)
      .refine((value) => dubbingVoice(value) !== undefined, {
        message: 'must be "auto", "clone", "female", "male" or a voice id from GET /v1/voices',
      })
      .optional(),
    context: contextField,
  },
  JSON_OBJECT,
);

/** The spec's codes: a bad `source_url` is `invalid_url`, a bad language `unsupported_language`. */
export const jobRequestErrors: ValidationErrorMapping = {
  code: ({ field }) =>
    field === "source_url"
      ? "invalid_url"
      : field.endsWith("_lang")
        ? "unsupported_language"
        : "invalid_request",
};

export const jobListQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(20),
  offset: z.coerce.number().int().min(0).default(0),
});

export const subtitlesQuery = z.object({
  track: z.enum(["original", "translated"]),
  format: z.enum(["srt", "vtt"]),
  /** Name each cue's speaker (WebVTT voice spans; "1: " before SubRip lines). */
  speakers: z.enum(["true", "false"]).default("false"),
});

export const uploadUrlResponse = z.object({
  upload_url: z.string().describe("PUT the file here, with upload_headers"),
  source_url: z.string().describe("Name this in POST /api/dubbing/jobs"),
  upload_id: z.string(),
  max_file_size_bytes: z.number().int(),
  expires_in_sec: z.number().int(),
  upload_headers: z.record(z.string(), z.string()).describe("Beyond the spec: headers the PUT must carry"),
});

const JOB_STATUSES = ["pending", "downloading", "processing", "uploading", "completed", "failed"] as const;

export const jobCreated = z.object({
  job_id: z.string(),
  status: z.enum(JOB_STATUSES),
  source_lang: z.string(),
  target_lang: z.string(),
  created_at: z.string(),
  limits: z.object({ max_duration_sec: z.number(), max_file_size_bytes: z.number().int() }),
});

export const jobList = z.object({
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

export const jobStatus = z.object({
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
