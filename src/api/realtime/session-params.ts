import type { EngineRegistry } from "../../engines/routing/registry.js";
import { MAX_CONTEXT_LENGTH } from "../../core/glossary.js";
import type { LanguageCode, Voice } from "../../core/contracts.js";
import type { FinalizeMode } from "../../pipeline/stabilizer.js";
import { parseLanguageTag } from "../../core/language-tags.js";
import {
  recognitionAdvice,
  recognitionTier,
  unservable,
  type Requirement,
  type Unservable,
} from "../../engines/routing/languages.js";
import { DEFAULT_VOICE_TYPES, voiceOf } from "../../voices/voice-defaults.js";
import { languagePlan, requirementsOf } from "../../pipeline/language-plan.js";
import { voiceById } from "../../voices/library.js";
import {
  DEFAULT_MAX_SPEEDUP,
  MAX_SPEEDUP_RANGE,
  PACE_MODES,
  paceOf,
  type PaceOptions,
} from "../../pipeline/pacing.js";

/**
 * Session metadata (every query parameter of `GET /v1/session`) → a validated session plan.
 * Invalid combinations are reported at session start, as the spec requires, with a message that
 * names the problem and what would work.
 */

export const MODEL_NAMES = ["relay-1", "relay-2"] as const;
export type ModelName = (typeof MODEL_NAMES)[number];
export { MAX_CONTEXT_LENGTH };
const MAX_LABEL_LENGTH = 200;
/**
 * Longest query value kept for a session waiting to be claimed. Twice the longest valid value, so
 * an over-long `context` still gets its precise session-start error; anything longer is refused at
 * `GET /v1/session`.
 */
export const MAX_PARAMETER_CHARS = 2 * MAX_CONTEXT_LENGTH;

/**
 * The length of a text as every limit here counts it: in characters, that is Unicode code points,
 * so an emoji or a CJK Extension B ideograph is one character like any other (JavaScript's
 * `length` counts it as two UTF-16 units).
 */
export function characterCount(value: string): number {
  return [...value].length;
}

/** The query parameters a session reads (the spec's list); others are not kept. */
export const SESSION_PARAMETERS = [
  "sourceLanguage",
  "languageHints",
  "targetLanguage",
  "audioOutputEnabled",
  "voiceId",
  "voiceType",
  "modelName",
  "finalizeMode",
  "twoWay",
  "context",
  "sourceLanguageLabel",
  "targetLanguageLabel",
  "mode",
  // Beyond the spec (docs/realtime-api.md, "Pace").
  "pace",
  "maxSpeedup",
] as const;

/** The model a session would run: `modelName` when it names one, else the default. */
export function modelNameOrDefault(value: string | undefined): ModelName {
  return (MODEL_NAMES as readonly (string | undefined)[]).includes(value) ? (value as ModelName) : "relay-1";
}

export interface SessionPlan {
  readonly mode: "s2tt" | "tts";
  readonly modelName: ModelName;
  /** "auto": each utterance's language is identified by the recognizer. */
  readonly sourceLanguage: LanguageCode | "auto";
  readonly targetLanguage: LanguageCode;
  /** With "auto": the languages identification chooses among (`languageHints`). */
  readonly languageHints?: readonly LanguageCode[];
  /** `sourceLanguage` and `targetLanguage` are a pair: each utterance goes into the other one. */
  readonly twoWay: boolean;
  readonly audioOutputEnabled: boolean;
  /** The named voice, or with `voiceId=auto` the `voiceType` default that speakers start with. */
  readonly voice: Voice;
  /** `voiceId=auto`: each speaker's voice is matched to theirs (src/speakers/voice-choice.ts). */
  readonly matchVoices: boolean;
  /**
   * `voiceType=clone` (beyond the spec, as rooms' `voice_type`): each speaker in their own voice where
   * a tone colour converter is loaded, else in the nearest library voice (src/speakers/tone-colors.ts).
   */
  readonly cloneVoices: boolean;
  readonly finalizeMode: FinalizeMode;
  /** Beyond the spec: how translated speech keeps pace with the speaker; undefined: natural speed. */
  readonly pace: PaceOptions | undefined;
  readonly context: string;
  readonly sourceLanguageLabel?: string;
  readonly targetLanguageLabel?: string;
}

export type PlanResult = { ok: true; plan: SessionPlan } | { ok: false; message: string };

class Rejection extends Error {}

function reject(message: string): never {
  throw new Rejection(message);
}

function oneOf<T extends string>(
  key: string,
  value: string | undefined,
  allowed: readonly T[],
  fallback: T,
): T {
  if (value === undefined) return fallback;
  if ((allowed as readonly string[]).includes(value)) return value as T;
  return reject(`${key}="${value}" is not valid; use one of: ${allowed.join(", ")}`);
}

