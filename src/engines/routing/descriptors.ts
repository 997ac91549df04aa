import { z } from "zod";
import type { AsrEngine, MtEngine, TtsEngine } from "../../core/contracts.js";
import { isLanguageCode } from "../../core/language-tags.js";

/**
 * Every engine the engines file (src/engines/routing/engine-config.ts) can name, in one table: for each kind it
 * serves, the schema of its entries and the factory that builds it. The zod unions of ENGINES_FILE,
 * the names ASR_ENGINES / MT_ENGINES / TTS_ENGINES accept without a file entry, and the registry's
 * construction (src/engines/routing/registry.ts) are all derived from this table; adding an engine means
 * adding one entry here (see docs/engines.md).
 *
 * Engine modules are imported only when an engine is configured, so reading the configuration loads
 * no engine (several have native or heavy dependencies).
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
  readonly pocketsphinxModelDir: string;
  readonly pocketsphinxMaxDecoders: number;
  readonly pocketsphinxSettings: Readonly<Record<string, string>>;
  readonly apertiumModesDir: string;
  readonly espeakBinary: string;
  readonly svoxPicoDir: string | undefined;
  /**
   * Where the library voices' measurements per TTS engine are kept (`VOICE_MEASUREMENTS_DIR`,
   * default `DATA_DIR/voice-measurements`); processes may share it.
   */
  readonly voiceMeasurementsDir: string;
}

const languages = z.array(z.string().refine(isLanguageCode, "use ISO 639-1 codes such as en")).min(1);

/** Every entry: which engine, an optional id (default: the engine name) and languages it may serve. */
const base = {
  id: z.string().min(1).optional(),
  /** Restricts the engine to these languages (remote engines must list what they serve). */
  languages: languages.optional(),
};

/**
 * An engine in a model host (src/engines/kit/model-host/host.ts): a request with no answer for
 * `timeoutMs` goes to the next engine, and a host that has said nothing since is replaced.
 */
const hostLimits = {
  timeoutMs: z.number().int().min(100).max(600_000).optional(),
};

