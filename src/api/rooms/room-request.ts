import { z } from "zod";
import type { LanguageCode, Voice } from "../../core/contracts.js";
import { parseLanguageTag } from "../../core/language-tags.js";
import { MAX_ROOM_LANGUAGES, roomLanguageOf } from "../../rooms/room-languages.js";
import type { RoomLanguages } from "../../rooms/types.js";
import { DEFAULT_VOICE_TYPES, voiceOf } from "../../voices/voice-defaults.js";
import { voiceById } from "../../voices/library.js";
import { DEFAULT_MAX_SPEEDUP, MAX_SPEEDUP_RANGE, PACE_MODES, paceOf } from "../../pipeline/pacing.js";
import { contextField } from "../context-field.js";
import type { ValidationErrorMapping } from "../errors.js";

/** The bodies of the rooms API: `POST /api/beta1/session` and a participant's access. */

/**
 * Every field of the room request is read in the spec's snake_case and in the camelCase that
 * Pinch's own clients (pinch-sdk, Pipecat's Pinch service) send. When a request carries both
 * spellings of a field, the spec's wins; each must be well-formed whichever is used.
 */
const CAMEL_CASE = {
  source_language: "sourceLanguage",
  target_language: "targetLanguage",
  voice_type: "voiceType",
  voice_id: "voiceId",
  enable_audio_output: "enableAudioOutput",
  two_way: "twoWay",
  max_speedup: "maxSpeedup",
} as const;
type Field = keyof typeof CAMEL_CASE;

const LANGUAGE_FIELDS: readonly string[] = [
  "source_language",
  "target_language",
  CAMEL_CASE.source_language,
  CAMEL_CASE.target_language,
  "languages",
  "language",
];

const languageTag = (name: string, example: string) =>
  z.string({ error: `${name} must be a string: a language code such as ${example}` }).optional();
const voiceType = (name: string) =>
  z
    .enum(["clone", "female", "male", "custom"], {
      error: `${name} must be "clone", "female", "male" or "custom"`,
    })
    .optional();
const voiceId = (name: string) =>
  z
    .union([z.string(), z.number().int()], {
      error: `${name} must be a library voice id such as "12" (GET /v1/voices lists them)`,
    })
    .optional();
const audioOutput = (name: string) => z.boolean({ error: `${name} must be true or false` }).optional();
const twoWay = (name: string) => z.boolean({ error: `${name} must be true or false` }).optional();
const maxSpeedup = (name: string) =>
  z
    .number({ error: `${name} must be a number from ${MAX_SPEEDUP_RANGE.min} to ${MAX_SPEEDUP_RANGE.max}` })
    .min(MAX_SPEEDUP_RANGE.min, { error: `${name} must be at least ${MAX_SPEEDUP_RANGE.min}` })
    .max(MAX_SPEEDUP_RANGE.max, { error: `${name} must be at most ${MAX_SPEEDUP_RANGE.max}` })
    .optional();
const roomLanguages = z
  .array(z.string({ error: "languages must be language codes such as en-US" }), {
    error: 'languages must be an array of language codes such as ["en-US", "es-ES"]',
  })
  .min(2, { error: "languages needs 2 to 4 language codes" })
  .max(MAX_ROOM_LANGUAGES, { error: `languages has at most ${MAX_ROOM_LANGUAGES} codes` })
  .optional();
const participantLanguage = z
  .string({ error: "language must be a language code such as es-ES" })
  .optional()
  .describe("Beyond the spec: the language this participant speaks and hears (one of the room's)");

/** Reads a language code a request named, or says why it is none. */
export function languageOf(
  name: string,
  value: string,
  example: string,
): { ok: true; language: LanguageCode } | { ok: false; message: string } {
  const parsed = parseLanguageTag(value);
  return parsed.ok
    ? { ok: true, language: parsed.language }
    : {
        ok: false,
        message: `${name} "${value}" is not a language code; use the form xx-XX, e.g. ${example}`,
      };
}
const camelCase = (field: Field) => `${field}, spelled as Pinch's clients send it (${field} wins)`;

