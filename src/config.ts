import { createHmac, randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { existsSync } from "node:fs";
import { isIP } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import ipaddr from "ipaddr.js";
import { z } from "zod";
import { findModel } from "./engines/whisper-cpp/catalogue.js";
import { anyMtPulled } from "./engines/transformers-js/models.js";
import { anyPulled, pulledModels, sherpaModelDir } from "./engines/sherpa-onnx/models.js";
import {
  defaultEngines,
  DEFAULT_WHISPER_MODEL,
  EngineConfigError,
  pivotLanguagesOf,
  readEnginesFile,
  selectEngines,
  type EngineSettings,
  type EngineLists,
} from "./engines/routing/engine-config.js";
import { familySettingsFrom, familyVariables } from "./engines/routing/descriptors.js";

/**
 * All configuration comes from environment variables, validated here once at start-up
 * (documented in docs/configuration.md).
 */

const PROJECT_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

const list = z.string().transform((value) =>
  value
    .split(",")
    .map((item) => item.trim())
    .filter(Boolean),
);

const apiKeySpec = z.string().transform((spec, ctx) => {
  // key[:balanceUsd[:entitlement+entitlement]]
  const [key, balance, entitlements] = spec.split(":");
  const balanceUsd = balance === undefined || balance === "" ? 100 : Number(balance);
  if (!key || !Number.isFinite(balanceUsd)) {
    ctx.addIssue({
      code: "custom",
      message: `invalid API key entry "${spec}" (expected key[:balance[:realtime+dubbing]])`,
    });
    return z.NEVER;
  }
  const scopes = entitlements ? entitlements.split("+").filter(Boolean) : ["realtime", "rooms", "dubbing"];
  return { key, balanceUsd, entitlements: scopes };
});

const envSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  HOST: z.string().default("0.0.0.0"),
  DATA_DIR: z.string().default(path.join(PROJECT_ROOT, "data")),
  PUBLIC_BASE_URL: z.preprocess((v) => (v === "" ? undefined : v), z.string().url().optional()),
  API_KEYS: list.pipe(z.array(apiKeySpec)).default([]),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  REQUEST_LOG_PER_SEC: z.coerce.number().int().min(1).default(20),
  MAX_HEADER_BYTES: z.coerce
    .number()
    .int()
    .min(4096)
    .max(1 << 20)
    .default(16 * 1024),
  TRUSTED_PROXIES: list
    .pipe(
      z.array(
        z.string().refine((item) => isIP(item) !== 0 || ipaddr.isValidCIDR(item), {
          message: "expected IP addresses or CIDR ranges, e.g. 10.0.0.0/8,127.0.0.1",
        }),
      ),
    )
    .default([]),
  MAX_SESSIONS: z.coerce.number().int().min(1).default(32),
  UNCLAIMED_SESSIONS_PER_ACCOUNT: z.coerce.number().int().min(1).default(16),
  UNCLAIMED_SESSIONS_MAX: z.coerce.number().int().min(1).default(1024),
  LIVE_SESSIONS_PER_ACCOUNT: z.coerce.number().int().min(1).default(8),
  // Timers beyond about 24 days (2^31 ms) would fire at once.
  SESSION_IDLE_TIMEOUT_SEC: z.coerce.number().positive().max(2_000_000).default(60),
  SESSION_MAX_DURATION_SEC: z.coerce
    .number()
    .positive()
    .max(2_000_000)
    .default(3 * 3600),
  REVOCATION_CHECK_SEC: z.coerce.number().positive().max(2_000_000).default(5),
  SESSION_SECRET: z.string().min(16).optional(),
  WORKER_ID: z
    .string()
    .regex(/^[\w.:-]{1,100}$/u, "letters, digits and ._:- only, at most 100")
    .optional(),
  ADVERTISE_URL: z.string().url().optional(),

  DATABASE_URL: z.string().optional(),
  STORAGE_BACKEND: z.enum(["local", "s3"]).default("local"),
  S3_BUCKET: z.string().optional(),
  S3_REGION: z.string().default("us-east-1"),
  S3_ENDPOINT: z.string().url().optional(),
  S3_PUBLIC_ENDPOINT: z.string().url().optional(),
  S3_ACCESS_KEY_ID: z.string().optional(),
  S3_SECRET_ACCESS_KEY: z.string().optional(),
  S3_FORCE_PATH_STYLE: z.enum(["true", "false", "1", "0"]).default("false"),
  STORAGE_SECRET: z.string().min(16).optional(),
  S3_UPLOAD_IF_NONE_MATCH: z.enum(["true", "false", "1", "0"]).default("true"),
  S3_LIFECYCLE: z.enum(["true", "false", "1", "0"]).default("true"),
  UPLOAD_URL_TTL_SEC: z.coerce
    .number()
    .int()
    .min(1)
    .max(7 * 24 * 3600)
    .default(3600),
  UPLOAD_RETENTION_SEC: z.coerce.number().int().min(0).default(86_400),
  RESULT_RETENTION_SEC: z.coerce
    .number()
    .int()
    .min(1)
    .default(30 * 86_400),
  STORAGE_QUOTA_BYTES: z.coerce
    .number()
    .int()
    .min(1)
    .default(10 * 1024 * 1024 * 1024),
  RETENTION_SWEEP_SEC: z.coerce.number().int().min(1).default(300),
  DUBBING_WORKERS: z.coerce.number().int().min(0).max(16).default(1),
  DUBBING_LEASE_SEC: z.coerce.number().int().min(1).default(30),
  DUBBING_MAX_DURATION_SEC: z.coerce.number().int().min(1).default(600),
  DUBBING_MAX_FILE_BYTES: z.coerce
    .number()
    .int()
    .min(1)
    .default(500 * 1024 * 1024),
  SOURCE_URL_ALLOW_PRIVATE: z.enum(["true", "false", "1", "0"]).default("false"),
  DUBBING_JOBS_PER_ACCOUNT: z.coerce.number().int().min(1).default(10),
  DUBBING_SOURCE_PROBE_SEC: z.coerce.number().positive().default(10),
  DUBBING_DOWNLOAD_BASE_SEC: z.coerce.number().positive().default(60),
  DUBBING_DOWNLOAD_MIN_BYTES_PER_SEC: z.coerce
    .number()
    .int()
    .min(1)
    .default(256 * 1024),
  RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).default(10),
  REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\//u, "must be a redis:// or rediss:// URL")
    .optional(),
  REDIS_KEY_PREFIX: z.string().min(1).max(100).default("relay:"),

  LIVEKIT_URL: z
    .string()
    .regex(/^(wss?|https?):\/\/[^\s]+$/u, "must be a ws://, wss://, http:// or https:// URL")
    .optional(),
  LIVEKIT_API_KEY: z.string().min(1).optional(),
  LIVEKIT_API_SECRET: z.string().min(1).optional(),
  ROOM_SECRET: z.string().min(32).optional(),
  ROOM_TOKEN_TTL_SEC: z.coerce.number().int().min(10).max(86_400).default(600),
  ROOM_MAX_LIFETIME_SEC: z.coerce
    .number()
    .int()
    .min(1)
    .default(3 * 3600),
  ROOM_EMPTY_TIMEOUT_SEC: z.coerce.number().int().min(1).default(60),
  ROOMS_EMPTY_PER_ACCOUNT: z.coerce.number().int().min(1).default(4),
  ROOM_DEPARTURE_TIMEOUT_SEC: z.coerce.number().int().min(0).default(20),
  ROOM_MAX_PARTICIPANTS: z.coerce.number().int().min(1).max(100).default(8),

  ENGINES_FILE: z.string().optional(),
  ASR_ENGINES: list.optional(),
  MT_ENGINES: list.optional(),
  TTS_ENGINES: list.optional(),
  MODELS_DIR: z.string().optional(),
  /** Where the library voices' measurements are kept (default `DATA_DIR/voice-measurements`). */
  VOICE_MEASUREMENTS_DIR: z.string().optional(),
  SILERO_VAD_MODEL: z.string().optional(),
  /**
   * Who tells speakers apart: "auto" (default) uses the pulled speaker-embedding model
   * (`relay models pull speaker-campplus-en`) when there is one, else the embedded MFCC engine.
   */
  SPEAKER_ENGINE: z.enum(["auto", "mfcc", "sherpa-onnx"]).default("auto"),
  /** The sherpa-onnx speaker engine's thresholds (1 − cosine; src/engines/sherpa-onnx/speaker-embedding.ts). */
  SPEAKER_SAME_BELOW: z.coerce.number().min(0).max(2).optional(),
  SPEAKER_NEW_ABOVE: z.coerce.number().min(0).max(2).optional(),
  TRANSLATION_PIVOT_LANGUAGE: z.string().optional(),
  // Each engine family's own variables (its descriptor's `environment`).
  ...familyVariables(),
});

