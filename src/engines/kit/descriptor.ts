import { z } from "zod";
import type { AsrEngine, MtEngine, TtsEngine } from "../../core/contracts.js";
import { isLanguageCode } from "../../core/language-tags.js";

/**
 * What every engine family's descriptor (its `descriptor.ts`: the schema of its entries in the
 * engines file and the factory that builds it) is made of. The table of them is
 * src/engines/routing/descriptors.ts.
 */

export type EngineKind = "asr" | "mt" | "tts";

/** The engine of each kind. */
export interface EngineOfKind {
  asr: AsrEngine;
  mt: MtEngine;
  tts: TtsEngine;
}

/** The service-wide settings an entry falls back on (part of `EngineSettings`, src/engines/routing/engine-config.ts). */
export interface EngineDefaults {
  /** Where `relay models pull` puts models and whisper.cpp finds them by catalogue name. */
  readonly modelsDir: string;
  /**
   * Where the library voices' measurements per TTS engine are kept (`VOICE_MEASUREMENTS_DIR`,
   * default `DATA_DIR/voice-measurements`); processes may share it.
   */
  readonly voiceMeasurementsDir: string;
  /** Each family's own settings, made from the variables its descriptor reads (`environment`), by family id. */
  readonly families: Readonly<Record<string, unknown>>;
}

/** What a family's settings may depend on besides its own variables. */
export interface ServiceFacts {
  readonly maxSessions: number;
  /** The project's folder (where `../shared` is found by default). */
  readonly projectRoot: string;
  /** Where pulled models are (`MODELS_DIR`). */
  readonly modelsDir: string;
}

/**
 * The environment variables a family reads (part of the service's validated environment,
 * src/config.ts) and the settings it makes of them, which its factories receive.
 */
export interface FamilyEnvironment<Shape extends z.ZodRawShape = z.ZodRawShape, Settings = unknown> {
  /** The family's id (its descriptor's). */
  readonly family: string;
  readonly variables: Shape;
  settings(values: z.output<z.ZodObject<Shape>>, service: ServiceFacts): Settings;
}

export function environment<Shape extends z.ZodRawShape, Settings>(
  family: string,
  variables: Shape,
  settings: (values: z.output<z.ZodObject<Shape>>, service: ServiceFacts) => Settings,
): FamilyEnvironment<Shape, Settings> {
  return { family, variables, settings };
}

/** A family's settings as the service made them from its `environment` (the one place they are typed back). */
export function familySettings<Settings>(
  defaults: EngineDefaults,
  { family }: FamilyEnvironment<z.ZodRawShape, Settings>,
): Settings {
  if (!(family in defaults.families))
    throw new Error(`engine family ${family}: no settings (its environment was not read)`);
  return defaults.families[family] as Settings;
}

export const languages = z.array(z.string().refine(isLanguageCode, "use ISO 639-1 codes such as en")).min(1);

/** Every entry: which engine, an optional id (default: the engine name) and languages it may serve. */
export const base = {
  id: z.string().min(1).optional(),
  /** Restricts the engine to these languages (remote engines must list what they serve). */
  languages: languages.optional(),
};

/**
 * An engine in a model host (src/engines/kit/model-host/host.ts): a request with no answer for
 * `timeoutMs` goes to the next engine, and a host that has said nothing since is replaced.
 */
export const hostLimits = {
  timeoutMs: z.number().int().min(100).max(600_000).optional(),
};

/** How every remote engine's calls are limited, retried and timed out (src/engines/kit/remote/guard.ts). */
export const resilience = {
  timeoutMs: z.number().int().min(100).default(30_000),
  maxRetries: z.number().int().min(0).max(10).default(2),
  concurrency: z.number().int().min(1).max(256).default(4),
  circuit: z
    .object({
      failureThreshold: z.number().int().min(1).default(5),
      resetAfterMs: z.number().int().min(100).default(30_000),
    })
    .optional(),
};

/** Settings of every OpenAI-compatible remote engine. */
export const remote = {
  baseUrl: z.url({ protocol: /^https?$/u, error: "must be an http(s) URL such as http://gpu:8000/v1" }),
  apiKey: z.string().optional(),
  model: z.string().min(1),
  ...resilience,
};

/** The schema of an entry: a strict object whose `engine` is the engine's name. */
export type EntrySchema = z.ZodObject<{ engine: z.ZodLiteral<string> }, z.core.$strict>;

/** One kind an engine serves: the schema of its entries and the factory that builds it. */
export interface EngineRole<S extends EntrySchema = EntrySchema, E = unknown> {
  readonly schema: S;
  create(spec: z.output<S>, defaults: EngineDefaults): Promise<E>;
}

export function role<S extends EntrySchema, E>(
  schema: S,
  create: (spec: z.output<S>, defaults: EngineDefaults) => Promise<E>,
): EngineRole<S, E> {
  return { schema, create };
}