/** A field as the request gave it: under which name, and its value; undefined when absent. */
function given<T>(
  field: Field,
  snake: T | undefined,
  camel: T | undefined,
): { readonly name: string; readonly value: T } | undefined {
  if (snake !== undefined) return { name: field, value: snake };
  if (camel !== undefined) return { name: CAMEL_CASE[field], value: camel };
  return undefined;
}

/**
 * The request body. Language tags (`xx-XX` as the spec shows them; a bare `xx` and script subtags
 * are accepted too) are read once the body has the right shape, so a malformed body is reported
 * as such before a language is.
 */
export const sessionRequest = z
  .object(
    {
      source_language: languageTag("source_language", "en-US").describe("Required (or sourceLanguage)"),
      sourceLanguage: languageTag("sourceLanguage", "en-US").describe(camelCase("source_language")),
      target_language: languageTag("target_language", "es-ES").describe("Required (or targetLanguage)"),
      targetLanguage: languageTag("targetLanguage", "es-ES").describe(camelCase("target_language")),
      voice_type: voiceType("voice_type").describe(
        `Default ${DEFAULT_VOICE_TYPES.rooms} ("custom" when voice_id is given); "custom" (beyond the ` +
          "spec): the library voice voice_id",
      ),
      voiceType: voiceType("voiceType").describe(camelCase("voice_type")),
      voice_id: voiceId("voice_id").describe('Beyond the spec: the library voice of voice_type "custom"'),
      voiceId: voiceId("voiceId").describe(camelCase("voice_id")),
      enable_audio_output: audioOutput("enable_audio_output").describe(
        "Beyond the spec, default true; false: the translator publishes transcripts only, no speech",
      ),
      enableAudioOutput: audioOutput("enableAudioOutput").describe(camelCase("enable_audio_output")),
      two_way: twoWay("two_way").describe(
        "Beyond the spec, default false: either side of the pair speaks and the other hears the translation",
      ),
      twoWay: twoWay("twoWay").describe(camelCase("two_way")),
      languages: roomLanguages.describe(
        "Beyond the spec, instead of source_language/target_language: the room's 2–4 languages; every " +
          "participant speaks and hears one of them (language), hearing the others translated into it",
      ),
      language: participantLanguage.describe(
        "Beyond the spec: the creator's own language (one of the room's; with languages, default the first)",
      ),
      pace: z
        .enum(PACE_MODES, { error: 'pace must be "catch-up" or "natural"' })
        .optional()
        .describe(
          'Beyond the spec, default "catch-up": translated speech gets faster (up to max_speedup) while a ' +
            'listener is behind; "natural": never (docs/rooms.md, "Pace")',
        ),
      max_speedup: maxSpeedup("max_speedup").describe(
        `Beyond the spec, default ${DEFAULT_MAX_SPEEDUP}: the fastest translated speech, times the voice's natural rate (${MAX_SPEEDUP_RANGE.min}–${MAX_SPEEDUP_RANGE.max})`,
      ),
      maxSpeedup: maxSpeedup("maxSpeedup").describe(camelCase("max_speedup")),
      context: contextField,
    },
    { error: "the body must be a JSON object" },
  )
  .transform((body, context) => {
    // A missing field is an `invalid_type` issue (invalid_request), a malformed tag a custom one.
    const refuse = (field: string, message: string, code: "custom" | "invalid_type" = "custom") => {
      context.addIssue(
        code === "custom"
          ? { code, path: [field], message }
          : { code, expected: "string", input: undefined, path: [field], message },
      );
      return z.NEVER;
    };
    const two = given("two_way", body.two_way, body.twoWay);
    const source = given("source_language", body.source_language, body[CAMEL_CASE.source_language]);
    const target = given("target_language", body.target_language, body[CAMEL_CASE.target_language]);
    let room: RoomLanguages;
    const names: string[] = [];
    if (body.languages !== undefined) {
      const pairField = source?.name ?? target?.name ?? two?.name;
      if (pairField) {
        return refuse(
          pairField,
          `${pairField} and languages do not go together: a room has either a pair or languages`,
          "invalid_type",
        );
      }
      const languages: LanguageCode[] = [];
      for (const [index, tag] of body.languages.entries()) {
        const read = languageOf(`languages[${index}]`, tag, "es-ES");
        if (!read.ok) return refuse("languages", read.message);
        if (languages.includes(read.language))
          return refuse("languages", `languages names ${read.language} twice`);
        languages.push(read.language);
        names.push(`languages[${index}] "${tag}"`);
      }
      room = { languages };
    } else {
      const pair: LanguageCode[] = [];
      for (const [field, tag, example] of [
        ["source_language", source, "en-US"],
        ["target_language", target, "es-ES"],
      ] as const) {
        if (!tag) {
          return refuse(
            field,
            `${field} is required: a language code such as ${example} (${CAMEL_CASE[field]} is read ` +
              "too), or give the room's languages",
            "invalid_type",
          );
        }
        const read = languageOf(tag.name, tag.value, example);
        if (!read.ok) return refuse(tag.name, read.message);
        pair.push(read.language);
        names.push(`${tag.name} "${tag.value}"`);
      }
      const [from, to] = pair as [LanguageCode, LanguageCode];
      if (two?.value && from === to)
        return refuse(two.name, `${two.name} needs two different languages; both are ${from}`);
      room = {
        languages: from === to ? [from] : [from, to],
        pair: { source: from, target: to, twoWay: two?.value ?? false },
      };
    }
    let language: LanguageCode | undefined = body.languages === undefined ? undefined : room.languages[0];
    if (body.language !== undefined) {
      const read = roomLanguageOf(body.language, room.languages);
      if (!read.ok) return refuse("language", read.message);
      language = read.language;
    }

    const type = given("voice_type", body.voice_type, body.voiceType);
    const id = given("voice_id", body.voice_id, body.voiceId);
    if (id && type && type.value !== "custom") {
      return refuse(id.name, `${id.name} names a voice only with ${type.name} "custom", not "${type.value}"`);
    }
    const kind = type?.value ?? (id ? "custom" : DEFAULT_VOICE_TYPES.rooms);
    let voice: Voice | "clone";
    if (kind !== "custom") voice = voiceOf(kind);
    else if (!id) {
      const name = type?.name ?? "voice_type";
      return refuse(
        name,
        `${name} "custom" needs voice_id (or voiceId): a library voice id; GET /v1/voices lists them`,
      );
    } else {
      const named = voiceById(id.value);
      if (!named) {
        return refuse(
          id.name,
          `${id.name} "${id.value}" is no library voice; GET /v1/voices lists the valid ids`,
        );
      }
      voice = named;
    }
    const speaks =
      given("enable_audio_output", body.enable_audio_output, body.enableAudioOutput)?.value ?? true;
    return {
      room,
      language,
      /** How the request named each language, for messages: `sourceLanguage "en"`. */
      named: new Map(room.languages.map((code, index) => [code, names[index] ?? `"${code}"`])),
      voice: speaks ? voice : undefined,
      pace: paceOf(body.pace ?? "catch-up", given("max_speedup", body.max_speedup, body.maxSpeedup)?.value),
      context: body.context ?? "",
    };
  });

/** A tag that is not a language code is `invalid_language`; any other problem `invalid_request`. */
export const sessionRequestErrors: ValidationErrorMapping = {
  code: (issue) =>
    issue.kind === "custom" && LANGUAGE_FIELDS.includes(issue.field) ? "invalid_language" : "invalid_request",
  message: (issue) => issue.message,
};

/** Beyond the spec: the body of a participant's access (absent or `{}`: as before). */
export const participantRequest = z
  .object({ language: participantLanguage }, { error: "the body must be a JSON object" })
  .optional();
