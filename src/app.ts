import websocket from "@fastify/websocket";
import Fastify, { type FastifyInstance } from "fastify";
import { registerErrorHandling } from "./api/errors.js";
import { realtimeRoutes } from "./api/realtime/routes.js";
import { RealtimeSessions } from "./api/realtime/sessions.js";
import { ApiKeyStore } from "./auth/api-keys.js";
import { SessionTokens } from "./auth/session-tokens.js";
import type { Config } from "./config.js";
import type { EngineRegistry } from "./engines/registry.js";
import { SERVICE_VERSION } from "./version.js";

/** Largest WebSocket message accepted; bigger ones close the socket with 1009. */
export const MAX_MESSAGE_BYTES = 64 * 1024;

export interface App {
  readonly http: FastifyInstance;
  readonly sessions: RealtimeSessions;
  /** Closes every session with 1001, then the server; engines stay with their owner. */
  shutdown(): Promise<void>;
}

export async function buildApp(config: Config, registry: EngineRegistry): Promise<App> {
  const http = Fastify({
    logger: { level: config.logLevel },
    bodyLimit: 1 << 20,
    forceCloseConnections: true,
  });
  registerErrorHandling(http);
  const sessions = new RealtimeSessions(config.maxSessions, new SessionTokens(config.sessionSecret));
  const apiKeys = new ApiKeyStore(config.apiKeys);
  const engines = registry.engineSummary();

  await http.register(websocket, {
    // UTF-8 is validated per message by the session (an error frame, not a dropped connection).
    options: { maxPayload: MAX_MESSAGE_BYTES, skipUTF8Validation: true },
    errorHandler(error, socket, request) {
      // Protocol violations (oversized frames: 1009) are closed by ws itself with the right code.
      if ((error as { code?: string }).code?.startsWith("WS_ERR_")) {
        request.log.debug({ err: error }, "client broke the WebSocket protocol");
        return;
      }
      request.log.error({ err: error }, "session handler failed");
      socket.close(4500, "internal error");
    },
  });
  await http.register(realtimeRoutes, {
    registry,
    sessions,
    apiKeys,
    publicBaseUrl: config.publicBaseUrl,
    workerId: config.workerId,
    modelVersionId: (modelName) => `${modelName}/${SERVICE_VERSION}/${engines}`,
  });
  http.get("/healthz", async () => ({
    status: registry.unavailable.length === 0 ? "ok" : "degraded",
    version: SERVICE_VERSION,
    worker_id: config.workerId,
    sessions: { live: sessions.liveCount, capacity: config.maxSessions },
    unavailable_engines: registry.unavailable,
  }));

  return {
    http,
    sessions,
    async shutdown() {
      sessions.drain();
      await http.close();
    },
  };
}
