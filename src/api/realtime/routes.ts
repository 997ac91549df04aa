import type { FastifyInstance } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import type { Accounts } from "../../auth/accounts.js";
import type { EngineRegistry } from "../../engines/routing/registry.js";
import { languagesReport } from "../languages-report.js";
import { listVoices } from "../../voices/library.js";
import { ApiError, errorBody, type ValidationErrorMapping } from "../errors.js";
import { BEARER, DOCUMENTED_WEBSOCKET, errorResponses } from "../openapi.js";
import { serveSessionSocket, type SessionObserver, type SessionTimeouts } from "./socket.js";
import { accountOf, authenticated } from "../authenticate.js";
import {
  SESSION_PARAMETERS,
  MAX_CONTEXT_LENGTH,
  MAX_PARAMETER_CHARS,
  characterCount,
  modelNameOrDefault,
} from "./session-params.js";
import type { CreateRefusal, RealtimeSessions } from "./sessions.js";

export interface RealtimeRouteOptions {
  readonly registry: EngineRegistry;
  readonly sessions: RealtimeSessions;
  readonly accounts: Accounts;
  readonly publicBaseUrl: string | undefined;
  readonly workerId: string;
  readonly modelVersionId: (modelName: string) => string;
  readonly observer?: SessionObserver;
  readonly timeouts: SessionTimeouts;
}

export const SESSION_SOCKET_PATH = "/v1/ws";

/**
 * What `GET /v1/session` may take beyond the service's bound on a request's line and headers:
 * `context` at its longest in any script, 2,000 characters of up to 4 UTF-8 bytes, each byte
 * percent-encoded as 3 characters.
 */
export const CONTEXT_QUERY_BYTES = MAX_CONTEXT_LENGTH * 4 * 3;

/** `GET /v1/session`, the session WebSocket, `GET /v1/voices` and `GET /v1/languages`. */
export async function realtimeRoutes(app: FastifyInstance, options: RealtimeRouteOptions): Promise<void> {
  const { registry, sessions, accounts } = options;

  app.withTypeProvider<ZodTypeProvider>().get(
    "/v1/session",
    {
      schema: {
        tags: ["real-time"],
        summary: "Create a session: a pre-signed ws_url valid for 60 s",
        description:
          "Every query parameter is session metadata, checked when the socket opens (an error frame " +
          "right after ready). The WebSocket's messages: GET /v1/messages.schema.json.",
        security: BEARER,
        querystring: sessionQuery,
        response: { 200: sessionResponse, ...errorResponses(400, 401, 402, 403, 429, 503) },
      },
      config: { validationError: sessionQueryErrors, extraHeaderBytes: CONTEXT_QUERY_BYTES },
      preValidation: authenticated(accounts, "realtime"),
    },
    async (request) => {
      const account = accountOf(request);
      // Real-time use is not metered yet; a positive balance is still required to start sessions.
      await accounts.requireBalance(account);
      const metadata = sessionMetadata(request.query);
      const created = await sessions.create(account.id, metadata);
      if (!created.ok) throw refusal(created);
      const base = options.publicBaseUrl ?? `${request.protocol}://${request.host}`;
      const wsBase = base.replace(/^http/u, "ws");
      return {
        session_id: created.sessionId,
        ws_url: `${wsBase}${SESSION_SOCKET_PATH}?token=${encodeURIComponent(created.token)}`,
        expires_in: 60,
        // An invalid modelName is refused when the socket opens; it is never echoed back here.
        model_version_id: options.modelVersionId(modelNameOrDefault(metadata.modelName)),
      };
    },
  );

  app.get(
    SESSION_SOCKET_PATH,
    {
      websocket: true,
      schema: {
        tags: ["real-time"],
        summary: "The session WebSocket (the ws_url of GET /v1/session)",
        description:
          "Upgrade to a WebSocket. Binary frames: PCM16 LE mono 16 kHz in, float32 LE mono 24 kHz out. " +
          "JSON messages: GET /v1/messages.schema.json. A plain GET answers 426 and leaves the session unused.",
        querystring: z.object({ token: z.string().describe("From the ws_url") }),
        response: errorResponses(401, 426),
      },
      config: DOCUMENTED_WEBSOCKET,
      // The URL is the only credential: refuse the upgrade itself (HTTP 401) unless it claims a live session.
      preValidation: async (request, reply) => {
        const token = (request.query as Record<string, unknown>).token;
        if (!request.ws) {
          // A plain GET (a link previewer, a proxy's probe) must not use up the single-use session.
          const claimable = typeof token === "string" && (await sessions.isClaimable(token));
          return claimable
            ? reply
                .code(426)
                .header("upgrade", "websocket")
                .send(
                  errorBody(
                    "upgrade_required",
                    "this URL is a WebSocket endpoint: connect with a WebSocket client (the session is still unused)",
                  ),
                )
            : reply.code(401).send(errorBody("unauthorized", INVALID_SESSION_URL));
        }
        const pending = typeof token === "string" ? await sessions.claim(token) : undefined;
        if (!pending) return reply.code(401).send(errorBody("unauthorized", INVALID_SESSION_URL));
        request.pendingSession = pending;
        // The account's slot is freed when the session ends, or with the connection should the
        // upgrade never complete (the client went away): freeing it twice is harmless.
        request.raw.socket.once("close", () =>
          sessions.unreserve({ id: pending.sessionId, accountId: pending.accountId }),
        );
      },
    },
    (socket, request) => {
      serveSessionSocket(socket, request.pendingSession!, {
        registry,
        sessions,
        workerId: options.workerId,
        timeouts: options.timeouts,
        log: request.log,
        ...(options.observer ? { observer: options.observer } : {}),
      });
    },
  );

  app.withTypeProvider<ZodTypeProvider>().get(
    "/v1/voices",
    {
      schema: {
        tags: ["real-time"],
        summary: "The voice library (70 voices, every one speaks every voice-output language)",
        querystring: voicesQuery,
        response: { 200: voicesResponse, ...errorResponses(400) },
      },
      config: { validationError: { message: (issue) => issue.message } },
    },
    async (request) => {
      const { gender } = request.query;
      return {
        voices: listVoices(gender).map((voice) => ({
          id: voice.id,
          name: voice.name,
          gender: voice.gender,
          // Beyond the spec: flags the voices `voiceId=auto` will never choose.
          strong_accent: voice.strongAccent,
        })),
      };
    },
  );

  app.get(
    "/v1/languages",
    {
      schema: {
        tags: ["real-time"],
        summary: "What the configured engines serve: recognition, translation pairs, voice output",
        response: { 200: z.looseObject({}).describe("The engines' languages (see docs/realtime-api.md)") },
      },
    },
    async () => languagesReport(registry),
  );
}

