import type { FastifyInstance, FastifyRequest } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import type { Accounts } from "../../auth/accounts.js";
import type { EngineRegistry } from "../../engines/routing/registry.js";
import type { LanguageCode } from "../../core/contracts.js";
import { recognitionAdvice, recognitionTier, unservable } from "../../engines/routing/languages.js";
import {
  EmptyRoomsLimitError,
  RoomCapacityError,
  RoomFullError,
  RoomServerError,
  type Rooms,
} from "../../rooms/rooms.js";
import { roomLanguageOf, roomRequirements, spokenLanguages } from "../../rooms/room-languages.js";
import type { RoomLanguages } from "../../rooms/types.js";
import { AccountSessionsLimitError } from "../../sessions/capacity.js";
import { accountOf, authenticated } from "../authenticate.js";
import { ApiError } from "../errors.js";
import { BEARER, errorResponses } from "../openapi.js";
import type { AccountRateLimit } from "../rate-limit.js";
import { languageOf, participantRequest, sessionRequest, sessionRequestErrors } from "./room-request.js";

/** `POST /api/beta1/session`: a translation room with a translator in it. */

export interface RoomRouteOptions {
  readonly rooms: Rooms;
  readonly accounts: Accounts;
  readonly registry: EngineRegistry;
  readonly publicBaseUrl: (request: FastifyRequest) => string;
  /** The per-account limit shared with the dubbing endpoints. */
  readonly rateLimit: AccountRateLimit;
}

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
      // A room created with `languages` is spoken in every language the engines recognize (the
      // rest are listen-only); a spec room's pair by the undeclared participants, and the
      // creator's own language when they gave one and it is recognized.
      const recognizes = (language: LanguageCode) => registry.recognizer(language) !== undefined;
      const creator = body.language !== undefined && recognizes(body.language) ? [body.language] : [];
      const { spoken, listenOnly } = body.room.pair
        ? { spoken: [undefined, ...creator], listenOnly: [] }
        : spokenLanguages(body.room, recognizes);
      checkServable(registry, body.room, spoken, body.voice !== undefined, body.named);
      await options.rateLimit(request, account);
      try {
        const room = await rooms.create(
          {
            accountId: account.id,
            room: body.room,
            language: body.language,
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
          // Spec rooms answer exactly as before; rooms created with languages say theirs.
          ...(room.language === undefined ? {} : { language: room.language }),
          ...(body.room.pair ? {} : { languages: [...body.room.languages] }),
          ...(listenOnly.length > 0 ? { listen_only: listenOnly } : {}),
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
        // The operator's room server failed: the spec's 500 internal_error, saying that it was the
        // room server and what it answered (its URL is the one clients are given anyway).
        if (error instanceof RoomServerError) throw new ApiError(500, "internal_error", error.message);
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
        body: participantRequest,
        response: {
          200: roomAccess.extend({ identity: z.string().describe("The new participant") }),
          ...errorResponses(400, 401, 403, 404, 429),
        },
      },
      config: { validationError: sessionRequestErrors },
    },
    async (request) => {
      const account = await accounts.authenticate(request.headers.authorization, "rooms");
      await options.rateLimit(request, account);
      const { roomName } = request.params;
      const asked = request.body?.language;
      let language: LanguageCode | undefined;
      // A room hosted by another process of the fleet is granted without its languages: its host
      // checks a declared language when the participant joins.
      const room = rooms.openRoom(roomName, account.id);
      if (asked !== undefined) {
        const read = room
          ? roomLanguageOf(asked, room.languages.languages)
          : languageOf("language", asked, "es-ES");
        if (!read.ok) throw new ApiError(400, "invalid_language", read.message);
        language = read.language;
        // A language no engine recognizes is listen-only: what it hears was checked with the room.
        if (room && registry.recognizer(language)) {
          const named = new Map([[language, `language "${asked}"`]]);
          checkServable(registry, room.languages, [language], room.speaks, named);
        }
      } else if (room && !room.languages.pair) language = room.languages.languages[0];
      let access;
      try {
        access = await rooms.grantParticipantAccess(
          roomName,
          account.id,
          options.publicBaseUrl(request),
          language,
        );
      } catch (error) {
        if (error instanceof RoomFullError) throw new ApiError(400, "room_full", error.message);
        throw error;
      }
      if (!access) throw new ApiError(404, "not_found", `no open room ${roomName} created with this API key`);
      return {
        url: access.url,
        token: access.token,
        room_name: roomName,
        identity: access.identity,
        ...(access.language === undefined ? {} : { language: access.language }),
        ...(room && !room.languages.pair ? { languages: [...room.languages.languages] } : {}),
      };
    },
  );
}

const roomAccess = z.object({
  url: z.string().describe("Where to join: the LiveKit server, or the embedded room server's WebSocket"),
  token: z.string().describe("LiveKit-format access token (JWT)"),
  room_name: z.string(),
  language: z
    .string()
    .optional()
    .describe("Beyond the spec: the language this participant speaks and hears, when they have one"),
  languages: z.array(z.string()).optional().describe("Beyond the spec: the room's languages"),
  listen_only: z
    .array(z.string())
    .optional()
    .describe(
      "Beyond the spec: the room's languages no configured engine recognizes: their participants hear " +
        "the others translated, and are not heard",
    ),
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
 * The configured engines must recognize what participants speak (`spoken`: see
 * `roomRequirements`), translate it into the room's other languages and, when the translator
 * speaks, speak them (400 invalid_language naming the language as the request did).
 */
function checkServable(
  registry: EngineRegistry,
  room: RoomLanguages,
  spoken: readonly (LanguageCode | undefined)[],
  speaks: boolean,
  named: ReadonlyMap<LanguageCode, string>,
): void {
  const problem = unservable(registry, roomRequirements(room, spoken, speaks));
  if (!problem) return;
  const name = (code: LanguageCode | "auto") => (code === "auto" ? "auto" : (named.get(code) ?? `"${code}"`));
  const available = problem.available.join(", ");
  const { kind, language } = problem;
  throw new ApiError(
    400,
    "invalid_language",
    kind === "recognition" && language === "auto"
      ? "two_way needs a recognizer that identifies languages (whisper-cpp or a remote Whisper server " +
          `in ENGINES_FILE), and the configured engines have none${recognitionAdvice(recognitionTier(registry))}`
      : kind === "recognition"
        ? `${name(language)} cannot be recognized by the configured engines; ` +
          `speech recognition is available for: ${available}${recognitionAdvice(recognitionTier(registry))}`
        : kind === "identification"
          ? `${name(language)} cannot be identified by the configured recognizer that identifies ` +
            `languages (two_way); it knows: ${available}`
          : kind === "translation"
            ? `${name(language)} is not supported from ${name(problem.from)} by the ` +
              `configured engines; from "${problem.from}" the targets are: ${available}`
            : `${name(language)} has no voice output with the configured engines; ` +
              `voice output is available for: ${available} (or ask for transcripts only: enable_audio_output false)`,
  );
}
