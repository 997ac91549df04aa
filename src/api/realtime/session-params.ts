import type { EngineRegistry } from "../../engines/registry.js";
import type { LanguageCode, Voice } from "../../engines/types.js";
import type { FinalizeMode } from "../../pipeline/stabilizer.js";
import { parseLanguageTag, unservable, type Requirement } from "../../languages.js";
import { DEFAULT_VOICE_TYPES, voiceOf } from "../../speech-plan.js";
import { findVoice } from "../../voices/library.js";

/**
 * Session metadata (every query parameter of `GET /v1/session`) → a validated session plan.
 * Invalid combinations are reported at session start, as the spec requires, with a message that
 * names the problem and what would work.
 */

export const MODEL_NAMES = ["relay-1", "relay-2"] as const;
export type ModelName = (typeof MODEL_NAMES)[number];
export const MAX_CONTEXT_LENGTH = 2000;
const MAX_LABEL_LENGTH = 200;
/**
 * Longest query value kept for a session waiting to be claimed. Twice the longest valid value, so
 * an over-long `context` still gets its precise session-start error; anything longer is refused at
 * `GET /v1/session`.
 */
export const MAX_PARAMETER_CHARS = 2 * MAX_CONTEXT_LENGTH;

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
] as const;

/** The model a session would run: `modelName` when it names one, else the default. */
export function modelNameOrDefault(value: string | undefined): ModelName {
  return (MODEL_NAMES as readonly (string | undefined)[]).includes(value) ? (value as ModelName) : "relay-1";
}

export interface SessionPlan {
  readonly mode: "s2tt" | "tts";
  readonly modelName: ModelName;
  /** "auto": each utterance's language is identified by the recogniser. */
  readonly sourceLanguage: LanguageCode | "auto";
  readonly targetLanguage: LanguageCode;
  readonly audioOutputEnabled: boolean;
  readonly voice: Voice;
  readonly finalizeMode: FinalizeMode;
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
  const normalised = value.toLowerCase();
  if (normalised === "true" || normalised === "1") return true;
  if (normalised === "false" || normalised === "0") return false;
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
  if (value.length > MAX_CONTEXT_LENGTH) {
    reject(`context is ${value.length} characters long; the limit is ${MAX_CONTEXT_LENGTH}`);
  }
  return value;
}

export function resolveVoice(value: string | number): Voice {
  const id = typeof value === "number" ? value : /^\d+$/u.test(value) ? Number(value) : Number.NaN;
  const voice = Number.isSafeInteger(id) ? findVoice(id) : undefined;
  if (!voice) return reject(`voiceId "${value}" does not exist; GET /v1/voices lists the valid ids`);
  return voice;
}

export function checkVoiceOutput(registry: EngineRegistry, key: string, language: LanguageCode): void {
  rejectUnservable(registry, key, [{ kind: "voice", language }]);
}

/** The session-start error frame text for what the configured engines cannot do. */
function rejectUnservable(registry: EngineRegistry, key: string, requirements: readonly Requirement[]): void {
  const problem = unservable(registry, requirements);
  if (!problem) return;
  if (problem.kind === "voice") {
    reject(
      `${key}="${problem.language}" has no voice output with the configured engines; voice output is available for: ` +
        `${problem.available.join(", ")}`,
    );
  }
  if (problem.kind === "recognition") {
    if (problem.language === "auto") {
      reject(
        "sourceLanguage=auto needs a recogniser that identifies languages (whisper-cpp or a remote " +
          "Whisper server in ENGINES_FILE); the configured engines cannot, so name the spoken language",
      );
    }
    reject(
      `sourceLanguage="${problem.language}" cannot be recognised by the configured engines; ` +
        `recognition is available for: ${problem.available.join(", ")}`,
    );
  }
  reject(
    `no translation from "${problem.from}" to "${problem.language}" with the configured engines; ` +
      `from "${problem.from}" the targets are: ${problem.available.join(", ")}`,
  );
}

function label(key: string, value: string | undefined): string | undefined {
  if (value !== undefined && value.length > MAX_LABEL_LENGTH) {
    reject(`${key} is ${value.length} characters long; the limit is ${MAX_LABEL_LENGTH}`);
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
  const voiceType = oneOf("voiceType", m.voiceType, ["male", "female"], DEFAULT_VOICE_TYPES.realtime);
  const context = checkContext(m.context ?? "");
  const sourceIsAuto = m.sourceLanguage === "auto";

  if (mode === "tts" && !audioOutputEnabled)
    reject("mode=tts needs audioOutputEnabled=true: it produces only audio");
  if (m.voiceId === "auto" && modelName === "relay-1") reject("voiceId=auto needs modelName=relay-2");
  if (sourceIsAuto && modelName === "relay-1") reject("sourceLanguage=auto needs modelName=relay-2");
  if (sourceIsAuto && twoWay)
    reject("sourceLanguage=auto cannot be combined with twoWay=true; name both languages");
  // relay-2 features scheduled for a later release are refused clearly rather than silently ignored.
  if (m.voiceId === "auto")
    reject("voiceId=auto is not available yet on this server; pass a numeric voiceId");
  if (twoWay) reject("twoWay=true is not available yet on this server");

  const sourceLanguage = sourceIsAuto ? "auto" : primaryLanguage("sourceLanguage", m.sourceLanguage ?? "en");
  if (m.languageHints !== undefined) {
    for (const hint of m.languageHints.split(",")) primaryLanguage("languageHints", hint.trim());
  }
  const targetLanguage = primaryLanguage("targetLanguage", m.targetLanguage ?? "es");
  const voice = m.voiceId !== undefined ? resolveVoice(m.voiceId) : voiceOf(voiceType);

  // Checked in this order: the error frame names the first problem.
  const speech = mode === "s2tt";
  rejectUnservable(registry, "targetLanguage", [
    ...(speech ? [{ kind: "recognition", language: sourceLanguage } as const] : []),
    ...(audioOutputEnabled ? [{ kind: "voice", language: targetLanguage } as const] : []),
    ...(speech && sourceLanguage !== "auto"
      ? [{ kind: "translation", from: sourceLanguage, to: targetLanguage } as const]
      : []),
  ]);

  return {
    mode,
    modelName,
    sourceLanguage,
    targetLanguage,
    audioOutputEnabled,
    voice,
    finalizeMode,
    context,
    sourceLanguageLabel: label("sourceLanguageLabel", m.sourceLanguageLabel),
    targetLanguageLabel: label("targetLanguageLabel", m.targetLanguageLabel),
  };
}