function bool(key: string, value: string | undefined, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  const normalized = value.toLowerCase();
  if (normalized === "true" || normalized === "1") return true;
  if (normalized === "false" || normalized === "0") return false;
  return reject(`${key}="${value}" is not a boolean; use true or false`);
}

/** ISO 639-1 code with optional region ("en-US"); only the primary subtag is kept. */
export function primaryLanguage(key: string, value: string): LanguageCode {
  const parsed = parseLanguageTag(value);
  if (!parsed.ok) {
    return reject(`${key}="${value}" is not a language code; use an ISO 639-1 code such as "en" or "es-MX"`);
  }
  return parsed.language;
}

export function checkContext(value: string): string {
  const length = characterCount(value);
  if (length > MAX_CONTEXT_LENGTH) {
    reject(`context is ${length} characters long; the limit is ${MAX_CONTEXT_LENGTH}`);
  }
  return value;
}

export function resolveVoice(value: string | number): Voice {
  const voice = voiceById(value);
  if (!voice) return reject(`voiceId "${value}" does not exist; GET /v1/voices lists the valid ids`);
  return voice;
}

export function checkVoiceOutput(registry: EngineRegistry, key: string, language: LanguageCode): void {
  rejectUnservable(registry, [{ kind: "voice", language }], { keyOf: () => key, needsIdentifier: "" });
}

/** How a session names what it asked the engines for, in its error messages. */
interface Roles {
  /** The parameter that asked for `language` in a requirement of this kind. */
  keyOf(kind: Unservable["kind"], language: LanguageCode): string;
  /** What needs a recognizer that identifies languages (the subject of the error when none is configured). */
  readonly needsIdentifier: string;
}

/** The session-start error frame text for the first requirement the configured engines cannot meet. */
function rejectUnservable(
  registry: EngineRegistry,
  requirements: readonly Requirement[],
  roles: Roles,
): void {
  const problem = unservable(registry, requirements);
  if (!problem) return;
  const { kind, language, available } = problem;
  const key = (code: LanguageCode) => `${roles.keyOf(kind, code)}="${code}"`;
  if (kind === "voice") {
    const offered = problem.throughTranslation
      ? "translation with voice output is available for"
      : "voice output is available for";
    reject(
      `${key(language)} has no voice output with the configured engines; ${offered}: ${available.join(", ") || "none"}`,
    );
  }
  if (kind === "recognition" && language === "auto") {
    reject(
      `${roles.needsIdentifier} needs a recognizer that identifies languages (whisper-cpp or a remote ` +
        `Whisper server in ENGINES_FILE), and the configured engines have none${recognitionAdvice(recognitionTier(registry))}`,
    );
  }
  if (kind === "recognition") {
    reject(
      `${key(language)} cannot be recognized by the configured engines; recognition is available for: ` +
        `${available.join(", ")}${recognitionAdvice(recognitionTier(registry))}`,
    );
  }
  if (kind === "identification") {
    reject(
      `${key(language)} cannot be identified by the configured recognizer that identifies languages; it knows: ${available.join(", ")}`,
    );
  }
  const { from } = problem;
  // The plain source needs no naming; a language hint or the other side of a pair does.
  const subject = from === "auto" || roles.keyOf(kind, from) === "sourceLanguage" ? "" : `${key(from)}: `;
  reject(
    `${subject}no translation from "${from}" to "${language}" with the configured engines; ` +
      `from "${from}" the targets are: ${available.join(", ")}`,
  );
}

function speedup(key: string, value: string | undefined): number {
  if (value === undefined) return DEFAULT_MAX_SPEEDUP;
  const { min, max } = MAX_SPEEDUP_RANGE;
  const number = Number(value);
  if (value.trim() === "" || !(number >= min && number <= max))
    reject(`${key}="${value}" is not valid; use a number from ${min} to ${max}`);
  return number;
}

function label(key: string, value: string | undefined): string | undefined {
  if (value !== undefined && characterCount(value) > MAX_LABEL_LENGTH) {
    reject(`${key} is ${characterCount(value)} characters long; the limit is ${MAX_LABEL_LENGTH}`);
  }
  return value;
}

export function planSession(
  metadata: Readonly<Record<string, string>>,
  registry: EngineRegistry,
): PlanResult {
  try {
    return { ok: true, plan: buildPlan(metadata, registry) };
  } catch (error) {
    if (error instanceof Rejection) return { ok: false, message: error.message };
    throw error;
  }
}

