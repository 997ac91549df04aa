import type { FastifyInstance } from "fastify";
import type { Accounts } from "../../auth/accounts.js";
import type { EngineRegistry } from "../../engines/registry.js";
import { listVoices } from "../../voices/library.js";
import { ApiError, errorBody } from "../errors.js";
import { serveSessionSocket } from "./socket.js";
import type { RealtimeSessions } from "./sessions.js";

export interface RealtimeRouteOptions {
  readonly registry: EngineRegistry;
  readonly sessions: RealtimeSessions;
  readonly accounts: Accounts;
  readonly publicBaseUrl: string | undefined;
  readonly workerId: string;
  readonly modelVersionId: (modelName: string) => string;
}

export const SESSION_SOCKET_PATH = "/v1/ws";

/** `GET /v1/session`, the session WebSocket, `GET /v1/voices` and `GET /v1/languages`. */
export async function realtimeRoutes(app: FastifyInstance, options: RealtimeRouteOptions): Promise<void> {
  const { registry, sessions, accounts } = options;

  app.get("/v1/session", async (request) => {
    // Real-time use is not metered yet; a positive balance is still required to start sessions.
    await accounts.requireBalance(await accounts.authenticate(request.headers.authorization, "realtime"));
    if (!sessions.hasRoom()) {
      throw new ApiError(
        503,
        "capacity_exhausted",
        "no session capacity right now; retry after a short backoff",
        {
          "retry-after": "1",
        },
      );
    }
    const metadata = queryMetadata(request.query);
    const { sessionId, token } = await sessions.create(metadata);
    const base = options.publicBaseUrl ?? `${request.protocol}://${request.host}`;
    const wsBase = base.replace(/^http/u, "ws");
    return {
      session_id: sessionId,
      ws_url: `${wsBase}${SESSION_SOCKET_PATH}?token=${encodeURIComponent(token)}`,
      expires_in: 60,
      model_version_id: options.modelVersionId(metadata.modelName ?? "relay-1"),
    };
  });

  app.get(
    SESSION_SOCKET_PATH,
    {
      websocket: true,
      // The URL is the only credential: refuse the upgrade itself (HTTP 401) unless it claims a live session.
      preValidation: async (request, reply) => {
        const token = (request.query as Record<string, unknown>).token;
        const pending = typeof token === "string" ? await sessions.claim(token) : undefined;
        if (!pending) {
          return reply
            .code(401)
            .send(
              errorBody(
                "unauthorized",
                "the session URL is invalid, expired or already used; create a new session",
              ),
            );
        }
        request.pendingSession = pending;
      },
    },
    (socket, request) => {
      serveSessionSocket(socket, request.pendingSession!, {
        registry,
        sessions,
        workerId: options.workerId,
        log: request.log,
      });
    },
  );

  app.get("/v1/voices", async (request) => {
    const { gender } = request.query as Record<string, unknown>;
    if (gender !== undefined && gender !== "female" && gender !== "male") {
      throw new ApiError(400, "invalid_request", 'gender must be "female" or "male"');
    }
    return {
      voices: listVoices(gender).map((voice) => ({
        id: voice.id,
        name: voice.name,
        gender: voice.gender,
        // Beyond the spec: flags the voices `voiceId=auto` will never choose.
        strong_accent: voice.strongAccent,
      })),
    };
  });

  app.get("/v1/languages", async () => registry.report());
}

/** Every query parameter becomes session metadata; a repeated parameter keeps its last value. */
function queryMetadata(query: unknown): Record<string, string> {
  const metadata: Record<string, string> = {};
  for (const [key, value] of Object.entries((query ?? {}) as Record<string, unknown>)) {
    const last = Array.isArray(value) ? value.at(-1) : value;
    if (typeof last === "string") metadata[key] = last;
  }
  return metadata;
}

declare module "fastify" {
  interface FastifyRequest {
    pendingSession?: import("./sessions.js").PendingSession;
  }
}
