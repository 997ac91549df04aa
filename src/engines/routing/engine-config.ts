import { readFileSync } from "node:fs";
import { z } from "zod";
import { namedOnly, schemasOf, type EngineDefaults } from "./descriptors.js";
import { isLanguageCode } from "../../core/language-tags.js";

/**
 * Which engines serve recognition, translation and speech, in order of preference: one validated
 * JSON file (`ENGINES_FILE`) plus environment overrides. Part of the configuration (src/config.ts
 * reads it); the registry (src/engines/routing/registry.ts) builds the engines from it.
 *
 *   { "asr": [ {"engine": "whisper-cpp", "model": "base-q5_1"}, {"engine": "pocketsphinx"} ],
 *     "mt":  [ {"engine": "apertium"}, {"engine": "openai", "baseUrl": "http://gpu:8000/v1", … } ],
 *     "tts": [ {"engine": "espeak-ng"} ] }
 *
 * String values may name environment variables as `${NAME}` (for API keys kept out of the file).
 * The entries each engine accepts are declared with the engine in src/engines/routing/descriptors.ts.
 */

const asrSpec = z.discriminatedUnion("engine", schemasOf("asr"));
const mtSpec = z.discriminatedUnion("engine", schemasOf("mt"));
const ttsSpec = z.discriminatedUnion("engine", schemasOf("tts"));

const enginesFile = z.strictObject({
  asr: z.array(asrSpec).default([]),
  mt: z.array(mtSpec).default([]),
  tts: z.array(ttsSpec).default([]),
  /** One language, or several in order of preference ("en" or ["en", "es"]). */
  pivotLanguage: z.union([z.string(), z.array(z.string()).min(1)]).optional(),
});

export type AsrSpec = z.infer<typeof asrSpec>;
export type MtSpec = z.infer<typeof mtSpec>;
export type TtsSpec = z.infer<typeof ttsSpec>;
export type EnginesFile = z.infer<typeof enginesFile>;

export type EngineLists = { asr: AsrSpec[]; mt: MtSpec[]; tts: TtsSpec[] };

/** What the engines are built from (`Config["engines"]`, src/config.ts; the registry builds them). */
export interface EngineSettings extends EngineDefaults {
  /** In order of preference (ENGINES_FILE and/or ASR_ENGINES, MT_ENGINES, TTS_ENGINES). */
  readonly asr: readonly AsrSpec[];
  readonly mt: readonly MtSpec[];
  readonly tts: readonly TtsSpec[];
  /**
   * `asr` is the default list with the default whisper model pulled, which puts whisper.cpp first
   * only if its build for this CPU loads. Loading it is left to where the engines are built
   * (`recognizersToBuild`), so reading the configuration loads no native addon.
   */
  readonly asrFollowsWhisperBuild: boolean;
  readonly sileroModel: string | undefined;
  /**
   * The speaker-embedding model file the sherpa-onnx speaker engine loads (SPEAKER_ENGINE, resolved
   * in src/config.ts); undefined: the embedded MFCC engine tells speakers apart.
   */
  readonly speakerModel?: string | undefined;
  /** Overrides of the sherpa-onnx speaker engine's thresholds (SPEAKER_SAME_BELOW, SPEAKER_NEW_ABOVE). */
  readonly speakerThresholds?: { readonly sameSpeakerBelow?: number; readonly newSpeakerAbove?: number };
  /** Languages a pair without a direct engine is translated through, in order of preference. */
  readonly pivotLanguages: readonly string[];
}

/** The embedded engines, used when neither the file nor the environment names any. */
export const DEFAULT_ENGINES: EngineLists = {
  asr: [{ engine: "pocketsphinx" }],
  mt: [{ engine: "apertium" }],
  tts: [{ engine: "espeak-ng" }],
};

/** English first (neural models pivot through it), then Spanish (Apertium's pairs all include it). */
export const DEFAULT_PIVOT_LANGUAGES: readonly string[] = ["en", "es"];

/**
 * The pivot languages a setting names: "en", "en,es" or ["en", "es"]; the default when it names
 * none. Each must be a language code.
 */
export function pivotLanguagesOf(setting: string | readonly string[] | undefined): string[] {
  if (setting === undefined) return [...DEFAULT_PIVOT_LANGUAGES];
  const languages = (typeof setting === "string" ? setting.split(",") : [...setting]).map((l) => l.trim());
  const wrong = languages.filter((language) => !isLanguageCode(language));
  if (wrong.length > 0 || languages.length === 0)
    throw new EngineConfigError(
      `pivot language(s) ${JSON.stringify(setting)}: use ISO 639-1 codes such as "en" or "en,es"`,
    );
  return languages;
}

/** The multilingual model `npm run setup` pulls when the network allows (`relay models pull base`). */
export const DEFAULT_WHISPER_MODEL = "base";

/** What is on this machine that the defaults depend on. */
export interface InstalledModels {
  /** The default whisper model is pulled. */
  readonly modelPresent: boolean;
  /** whisper.cpp's build for this CPU loads. */
  readonly nativeBuild: boolean;
  /** At least one sherpa-onnx voice model is pulled (`relay models pull piper-…`). */
  readonly neuralVoices?: boolean;
  /** The streaming English recognizer is pulled (`relay models pull streaming-zipformer-en`). */
  readonly streamingEnglish?: boolean;
  /** At least one translation model is pulled (`relay models pull opus-mt-en-es`). */
  readonly neuralTranslation?: boolean;
}

