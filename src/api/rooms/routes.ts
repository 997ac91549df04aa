import type { FastifyInstance, FastifyRequest } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import type { Accounts } from "../../auth/accounts.js";
import type { EngineRegistry } from "../../engines/registry.js";
import type { LanguageCode } from "../../engines/types.js";
import { parseLanguageTag, unservable } from "../../languages.js";
import { EmptyRoomsLimitError, RoomCapacityError, type Rooms } from "../../rooms/rooms.js";
import { DEFAULT_VOICE_TYPES, voiceOf } from "../../speech-plan.js";
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

const LANGUAGE_FIELDS = ["source_language", "target_language"] as const;

/**
 * The request body. Language tags (`xx-XX` as the spec shows them; a bare `xx` and script subtags
 * are accepted too) are read once the body has the right shape, so a malformed body is reported
 * as such before a language is.
 */
const sessionRequest = z
  .object(
    {
      source_language: z.string({ error: "source_language is required: a language code such as en-US" }),
      target_language: z.string({ error: "target_language is required: a language code such as es-ES" }),
      voice_type: z
        .enum(["clone", "female", "male"], { error: 'voice_type must be "clone", "female" or "male"' })
        .default(DEFAULT_VOICE_TYPES.rooms),
    },
    { error: "the body must be a JSON object" },
  )
  .transform((body, context) => {
    const languages: Partial<Record<(typeof LANGUAGE_FIELDS)[number], LanguageCode>> = {};
    for (const field of LANGUAGE_FIELDS) {
      const parsed = parseLanguageTag(body[field]);
      if (parsed.ok) {
        languages[field] = parsed.language;
        continue;
      }
      context.addIssue({
        code: "custom",
        path: [field],
        message: `${field} "${body[field]}" is not a language code; use the form xx-XX, e.g. en-US`,
      });
      return z.NEVER;
    }
    return {
      ...body,
      sourceLanguage: languages.source_language!,
      targetLanguage: languages.target_language!,
    };
  });

/** A tag that is not a language code is `invalid_language`; any other problem `invalid_request`. */
const sessionRequestErrors: ValidationErrorMapping = {
  code: (issue) =>
    issue.kind === "custom" && (LANGUAGE_FIELDS as readonly string[]).includes(issue.field)
      ? "invalid_language"
      : "invalid_request",
  message: (issue) => issue.message,
};

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
            voice: voiceOf(body.voice_type),
          },
          options.publicBaseUrl(request),
        );
        return { url: room.url, token: room.token, room_name: room.roomName };
      } catch (error) {
        if (error instanceof EmptyRoomsLimitError) {
          throw new ApiError(429, "rate_limited", error.message, {
            "retry-after": String(error.retryAfterSec),
          });
        }
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
});

/** The configured engines must recognise the source, translate it and speak the target (400 invalid_language). */
function checkServable(registry: EngineRegistry, body: z.output<typeof sessionRequest>): void {
  const source = body.sourceLanguage;
  const target = body.targetLanguage;
  const problem = unservable(registry, [
    { kind: "recognition", language: source },
    { kind: "translation", from: source, to: target },
    { kind: "voice", language: target },
  ]);
  if (!problem) return;
  const available = problem.available.join(", ");
  throw new ApiError(
    400,
    "invalid_language",
    problem.kind === "recognition"
      ? `source_language "${body.source_language}" cannot be recognised by the configured engines; ` +
          `speech recognition is available for: ${available}`
      : problem.kind === "translation"
        ? `target_language "${body.target_language}" is not supported from "${body.source_language}" by the ` +
          `configured engines; from "${source}" the targets are: ${available}`
        : `target_language "${body.target_language}" has no voice output with the configured engines; ` +
          `voice output is available for: ${available}`,
  );
}
