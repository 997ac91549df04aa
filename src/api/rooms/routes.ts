import type { FastifyInstance, FastifyRequest } from "fastify";
import { contextField } from "../context-field.js";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import type { Accounts } from "../../auth/accounts.js";
import type { EngineRegistry } from "../../engines/routing/registry.js";
import type { LanguageCode, Voice } from "../../core/contracts.js";
import { parseLanguageTag } from "../../core/language-tags.js";
import { recognitionAdvice, recognitionTier, unservable } from "../../engines/routing/languages.js";
import { EmptyRoomsLimitError, RoomCapacityError, type Rooms } from "../../rooms/rooms.js";
import { AccountSessionsLimitError } from "../../sessions/capacity.js";
import { DEFAULT_VOICE_TYPES, voiceOf } from "../../voices/voice-defaults.js";
import { voiceById } from "../../voices/library.js";
import { accountOf, authenticated } from "../authenticate.js";
import { ApiError, type ValidationErrorMapping } from "../errors.js";
import { BEARER, errorResponses } from "../openapi.js";
import type { AccountRateLimit } from "../rate-limit.js";

/** `POST /api/beta1/session`: a translation room with a translator in it. */

export interface RoomRouteOptions {
  readonly rooms: Rooms;
  readonly accounts: Accounts;
  readonly registry: EngineRegistry;
  readonly publicBaseUrl: (request: FastifyRequest) => string;
  /** The per-account limit shared with the dubbing endpoints. */
  readonly rateLimit: AccountRateLimit;
}

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
} as const;
type Field = keyof typeof CAMEL_CASE;

const LANGUAGE_FIELDS: readonly string[] = [
  "source_language",
  "target_language",
  CAMEL_CASE.source_language,
  CAMEL_CASE.target_language,
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
const sessionRequest = z
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
    const languages: LanguageCode[] = [];
    const names: string[] = [];
    for (const [field, example] of [
      ["source_language", "en-US"],
      ["target_language", "es-ES"],
    ] as const) {
      const tag = given(field, body[field], body[CAMEL_CASE[field]]);
      if (!tag) {
        return refuse(
          field,
          `${field} is required: a language code such as ${example} (${CAMEL_CASE[field]} is read too)`,
          "invalid_type",
        );
      }
      const parsed = parseLanguageTag(tag.value);
      if (!parsed.ok) {
        return refuse(
          tag.name,
          `${tag.name} "${tag.value}" is not a language code; use the form xx-XX, e.g. ${example}`,
        );
      }
      languages.push(parsed.language);
      names.push(`${tag.name} "${tag.value}"`);
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
      sourceLanguage: languages[0]!,
      targetLanguage: languages[1]!,
      /** How the request named each language, for messages: `sourceLanguage "en"`. */
      sourceNamed: names[0]!,
      targetNamed: names[1]!,
      voice: speaks ? voice : undefined,
      context: body.context ?? "",
    };
  });

/** A tag that is not a language code is `invalid_language`; any other problem `invalid_request`. */
const sessionRequestErrors: ValidationErrorMapping = {
  code: (issue) =>
    issue.kind === "custom" && LANGUAGE_FIELDS.includes(issue.field) ? "invalid_language" : "invalid_request",
  message: (issue) => issue.message,
};

/** Pipecat's end of a session: the room's name as `session_id`. */
const endRequest = z.object(
  {
    session_id: z
      .string({ error: "session_id is required: the room_name of POST /api/beta1/session" })
      .describe("The room_name of POST /api/beta1/session"),
  },
  { error: "the body must be a JSON object" },
);

/** Marks an end request one process of the fleet passed to the room's host (never passed on again). */
const FORWARDED_HEADER = "x-relay-forwarded";
/** How long the room's host may take to end it for another process. */
const FORWARD_TIMEOUT_MS = 10_000;