const sessionResponse = z.object({
  session_id: z.string(),
  ws_url: z.string().describe("Pre-signed WebSocket URL; open it within expires_in seconds"),
  expires_in: z.number().int(),
  model_version_id: z.string().describe("The exact server build serving the session"),
});

const voicesResponse = z.object({
  voices: z.array(
    z.object({
      id: z.number().int(),
      name: z.string(),
      gender: z.enum(["female", "male"]),
      strong_accent: z.boolean().describe("Beyond the spec: voiceId=auto never picks these"),
    }),
  ),
});

const voicesQuery = z.object({
  gender: z.enum(["female", "male"], { error: 'gender must be "female" or "male"' }).optional(),
});

const INVALID_SESSION_URL =
  "the session URL is invalid, expired or already used, or its API key was revoked; create a new session";

function refusal({ reason, retryAfterSec, limit }: CreateRefusal): ApiError {
  if (reason === "live_limit") {
    // No Retry-After: waiting does not help, the account has to end one of its own sessions.
    return new ApiError(
      429,
      "rate_limited",
      `this account already has ${limit} live sessions (open session sockets and rooms; the limit); ` +
        "close one of them to start another",
    );
  }
  const headers = { "retry-after": String(retryAfterSec) };
  if (reason === "account_limit") {
    return new ApiError(
      429,
      "rate_limited",
      `this account already has ${limit} sessions that were created and not connected (the limit); ` +
        `connect to one or let it expire (retry in ${retryAfterSec} s)`,
      headers,
    );
  }
  return new ApiError(
    503,
    "capacity_exhausted",
    reason === "capacity"
      ? "no session capacity right now; retry after a short backoff"
      : `${limit} sessions are waiting to be connected (the limit); retry in ${retryAfterSec} s`,
    headers,
  );
}

/**
 * All query parameters are the session's metadata, but only the ones a session reads are kept
 * while it waits to be claimed (a repeated parameter keeps its last value), and none may be longer
 * than any parameter can validly be: an unclaimed session costs a bounded amount of memory. Their
 * meaning is checked when the socket opens, as the spec says, not here.
 */
const sessionParameter = z.preprocess(
  (value) => (Array.isArray(value) ? value.at(-1) : value),
  z
    .string()
    .refine((value) => characterCount(value) <= MAX_PARAMETER_CHARS)
    .optional(),
);
const sessionQuery = z.object(
  Object.fromEntries(SESSION_PARAMETERS.map((key) => [key, sessionParameter])) as Record<
    (typeof SESSION_PARAMETERS)[number],
    typeof sessionParameter
  >,
);
const sessionQueryErrors: ValidationErrorMapping = {
  message: (issue) =>
    `query parameter ${issue.field} is too long or not text; no session parameter takes more than ` +
    `${MAX_CONTEXT_LENGTH} characters`,
};

/** The query as stored metadata: the parameters that were given. */
function sessionMetadata(query: z.infer<typeof sessionQuery>): Record<string, string> {
  return Object.fromEntries(Object.entries(query).filter(([, value]) => value !== undefined)) as Record<
    string,
    string
  >;
}

declare module "fastify" {
  interface FastifyRequest {
    pendingSession?: import("./sessions.js").ClaimedSession;
  }
}