/**
 * The defaults on this machine: with the default whisper model pulled, whisper.cpp recognizes every
 * language and identifies them, and PocketSphinx stays for English. whisper.cpp comes first when
 * setup built it for this CPU; the prebuilt fallback is too slow to hear English live, so there
 * PocketSphinx keeps English and whisper.cpp serves the other languages. The streaming English
 * recognizer, once pulled, hears English before both (whisper.cpp keeps `auto` and two-way
 * sessions: it identifies languages). Pulled neural voices speak their languages, and eSpeak NG
 * every other one. Pulled translation models translate before Apertium, which stays the fallback.
 */
export function defaultEngines(installed: InstalledModels): EngineLists {
  const tts: TtsSpec[] = installed.neuralVoices
    ? [{ engine: "sherpa-onnx" }, ...DEFAULT_ENGINES.tts]
    : DEFAULT_ENGINES.tts;
  const streaming: AsrSpec[] = installed.streamingEnglish ? [{ engine: "sherpa-onnx" }] : [];
  const mt: MtSpec[] = installed.neuralTranslation
    ? [{ engine: "transformers-js" }, ...DEFAULT_ENGINES.mt]
    : DEFAULT_ENGINES.mt;
  const pocketsphinx: AsrSpec = { engine: "pocketsphinx" };
  if (!installed.modelPresent) return { asr: [...streaming, pocketsphinx], mt, tts };
  const whisperCpp: AsrSpec = { engine: "whisper-cpp", model: DEFAULT_WHISPER_MODEL };
  return {
    asr: [...streaming, ...(installed.nativeBuild ? [whisperCpp, pocketsphinx] : [pocketsphinx, whisperCpp])],
    mt,
    tts,
  };
}

/**
 * The recognizers to build: `settings.asr`, except that with the default whisper model pulled and
 * no build of whisper.cpp for this CPU that loads, PocketSphinx keeps English (`defaultEngines`).
 * `nativeBuildLoads` is asked only then.
 */
export function recognizersToBuild(
  settings: Pick<EngineSettings, "asr" | "asrFollowsWhisperBuild">,
  nativeBuildLoads: () => boolean,
): readonly AsrSpec[] {
  if (!settings.asrFollowsWhisperBuild || nativeBuildLoads()) return settings.asr;
  const streamingEnglish = settings.asr.some((spec) => spec.engine === "sherpa-onnx");
  return defaultEngines({ modelPresent: true, nativeBuild: false, streamingEnglish }).asr;
}

/** Engines that need nothing but their name (an env list may name them without a file entry). */
const BY_NAME = { asr: namedOnly("asr"), mt: namedOnly("mt"), tts: namedOnly("tts") };

export class EngineConfigError extends Error {}

/** Reads and validates an engines file; every problem is reported with its place in the file. */
export function readEnginesFile(path: string, env: NodeJS.ProcessEnv): EnginesFile {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, "utf8"));
  } catch (error) {
    throw new EngineConfigError(`ENGINES_FILE ${path}: ${(error as Error).message}`);
  }
  const missing = new Set<string>();
  const substituted = substitute(raw, env, missing);
  if (missing.size > 0) {
    throw new EngineConfigError(
      `ENGINES_FILE ${path}: environment variable(s) not set: ${[...missing].join(", ")}`,
    );
  }
  const parsed = enginesFile.safeParse(substituted);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${formatPath(issue.path)}: ${issue.message}`);
    throw new EngineConfigError(`ENGINES_FILE ${path}:\n  ${problems.join("\n  ")}`);
  }
  for (const kind of ["asr", "mt", "tts"] as const) {
    const ids = parsed.data[kind].map(idOf);
    const duplicate = ids.find((id, i) => ids.indexOf(id) !== i);
    if (duplicate) {
      throw new EngineConfigError(
        `ENGINES_FILE ${path}: ${kind}: two entries have the id "${duplicate}"; give one an "id"`,
      );
    }
  }
  return parsed.data;
}

export function idOf(spec: { engine: string; id?: string }): string {
  return spec.id ?? spec.engine;
}

/**
 * The engines of one kind, in preference order: the env list (`ASR_ENGINES=…`) when set picks and
 * orders entries by id (file entries, or engines that need no settings); otherwise the file's list;
 * otherwise the embedded default.
 */
export function selectEngines<K extends "asr" | "mt" | "tts">(
  kind: K,
  file: EnginesFile | undefined,
  envList: readonly string[] | undefined,
  defaults: EngineLists = DEFAULT_ENGINES,
): EnginesFile[K] {
  const entries = (file?.[kind] ?? []) as EnginesFile[K];
  if (!envList) return (entries.length > 0 ? entries : defaults[kind]) as EnginesFile[K];
  const byName = BY_NAME[kind] as Record<string, EnginesFile[K][number]>;
  return envList.map((id) => {
    const found = entries.find((spec) => idOf(spec) === id) ?? byName[id];
    if (!found) {
      const known = [...new Set([...entries.map(idOf), ...Object.keys(byName)])];
      throw new EngineConfigError(
        `${kind.toUpperCase()}_ENGINES: unknown engine "${id}" (known: ${known.join(", ")}; ` +
          "engines that need settings are declared in ENGINES_FILE)",
      );
    }
    return found;
  }) as EnginesFile[K];
}

function substitute(value: unknown, env: NodeJS.ProcessEnv, missing: Set<string>): unknown {
  if (typeof value === "string") {
    return value.replace(/\$\{([A-Z0-9_]+)\}/gu, (_match, name: string) => {
      const found = env[name];
      if (found === undefined) missing.add(name);
      return found ?? "";
    });
  }
  if (Array.isArray(value)) return value.map((item) => substitute(item, env, missing));
  if (typeof value === "object" && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substitute(v, env, missing)]));
  }
  return value;
}

function formatPath(path: readonly PropertyKey[]): string {
  return path.reduce<string>(
    (out, key) => (typeof key === "number" ? `${out}[${key}]` : out ? `${out}.${String(key)}` : String(key)),
    "",
  );
}