/** Runs a validation helper and returns its rejection message instead of throwing. */
export function validationMessage(check: () => void): string | undefined {
  try {
    check();
    return undefined;
  } catch (error) {
    if (error instanceof Rejection) return error.message;
    throw error;
  }
}

function buildPlan(m: Readonly<Record<string, string>>, registry: EngineRegistry): SessionPlan {
  const modelName = oneOf("modelName", m.modelName, MODEL_NAMES, "relay-1");
  const mode = oneOf("mode", m.mode, ["s2tt", "tts"], "s2tt");
  const audioOutputEnabled = bool("audioOutputEnabled", m.audioOutputEnabled, true);
  const twoWay = bool("twoWay", m.twoWay, false);
  const finalizeMode = oneOf("finalizeMode", m.finalizeMode, ["stable", "sentence"], "stable");
  const voiceType = oneOf(
    "voiceType",
    m.voiceType,
    ["male", "female", "clone"],
    DEFAULT_VOICE_TYPES.realtime,
  );
  const context = checkContext(m.context ?? "");
  const pace = paceOf(oneOf("pace", m.pace, PACE_MODES, "catch-up"), speedup("maxSpeedup", m.maxSpeedup));
  const sourceIsAuto = m.sourceLanguage === "auto";

  if (mode === "tts" && !audioOutputEnabled)
    reject("mode=tts needs audioOutputEnabled=true: it produces only audio");
  if (m.voiceId === "auto" && mode === "tts")
    reject("voiceId=auto matches voices to speakers, and mode=tts has none; pass a numeric voiceId");
  if (m.voiceId === "auto" && modelName === "relay-1") reject("voiceId=auto needs modelName=relay-2");
  if (voiceType === "clone" && mode === "tts")
    reject("voiceType=clone speaks in each speaker's own voice, and mode=tts has none; pass male or female");
  if (sourceIsAuto && modelName === "relay-1") reject("sourceLanguage=auto needs modelName=relay-2");
  if (sourceIsAuto && twoWay)
    reject("sourceLanguage=auto cannot be combined with twoWay=true; name both languages");

  // The spec's defaults (en, es) apply in two-way sessions too: the pair is then English–Spanish.
  const sourceLanguage = sourceIsAuto ? "auto" : primaryLanguage("sourceLanguage", m.sourceLanguage ?? "en");
  // Hints are read only with "auto" (the spec), as primary subtags without repeats.
  const languageHints =
    sourceIsAuto && m.languageHints !== undefined
      ? [...new Set(m.languageHints.split(",").map((hint) => primaryLanguage("languageHints", hint.trim())))]
      : undefined;
  const targetLanguage = primaryLanguage("targetLanguage", m.targetLanguage ?? "es");
  if (twoWay && sourceLanguage === targetLanguage)
    reject(
      `twoWay=true needs two different languages; sourceLanguage and targetLanguage are both "${targetLanguage}"`,
    );
  const matchVoices = m.voiceId === "auto";
  // A named voice wins over voiceType, and voiceId=auto keeps the spec's library matching.
  const cloneVoices = voiceType === "clone" && m.voiceId === undefined;
  const voice =
    m.voiceId !== undefined && !matchVoices
      ? resolveVoice(m.voiceId)
      : voiceOf(voiceType === "clone" ? DEFAULT_VOICE_TYPES.realtime : voiceType);

  // Checked in this order: the error frame names the first problem.
  const speech = mode === "s2tt";
  const plan = languagePlan({
    sourceLanguage,
    targetLanguage,
    twoWay,
    ...(languageHints ? { languageHints } : {}),
  });
  const sideOf = (language: LanguageCode) =>
    language === targetLanguage ? "targetLanguage" : "sourceLanguage";
  rejectUnservable(
    registry,
    speech ? requirementsOf(plan, audioOutputEnabled) : [{ kind: "voice", language: targetLanguage }],
    {
      // A language hint is named as one when it is listened for; as the target it is spoken.
      keyOf: (kind, language) => (sourceIsAuto && kind !== "voice" ? "languageHints" : sideOf(language)),
      needsIdentifier: twoWay ? "twoWay=true (telling the two languages apart)" : "sourceLanguage=auto",
    },
  );

  return {
    mode,
    modelName,
    sourceLanguage,
    targetLanguage,
    ...(languageHints ? { languageHints } : {}),
    twoWay,
    audioOutputEnabled,
    voice,
    matchVoices,
    cloneVoices,
    // Two-way sessions always finalise per sentence (the spec).
    finalizeMode: twoWay ? "sentence" : finalizeMode,
    pace,
    context,
    sourceLanguageLabel: label("sourceLanguageLabel", m.sourceLanguageLabel),
    targetLanguageLabel: label("targetLanguageLabel", m.targetLanguageLabel),
  };
}