/** How every remote engine's calls are limited, retried and timed out (src/engines/kit/remote/guard.ts). */
const resilience = {
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
const remote = {
  baseUrl: z.url({ protocol: /^https?$/u, error: "must be an http(s) URL such as http://gpu:8000/v1" }),
  apiKey: z.string().optional(),
  model: z.string().min(1),
  ...resilience,
};

/** The schema of an entry: a strict object whose `engine` is the engine's name. */
type EntrySchema = z.ZodObject<{ engine: z.ZodLiteral<string> }, z.core.$strict>;

/** One kind an engine serves: the schema of its entries and the factory that builds it. */
export interface EngineRole<S extends EntrySchema = EntrySchema, E = unknown> {
  readonly schema: S;
  create(spec: z.output<S>, defaults: EngineDefaults): Promise<E>;
}

function role<S extends EntrySchema, E>(
  schema: S,
  create: (spec: z.output<S>, defaults: EngineDefaults) => Promise<E>,
): EngineRole<S, E> {
  return { schema, create };
}

/** The table: one entry per engine, in the order the unions and the name lookup list them. */
export const ENGINE_DESCRIPTORS = [
  {
    id: "pocketsphinx",
    asr: role(
      z.strictObject({
        engine: z.literal("pocketsphinx"),
        ...base,
        modelDir: z.string().optional(),
        maxDecoders: z.number().int().min(1).optional(),
      }),
      async (spec, c): Promise<AsrEngine> => {
        const { createPocketSphinxEngine } = await import("../pocketsphinx/index.js");
        return createPocketSphinxEngine({
          modelDir: spec.modelDir ?? c.pocketsphinxModelDir,
          maxDecoders: spec.maxDecoders ?? c.pocketsphinxMaxDecoders,
          decoderSettings: c.pocketsphinxSettings,
        });
      },
    ),
  },
  {
    id: "whisper-cpp",
    asr: role(
      z.strictObject({
        engine: z.literal("whisper-cpp"),
        ...base,
        /** A catalogue name (`relay models list`) or a path to a ggml model file. */
        model: z.string().min(1),
        threads: z.number().int().min(1).max(64).optional(),
        maxConcurrent: z.number().int().min(1).max(16).optional(),
        partialIntervalMs: z.number().int().min(200).optional(),
        decodeTimeoutMs: z.number().int().min(1000).optional(),
        binding: z.enum(["auto", "native", "prebuilt"]).optional(),
        fitEncoderWindow: z.boolean().optional(),
      }),
      async (spec, c): Promise<AsrEngine> => {
        const [{ createWhisperCppEngine }, { resolveModel }] = await Promise.all([
          import("../whisper-cpp/index.js"),
          import("../whisper-cpp/models.js"),
        ]);
        return createWhisperCppEngine({
          modelPath: resolveModel(spec.model, c.modelsDir),
          threads: spec.threads,
          maxConcurrent: spec.maxConcurrent,
          partialIntervalMs: spec.partialIntervalMs,
          decodeTimeoutMs: spec.decodeTimeoutMs,
          languages: spec.languages,
          binding: spec.binding,
          fitEncoderWindow: spec.fitEncoderWindow,
        });
      },
    ),
  },
  {
    id: "apertium",
    mt: role(
      z.strictObject({ engine: z.literal("apertium"), ...base, modesDir: z.string().optional() }),
      async (spec, c): Promise<MtEngine> => {
        const { createApertiumEngine } = await import("../apertium/index.js");
        return createApertiumEngine({ modesDir: spec.modesDir ?? c.apertiumModesDir });
      },
    ),
  },
  {
    id: "transformers-js",
    mt: role(
      z.strictObject({
        engine: z.literal("transformers-js"),
        ...base,
        /** Catalogue names of pulled translation models, in order of preference (default: every pulled one). */
        models: z.array(z.string().min(1)).min(1).optional(),
        threads: z.number().int().min(1).max(16).optional(),
        maxBatch: z.number().int().min(1).max(64).optional(),
        maxQueued: z.number().int().min(1).max(4096).optional(),
        maxLoaded: z.number().int().min(1).max(64).optional(),
        maxHostMiB: z.number().int().min(256).optional(),
        ...hostLimits,
      }),
      async (spec, c): Promise<MtEngine> => {
        const [{ createTransformersEngine }, { translationModels }] = await Promise.all([
          import("../transformers-js/index.js"),
          import("../transformers-js/models.js"),
        ]);
        return createTransformersEngine({
          models: translationModels(spec.models, c.modelsDir),
          threads: spec.threads,
          maxBatch: spec.maxBatch,
          maxQueued: spec.maxQueued,
          maxLoaded: spec.maxLoaded,
          maxHostMiB: spec.maxHostMiB,
          timeoutMs: spec.timeoutMs,
        });
      },
    ),
  },
  {
    id: "espeak-ng",
    tts: role(
      z.strictObject({ engine: z.literal("espeak-ng"), ...base, binary: z.string().optional() }),
      async (spec, c): Promise<TtsEngine> => {
        const { createEspeakEngine } = await import("../espeak-ng/index.js");
        return createEspeakEngine({ binary: spec.binary ?? c.espeakBinary });
      },
    ),
  },
  {
    id: "svox-pico",
    tts: role(
      z.strictObject({ engine: z.literal("svox-pico"), ...base, dir: z.string().optional() }),
      async (spec, c): Promise<TtsEngine> => {
        const dir = spec.dir ?? c.svoxPicoDir;
        if (!dir) throw new Error("SVOX_PICO_DIR does not exist");
        const { createSvoxPicoEngine } = await import("../svox-pico/index.js");
        return createSvoxPicoEngine({ lingwareDir: dir });
      },
    ),
  },
  {
    id: "sherpa-onnx",
    asr: role(
      z.strictObject({
        engine: z.literal("sherpa-onnx"),
        ...base,
        /** A pulled streaming recognition model (default: the pulled one). */
        model: z.string().min(1).optional(),
        /** A pulled punctuation model for finals, or false for none (default: the pulled one, if any). */
        punctuation: z.union([z.string().min(1), z.literal(false)]).optional(),
        threads: z.number().int().min(1).max(16).optional(),
        maxStreams: z.number().int().min(1).max(1024).optional(),
        maxHostMiB: z.number().int().min(256).optional(),
        ...hostLimits,
      }),
      async (spec, c): Promise<AsrEngine> => {
        const [{ createSherpaRecognizer }, { recognizerFiles }] = await Promise.all([
          import("../sherpa-onnx/recognizer.js"),
          import("../sherpa-onnx/models.js"),
        ]);
        return createSherpaRecognizer({
          ...recognizerFiles(spec.model, spec.punctuation, c.modelsDir),
          threads: spec.threads,
          maxStreams: spec.maxStreams,
          maxHostMiB: spec.maxHostMiB,
          timeoutMs: spec.timeoutMs,
        });
      },
    ),
    tts: role(
      z.strictObject({
        engine: z.literal("sherpa-onnx"),
        ...base,
        /** Catalogue names of pulled voice models, in order of preference (default: every pulled one). */
        voices: z.array(z.string().min(1)).min(1).optional(),
        threads: z.number().int().min(1).max(16).optional(),
        maxConcurrent: z.number().int().min(1).max(16).optional(),
        maxQueued: z.number().int().min(0).max(1024).optional(),
        maxQueuedPerAccount: z.number().int().min(1).max(1024).optional(),
        maxHostMiB: z.number().int().min(256).optional(),
        ...hostLimits,
      }),
      async (spec, c): Promise<TtsEngine> => {
        const [{ createSherpaTtsEngine }, { neuralVoiceModels }, { voiceMeasurementStore }] =
          await Promise.all([
            import("../sherpa-onnx/tts.js"),
            import("../sherpa-onnx/models.js"),
            import("../../voices/measurement-store.js"),
          ]);
        return createSherpaTtsEngine({
          models: neuralVoiceModels(spec.voices, c.modelsDir),
          threads: spec.threads,
          maxConcurrent: spec.maxConcurrent,
          maxQueued: spec.maxQueued,
          maxQueuedPerAccount: spec.maxQueuedPerAccount,
          maxHostMiB: spec.maxHostMiB,
          timeoutMs: spec.timeoutMs,
          measurements: voiceMeasurementStore(c.voiceMeasurementsDir),
        });
      },
    ),
  },
  {
    id: "openai",
    asr: role(
      z.strictObject({
        engine: z.literal("openai"),
        ...base,
        ...remote,
        languages,
        partialIntervalMs: z.number().int().min(200).optional(),
      }),
      async (spec): Promise<AsrEngine> => {
        const { createOpenAiAsrEngine } = await import("../openai/index.js");
        return createOpenAiAsrEngine(spec);
      },
    ),
    mt: role(
      z.strictObject({ engine: z.literal("openai"), ...base, ...remote, languages }),
      async (spec): Promise<MtEngine> => {
        const { createOpenAiMtEngine } = await import("../openai/index.js");
        return createOpenAiMtEngine(spec);
      },
    ),
    tts: role(
      z.strictObject({
        engine: z.literal("openai"),
        ...base,
        ...remote,
        languages,
        /** Server voices for the library's female and male voices (assigned round-robin). */
        voices: z.strictObject({ female: z.array(z.string()).min(1), male: z.array(z.string()).min(1) }),
        responseFormat: z.enum(["pcm", "wav"]).default("pcm"),
      }),
      async (spec): Promise<TtsEngine> => {
        const { createOpenAiTtsEngine } = await import("../openai/index.js");
        return createOpenAiTtsEngine(spec);
      },
    ),
  },
  {
    id: "libretranslate",
    mt: role(
      z.strictObject({
        engine: z.literal("libretranslate"),
        ...base,
        url: z.url({ protocol: /^https?$/u, error: "must be an http(s) URL such as http://localhost:5000" }),
        /** Sent as `api_key` (servers started with `--api-keys`). */
        apiKey: z.string().optional(),
        ...resilience,
      }),
      async (spec): Promise<MtEngine> => {
        const { createLibreTranslateEngine } = await import("../libretranslate/index.js");
        return createLibreTranslateEngine(spec);
      },
    ),
  },
] as const;

type Descriptor = (typeof ENGINE_DESCRIPTORS)[number];

/** The roles of one kind, over every engine that serves it. */
type RoleOf<K extends EngineKind> = Descriptor extends infer D
  ? D extends { [P in K]: infer R }
    ? R
    : never
  : never;

/** The schemas of the entries of one kind (the members of its union in the engines file). */
export type SchemaOf<K extends EngineKind> = RoleOf<K> extends EngineRole<infer S, unknown> ? S : never;

/** One entry of the engines file of kind K, as validated. */
export type SpecOf<K extends EngineKind> = z.output<SchemaOf<K>>;

/** The roles of one kind with their engine's name, in table order. */
function rolesOf(kind: EngineKind): { id: string; role: EngineRole }[] {
  return ENGINE_DESCRIPTORS.flatMap((descriptor) => {
    const role = (descriptor as Partial<Record<EngineKind, EngineRole>>)[kind];
    return role ? [{ id: descriptor.id, role }] : [];
  });
}

// An entry's `engine` must be its engine's name (the schemas' literals are what the file names).
for (const kind of ["asr", "mt", "tts"] as const) {
  for (const { id, role } of rolesOf(kind)) {
    if (role.schema.shape.engine.value !== id)
      throw new Error(`engine descriptor ${id}: ${kind} schema names another engine`);
  }
}

/** The schemas of one kind, for its `z.discriminatedUnion("engine", …)` (every kind has engines). */
export function schemasOf<K extends EngineKind>(kind: K): [SchemaOf<K>, ...SchemaOf<K>[]] {
  return rolesOf(kind).map(({ role }) => role.schema) as unknown as [SchemaOf<K>, ...SchemaOf<K>[]];
}

/**
 * Engines of one kind that need nothing but their name (an env list may name them without a file
 * entry): those whose schema accepts `{ engine: name }` alone.
 */
export function namedOnly<K extends EngineKind>(kind: K): Record<string, SpecOf<K>> {
  const found: Record<string, SpecOf<K>> = {};
  for (const { id, role } of rolesOf(kind)) {
    if (role.schema.safeParse({ engine: id }).success) found[id] = { engine: id } as SpecOf<K>;
  }
  return found;
}

/** Builds the engine an entry of kind `kind` describes. */
export function createEngine<K extends EngineKind>(
  kind: K,
  spec: SpecOf<K>,
  defaults: EngineDefaults,
): Promise<EngineOfKind[K]> {
  const found = rolesOf(kind).find(({ id }) => id === spec.engine);
  if (!found) return Promise.reject(new Error(`no ${kind} engine "${spec.engine}"`));
  return found.role.create(spec, defaults) as Promise<EngineOfKind[K]>;
}
