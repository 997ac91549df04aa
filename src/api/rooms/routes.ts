import type { FastifyInstance, FastifyRequest } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import type { Accounts } from "../../auth/accounts.js";
import type { EngineRegistry } from "../../engines/routing/registry.js";
import type { LanguageCode } from "../../core/contracts.js";
import { recognitionAdvice, recognitionTier, unservable } from "../../engines/routing/languages.js";
import { MAX_INVITATION_LENGTH } from "../../rooms/invites.js";
import {
  displayName,
  EmptyRoomsLimitError,
  MAX_NAME_LENGTH,
  ROOM_ENDINGS,
  RoomCapacityError,
  RoomFullError,
  RoomServerError,
  type InvitationState,
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

/** A share link's invitation (src/rooms/invites.ts) and, to join, the name the person typed. */
const invitationRequest = z.object(
  {
    invitation: z
      .string({ error: "invitation is required: the code after #join= in a meeting's share link" })
      .max(MAX_INVITATION_LENGTH, { error: "invitation is not a share link's code" })
      .describe("The code after #join= in a meeting's share link"),
    name: z
      .string({ error: "name must be a string" })
      .max(1000, { error: `name is too long (names are cut to ${MAX_NAME_LENGTH} characters)` })
      .optional()
      .describe(`How the others see this participant (at most ${MAX_NAME_LENGTH} characters are kept)`),
  },
  { error: "the body must be a JSON object" },
);

/** How often a meeting page checks its link (the creator's checks keep an empty meeting open). */
const INVITATION_CHECK_SEC = 15;

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
            pace: body.pace,
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
          ...(body.room.pair ? {} : { invitation: room.invitation }),
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

  // Beyond the spec: share links. A link's invitation is the credential (no API key): it says
  // where the meeting stands, and turns into a fresh room token whenever its participant joins.
  const stateOf = async (invitation: string): Promise<InvitationState> => {
    const state = await rooms.invitationState(invitation);
    if (!state)
      throw new ApiError(404, "not_found", "this link is not a meeting's share link of this service");
    return state;
  };
  routes.post(
    "/api/beta1/invitation",
    {
      schema: {
        tags: ["rooms"],
        summary: "Beyond the spec: where the meeting of a share link stands",
        description:
          "Checked by the meeting page while it is open; the creator's own link keeps an empty meeting open " +
          "while their page checks it.",
        body: invitationRequest,
        response: { 200: invitationStatus, ...errorResponses(400, 404) },
      },
    },
    async (request) => {
      const state = await stateOf(request.body.invitation);
      const { roomName, language, host } = state.invitation;
      return {
        status: state.state,
        room_name: roomName,
        ...(language === undefined ? {} : { language }),
        ...(state.state === "open" && state.languages && !state.languages.pair
          ? { languages: [...state.languages.languages] }
          : {}),
        listen_only: language !== undefined && registry.recognizer(language) === undefined,
        host,
        check_after_sec: INVITATION_CHECK_SEC,
        ...(state.state === "ended" && state.reason ? { ended_reason: state.reason } : {}),
        ...(state.state === "ended" ? { message: endedMessage(state) } : {}),
      };
    },
  );
  routes.post(
    "/api/beta1/invitation/join",
    {
      schema: {
        tags: ["rooms"],
        summary: "Beyond the spec: a fresh room token for a share link's participant",
        description:
          "Valid for as long as the meeting is open: a participant who left (or whose earlier token expired) " +
          "joins again as the same participant.",
        body: invitationRequest,
        response: {
          200: roomAccess.extend({
            identity: z.string().describe("The participant, the same at every join with this link"),
            invitation: z.string().describe("The link's invitation"),
            name: z.string().optional().describe("The name the others see, as kept"),
          }),
          ...errorResponses(400, 404),
        },
      },
    },
    async (request) => {
      const state = await stateOf(request.body.invitation);
      if (state.state === "ended") throw new ApiError(404, "not_found", endedMessage(state));
      const name = displayName(request.body.name ?? "");
      const access = await rooms.redeem(state, name, options.publicBaseUrl(request));
      return {
        url: access.url,
        token: access.token,
        room_name: access.roomName,
        identity: access.identity,
        invitation: access.invitation,
        ...(access.language === undefined ? {} : { language: access.language }),
        ...(state.languages && !state.languages.pair ? { languages: [...state.languages.languages] } : {}),
        ...(name === undefined ? {} : { name }),
      };
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
          200: roomAccess.extend({
            identity: z.string().describe("The new participant"),
            invitation: z
              .string()
              .describe("Their share link's code (/meeting#join=<invitation>), valid while the room is open"),
          }),
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
        invitation: access.invitation,
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
  invitation: z
    .string()
    .optional()
    .describe(
      "Beyond the spec, rooms created with languages: the creator's own share link code " +
        "(/meeting#join=<invitation>), valid while the room is open",
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

const invitationStatus = z.object({
  status: z.enum(["open", "ended"]),
  room_name: z.string(),
  language: z.string().optional().describe("The language the link's participant speaks and hears"),
  languages: z.array(z.string()).optional().describe("The room's languages (while it is open)"),
  listen_only: z
    .boolean()
    .describe("No configured engine recognizes their language: they hear the others, and are not heard"),
  host: z.boolean().describe("The creator's own link"),
  check_after_sec: z.number().int().describe("When a page showing the meeting checks again"),
  ended_reason: z
    .enum(Object.keys(ROOM_ENDINGS) as [keyof typeof ROOM_ENDINGS])
    .optional()
    .describe("Why the meeting ended, when this service still knows"),
  message: z.string().optional().describe("For people: that the meeting ended, and why"),
});

/** "This meeting has ended: nobody was in it." */
function endedMessage(state: InvitationState & { readonly state: "ended" }): string {
  return `This meeting has ended${state.reason ? `: ${ROOM_ENDINGS[state.reason]}` : ""}.`;
}

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