export interface Config {
  readonly port: number;
  readonly host: string;
  readonly dataDir: string;
  /** Base of URLs handed to clients; `ws_url` uses its ws:// or wss:// form. */
  readonly publicBaseUrl: string | undefined;
  readonly apiKeys: readonly { key: string; balanceUsd: number; entitlements: readonly string[] }[];
  readonly logLevel: string;
  readonly http: {
    /**
     * Per-request log lines of refused (4xx) and unauthenticated requests written per second; the
     * others are counted in one summary line.
     */
    readonly requestLogPerSec: number;
    /** Bound on a request's line and headers (`GET /v1/session` may add its `context` allowance). */
    readonly maxHeaderBytes: number;
    /** Addresses and CIDR ranges of the proxies whose X-Forwarded-* and `x-request-id` are believed. */
    readonly trustedProxies: readonly string[];
  };
  readonly maxSessions: number;
  /** Bounds on sessions created by `GET /v1/session` and not yet connected. */
  readonly unclaimedSessions: { readonly perAccount: number; readonly total: number };
  readonly liveSessions: {
    /** Open session sockets and rooms one account may hold (fleet-wide with Redis). */
    readonly perAccount: number;
    /** A session socket with no audio and no message this long is closed. */
    readonly idleTimeoutMs: number;
    /** A session socket is closed this long after it opened. */
    readonly maxDurationMs: number;
    /** How often the accounts of live sessions are checked for a revoked API key. */
    readonly revocationCheckMs: number;
  };
  /** Signs `ws_url` tokens; random per process when not set (then URLs are only valid on this process). */
  readonly sessionSecret: string;
  /** Names this process: in `ready.worker_id`, logs, job leases and the fleet's process table. */
  readonly workerId: string;
  /** Where the other processes of a fleet reach this one (`ADVERTISE_URL`). */
  readonly advertiseUrl: string;
  /** `sqlite:<file>` (default: `<DATA_DIR>/relay.db`) or `postgres://…`. */
  readonly databaseUrl: string;
  /**
   * Redis shared by the processes of a fleet (`REDIS_URL`); its keys start with `keyPrefix`. Holds
   * the request-rate counters, so every process counts against the same per-account budget.
   */
  readonly redis: { readonly url: string; readonly keyPrefix: string } | undefined;
  readonly storage:
    | { readonly kind: "local"; readonly dir: string; readonly secret: string | undefined }
    | {
        readonly kind: "s3";
        readonly bucket: string;
        readonly region: string;
        readonly endpoint: string | undefined;
        readonly publicEndpoint: string | undefined;
        readonly accessKeyId: string | undefined;
        readonly secretAccessKey: string | undefined;
        readonly forcePathStyle: boolean;
        /** Upload URLs require `If-None-Match: *`, so the bucket refuses a second PUT. */
        readonly conditionalUploads: boolean;
      };
  readonly dubbing: {
    readonly workers: number;
    /** How long a job stays with a worker that stopped sending heartbeats before another takes it. */
    readonly leaseMs: number;
    readonly maxDurationSec: number;
    readonly maxFileBytes: number;
    readonly allowPrivateSources: boolean;
    /** Scratch space of jobs and of probing uploads at job creation: `DATA_DIR/work`. */
    readonly workDir: string;
    /** Jobs one account may have pending or running (fleet-wide: counted in the database). */
    readonly jobsPerAccount: number;
    /** How long job creation may spend reading a `source_url`'s duration. */
    readonly sourceProbeMs: number;
    /** A source download may take `baseMs` plus 1 s per `minBytesPerSec` bytes. */
    readonly downloadDeadline: { readonly baseMs: number; readonly minBytesPerSec: number };
  };
  /** What is kept in the object store, and for how long (src/dubbing/jobs/retention.ts). */
  readonly retention: {
    /** Lifetime of an upload URL. */
    readonly uploadUrlTtlSec: number;
    /** An upload no job has named is deleted this long after its URL expired. */
    readonly uploadRetentionMs: number;
    /** A result is deleted this long after its job completed. */
    readonly resultRetentionMs: number;
    /** What one account's uploads not yet deleted may hold in all. */
    readonly quotaBytes: number;
    readonly sweepIntervalMs: number;
    /** S3: merge relay's expiration rules into the bucket's lifecycle at start. */
    readonly s3Lifecycle: boolean;
  };
  readonly rateLimitPerMinute: number;
  readonly rooms: {
    readonly backend:
      | { readonly kind: "embedded"; readonly secret: string }
      | {
          readonly kind: "livekit";
          readonly url: string;
          readonly apiKey: string;
          readonly apiSecret: string;
        };
    /** How long a room token may be used to join (LiveKit checks it at join time only). */
    readonly tokenTtlSec: number;
    readonly maxLifetimeMs: number;
    /** A room nobody has joined is closed after this long. */
    readonly emptyTimeoutMs: number;
    /** Rooms nobody is in that one account may hold at once. */
    readonly emptyPerAccount: number;
    /** A room is closed this long after its last participant left. */
    readonly departureTimeoutMs: number;
    readonly maxParticipants: number;
  };
  readonly engines: EngineSettings;
}