export async function roomRoutes(app: FastifyInstance, options: RoomRouteOptions): Promise<void> {
  const { rooms, accounts, registry } = options;
  const routes = app.withTypeProvider<ZodTypeProvider>();

  routes.post(
    "/api/beta1/session",
    {
      schema: {
        tags: ["rooms"],
        summary: "Create a room with a translator in it; the caller's access to it",
        security: BEARER,
        body: sessionRequest,
        response: { 200: roomAccess, ...errorResponses(400, 401, 402, 403, 429, 500, 503) },
      },
      config: { validationError: sessionRequestErrors },
      preValidation: authenticated(accounts, "rooms"),
    },
    async (request) => {
      const account = accountOf(request);
      const body = request.body;
      checkServable(registry, body);
      await options.rateLimit(request, account);
      try {
        const room = await rooms.create(
          {
            accountId: account.id,
            sourceLanguage: body.sourceLanguage,
            targetLanguage: body.targetLanguage,
            voice: body.voice,
            context: body.context,
          },
          options.publicBaseUrl(request),
        );
        return {
          url: room.url,
          token: room.token,
          room_name: room.roomName,
          ...(body.voice === "clone" ? { voice_clone: registry.voiceClone } : {}),
        };
      } catch (error) {
        if (error instanceof EmptyRoomsLimitError) {
          throw new ApiError(429, "rate_limited", error.message, {
            "retry-after": String(error.retryAfterSec),
          });
        }
        // No Retry-After: waiting does not help, the account has to end one of its own sessions.
        if (error instanceof AccountSessionsLimitError)
          throw new ApiError(429, "rate_limited", error.message);
        if (error instanceof RoomCapacityError) {
          throw new ApiError(
            503,
            "capacity_exhausted",
            "no room capacity right now; retry after a short backoff",
            {
              "retry-after": "1",
            },
          );
        }
        throw error;
      }
    },
  );

  // Pipecat's Pinch service ends its sessions with this call (beyond the spec).
  routes.post(
    "/api/beta1/session/end",
    {
      schema: {
        tags: ["rooms"],
        summary: "Beyond the spec: end a room the caller created, disconnecting everyone in it",
        description:
          "Idempotent: a room that has already ended (for any reason) ends again with 200 for the key " +
          "that created it; another key gets 404 as for a room that never existed.",
        security: BEARER,
        body: endRequest,
        response: { 200: roomEnded, ...errorResponses(400, 401, 403, 404, 500) },
      },
      preValidation: authenticated(accounts, "rooms"),
    },
    async (request) => {
      const account = accountOf(request);
      const roomName = request.body.session_id;
      const forwarded = request.headers[FORWARDED_HEADER] !== undefined;
      const notFound = new ApiError(404, "not_found", `no room ${roomName} created with this API key`);
      const ended = { session_id: roomName, status: "ended" as const };
      const ending = await rooms.endByOwner(roomName, account.id, forwarded);
      if (ending.kind === "not_found") throw notFound;
      if (ending.kind === "ended") return ended;
      // Hosted by another process of the fleet: only it can disconnect the room's participants.
      const answer = await fetch(new URL("/api/beta1/session/end", ending.address), {
        method: "POST",
        headers: {
          authorization: request.headers.authorization ?? "",
          "content-type": "application/json",
          [FORWARDED_HEADER]: "1",
        },
        body: JSON.stringify({ session_id: roomName }),
        signal: AbortSignal.timeout(FORWARD_TIMEOUT_MS),
      });
      if (answer.status === 200) return ended;
      if (answer.status === 404) throw notFound;
      throw new Error(`the process hosting room ${roomName} answered ${answer.status} to ending it`);
    },
  );

  // Beyond the spec: a token for one more participant of a room the caller created.
  routes.post(
    "/api/beta1/session/:roomName/participants",
    {
      schema: {
        tags: ["rooms"],
        summary: "Beyond the spec: access for one more participant of a room the caller created",
        security: BEARER,
        params: z.object({ roomName: z.string() }),
        response: {
          200: roomAccess.extend({ identity: z.string().describe("The new participant") }),
          ...errorResponses(401, 403, 404, 429),
        },
      },
    },
    async (request) => {
      const account = await accounts.authenticate(request.headers.authorization, "rooms");
      await options.rateLimit(request, account);
      const { roomName } = request.params;
      const access = await rooms.grantParticipantAccess(roomName, account.id, options.publicBaseUrl(request));
      if (!access) throw new ApiError(404, "not_found", `no open room ${roomName} created with this API key`);
      return { url: access.url, token: access.token, room_name: roomName, identity: access.identity };
    },
  );
}

const roomAccess = z.object({
  url: z.string().describe("Where to join: the LiveKit server, or the embedded room server's WebSocket"),
  token: z.string().describe("LiveKit-format access token (JWT)"),
  room_name: z.string(),
  voice_clone: z
    .enum(["tone-color", "library", "off"])
    .optional()
    .describe(
      'Beyond the spec, with voice_type "clone": "tone-color" when each speaker is heard in their own voice ' +
        '(a tone colour model is loaded), "library" when in the nearest library voice (no model), "off" when ' +
        "the deployment disabled voice cloning (VOICE_CLONE=off; the nearest library voice serves)",
    ),
});

const roomEnded = z.object({
  session_id: z.string().describe("The room's name"),
  status: z.literal("ended"),
});

/**
 * The configured engines must recognize the source, translate it and, when the translator speaks,
 * speak the target (400 invalid_language).
 */
function checkServable(registry: EngineRegistry, body: z.output<typeof sessionRequest>): void {
  const source = body.sourceLanguage;
  const target = body.targetLanguage;
  const problem = unservable(registry, [
    { kind: "recognition", language: source },
    { kind: "translation", from: source, to: target },
    ...(body.voice === undefined ? [] : [{ kind: "voice", language: target } as const]),
  ]);
  if (!problem) return;
  const available = problem.available.join(", ");
  throw new ApiError(
    400,
    "invalid_language",
    problem.kind === "recognition"
      ? `${body.sourceNamed} cannot be recognized by the configured engines; ` +
          `speech recognition is available for: ${available}${recognitionAdvice(recognitionTier(registry))}`
      : problem.kind === "translation"
        ? `${body.targetNamed} is not supported from ${body.sourceNamed} by the ` +
          `configured engines; from "${source}" the targets are: ${available}`
        : `${body.targetNamed} has no voice output with the configured engines; ` +
          `voice output is available for: ${available} (or ask for transcripts only: enable_audio_output false)`,
  );
}