export class ConfigError extends Error {}

/**
 * `DATABASE_URL`, or the SQLite file in `DATA_DIR`: the service's database, which `relay keys`
 * opens without loading the rest of the configuration.
 */
export function databaseUrlOf(env: NodeJS.ProcessEnv): string {
  return (
    env.DATABASE_URL ||
    `sqlite:${path.join(path.resolve(env.DATA_DIR || path.join(PROJECT_ROOT, "data")), "relay.db")}`
  );
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join(".")}: ${issue.message}`);
    throw new ConfigError(`invalid configuration:\n  ${problems.join("\n  ")}`);
  }
  const e = parsed.data;
  const dataDir = path.resolve(e.DATA_DIR);
  const truthy = (value: string) => value === "true" || value === "1";
  if (e.STORAGE_BACKEND === "s3" && !e.S3_BUCKET) {
    throw new ConfigError("invalid configuration:\n  S3_BUCKET: required when STORAGE_BACKEND=s3");
  }
  const modelsDir = path.resolve(e.MODELS_DIR ?? path.join(dataDir, "models"));
  const modelPresent = existsSync(path.join(modelsDir, findModel(DEFAULT_WHISPER_MODEL)!.file));
  // These defaults assume whisper.cpp's build loads: `recognizersToBuild` checks it.
  const defaults = defaultEngines({
    modelPresent,
    nativeBuild: true,
    neuralVoices: anyPulled("tts", modelsDir),
    neuralTranslation: anyMtPulled(modelsDir),
    streamingEnglish: anyPulled("streaming-asr", modelsDir),
  });
  let engineLists: EngineLists & { pivot: string[]; asrDefaulted: boolean };
  try {
    const file = e.ENGINES_FILE ? readEnginesFile(e.ENGINES_FILE, env) : undefined;
    engineLists = {
      asr: selectEngines("asr", file, e.ASR_ENGINES, defaults),
      mt: selectEngines("mt", file, e.MT_ENGINES, defaults),
      tts: selectEngines("tts", file, e.TTS_ENGINES, defaults),
      pivot: pivotLanguagesOf(e.TRANSLATION_PIVOT_LANGUAGE ?? file?.pivotLanguage),
      asrDefaulted: e.ASR_ENGINES === undefined && (file?.asr.length ?? 0) === 0,
    };
  } catch (error) {
    if (error instanceof EngineConfigError)
      throw new ConfigError(`invalid configuration:\n  ${error.message}`);
    throw error;
  }
  const livekit = [e.LIVEKIT_URL, e.LIVEKIT_API_KEY, e.LIVEKIT_API_SECRET];
  if (livekit.some(Boolean) && !livekit.every(Boolean)) {
    throw new ConfigError(
      "invalid configuration:\n  LIVEKIT_URL, LIVEKIT_API_KEY, LIVEKIT_API_SECRET: set all three to use LiveKit, or none",
    );
  }
  const sessionSecret = e.SESSION_SECRET ?? randomBytes(32).toString("hex");
  return {
    port: e.PORT,
    host: e.HOST,
    dataDir,
    publicBaseUrl: e.PUBLIC_BASE_URL?.replace(/\/+$/u, ""),
    apiKeys: e.API_KEYS,
    logLevel: e.LOG_LEVEL,
    http: {
      requestLogPerSec: e.REQUEST_LOG_PER_SEC,
      maxHeaderBytes: e.MAX_HEADER_BYTES,
      trustedProxies: e.TRUSTED_PROXIES,
    },
    maxSessions: e.MAX_SESSIONS,
    unclaimedSessions: { perAccount: e.UNCLAIMED_SESSIONS_PER_ACCOUNT, total: e.UNCLAIMED_SESSIONS_MAX },
    liveSessions: {
      perAccount: e.LIVE_SESSIONS_PER_ACCOUNT,
      idleTimeoutMs: e.SESSION_IDLE_TIMEOUT_SEC * 1000,
      maxDurationMs: e.SESSION_MAX_DURATION_SEC * 1000,
      revocationCheckMs: e.REVOCATION_CHECK_SEC * 1000,
    },
    sessionSecret,
    workerId: e.WORKER_ID ?? `${hostname()}-${process.pid}`,
    advertiseUrl: (
      e.ADVERTISE_URL ?? `http://${e.HOST === "0.0.0.0" || e.HOST === "::" ? "127.0.0.1" : e.HOST}:${e.PORT}`
    ).replace(/\/+$/u, ""),
    databaseUrl: databaseUrlOf(env),
    storage:
      e.STORAGE_BACKEND === "s3"
        ? {
            kind: "s3",
            bucket: e.S3_BUCKET!,
            region: e.S3_REGION,
            endpoint: e.S3_ENDPOINT,
            publicEndpoint: e.S3_PUBLIC_ENDPOINT,
            accessKeyId: e.S3_ACCESS_KEY_ID,
            secretAccessKey: e.S3_SECRET_ACCESS_KEY,
            forcePathStyle: truthy(e.S3_FORCE_PATH_STYLE),
            conditionalUploads: truthy(e.S3_UPLOAD_IF_NONE_MATCH),
          }
        : { kind: "local", dir: path.join(dataDir, "objects"), secret: e.STORAGE_SECRET },
    dubbing: {
      workers: e.DUBBING_WORKERS,
      leaseMs: e.DUBBING_LEASE_SEC * 1000,
      maxDurationSec: e.DUBBING_MAX_DURATION_SEC,
      maxFileBytes: e.DUBBING_MAX_FILE_BYTES,
      allowPrivateSources: truthy(e.SOURCE_URL_ALLOW_PRIVATE),
      workDir: path.join(dataDir, "work"),
      jobsPerAccount: e.DUBBING_JOBS_PER_ACCOUNT,
      sourceProbeMs: e.DUBBING_SOURCE_PROBE_SEC * 1000,
      downloadDeadline: {
        baseMs: e.DUBBING_DOWNLOAD_BASE_SEC * 1000,
        minBytesPerSec: e.DUBBING_DOWNLOAD_MIN_BYTES_PER_SEC,
      },
    },
    retention: {
      uploadUrlTtlSec: e.UPLOAD_URL_TTL_SEC,
      uploadRetentionMs: e.UPLOAD_RETENTION_SEC * 1000,
      resultRetentionMs: e.RESULT_RETENTION_SEC * 1000,
      quotaBytes: e.STORAGE_QUOTA_BYTES,
      sweepIntervalMs: e.RETENTION_SWEEP_SEC * 1000,
      s3Lifecycle: truthy(e.S3_LIFECYCLE),
    },
    rateLimitPerMinute: e.RATE_LIMIT_PER_MINUTE,
    redis: e.REDIS_URL ? { url: e.REDIS_URL, keyPrefix: e.REDIS_KEY_PREFIX } : undefined,
    rooms: {
      backend: e.LIVEKIT_URL
        ? {
            kind: "livekit",
            url: e.LIVEKIT_URL,
            apiKey: e.LIVEKIT_API_KEY!,
            apiSecret: e.LIVEKIT_API_SECRET!,
          }
        : {
            kind: "embedded",
            // Derived from SESSION_SECRET by default, so processes sharing it accept each other's room tokens.
            secret: e.ROOM_SECRET ?? createHmac("sha256", sessionSecret).update("relay rooms").digest("hex"),
          },
      tokenTtlSec: e.ROOM_TOKEN_TTL_SEC,
      maxLifetimeMs: e.ROOM_MAX_LIFETIME_SEC * 1000,
      emptyTimeoutMs: e.ROOM_EMPTY_TIMEOUT_SEC * 1000,
      emptyPerAccount: e.ROOMS_EMPTY_PER_ACCOUNT,
      departureTimeoutMs: e.ROOM_DEPARTURE_TIMEOUT_SEC * 1000,
      maxParticipants: e.ROOM_MAX_PARTICIPANTS,
    },
    engines: {
      asr: engineLists.asr,
      mt: engineLists.mt,
      tts: engineLists.tts,
      asrFollowsWhisperBuild: modelPresent && engineLists.asrDefaulted,
      modelsDir,
      sileroModel: e.SILERO_VAD_MODEL,
      speakerModel: speakerModel(e.SPEAKER_ENGINE, modelsDir),
      speakerThresholds: {
        ...(e.SPEAKER_SAME_BELOW === undefined ? {} : { sameSpeakerBelow: e.SPEAKER_SAME_BELOW }),
        ...(e.SPEAKER_NEW_ABOVE === undefined ? {} : { newSpeakerAbove: e.SPEAKER_NEW_ABOVE }),
      },
      pivotLanguages: engineLists.pivot,
      families: familySettingsFrom(e, {
        maxSessions: e.MAX_SESSIONS,
        projectRoot: PROJECT_ROOT,
        modelsDir,
      }),
      voiceMeasurementsDir: path.resolve(
        e.VOICE_MEASUREMENTS_DIR ?? path.join(dataDir, "voice-measurements"),
      ),
    },
  };
}

/**
 * The speaker-embedding model file to load, by SPEAKER_ENGINE: "auto" takes the first pulled
 * catalogue speaker model if any, "sherpa-onnx" requires one, "mfcc" none (the embedded engine).
 */
function speakerModel(choice: "auto" | "mfcc" | "sherpa-onnx", modelsDir: string): string | undefined {
  if (choice === "mfcc" || (choice === "auto" && !anyPulled("speaker", modelsDir))) return undefined;
  try {
    const [entry] = pulledModels("speaker", undefined, modelsDir);
    return path.join(sherpaModelDir(entry!, modelsDir), entry!.speaker.model);
  } catch (error) {
    throw new ConfigError(`invalid configuration:\n  SPEAKER_ENGINE: ${(error as Error).message}`);
  }
}
