import rateLimit from "@fastify/rate-limit";
import websocket from "@fastify/websocket";
import Fastify, { type FastifyInstance, type FastifyRequest } from "fastify";
import { serializerCompiler, validatorCompiler } from "fastify-type-provider-zod";
import { dubbingRoutes } from "./api/dubbing/routes.js";
import { frameworkErrorOptions, registerErrorHandling } from "./api/errors.js";
import { accountRateLimit } from "./api/rate-limit.js";
import { realtimeRoutes } from "./api/realtime/routes.js";
import { RealtimeSessions } from "./api/realtime/sessions.js";
import { roomRoutes } from "./api/rooms/routes.js";
import { Accounts } from "./auth/accounts.js";
import { SessionTokens } from "./auth/session-tokens.js";
import type { Config } from "./config.js";
import { EmbeddedRoomServer } from "./rooms/embedded/room-server.js";
import { createRoomBackend } from "./rooms/index.js";
import { Rooms } from "./rooms/rooms.js";
import { localStorageRoutes } from "./storage/local.js";
import type { Services } from "./services.js";
import { SERVICE_VERSION } from "./version.js";

/** Largest WebSocket message accepted; bigger ones close the socket with 1009. */
export const MAX_MESSAGE_BYTES = 64 * 1024;

/** Re-exported while src/dubbing/worker.ts still imports it from here; its home is src/services.ts. */

export interface App {
  readonly http: FastifyInstance;
  readonly sessions: RealtimeSessions;
  readonly rooms: Rooms;
  /**
   * Closes every session with 1001 and every room, then the server; engines, database and store
   * stay with their owner.
   */
  shutdown(): Promise<void>;
}

export async function buildApp(config: Config, services: Services): Promise<App> {
  const { registry, db, store } = services;
  const http = Fastify({
    logger: { level: config.logLevel },
    bodyLimit: 1 << 20,
    forceCloseConnections: true,
    ...frameworkErrorOptions,
  });
  registerErrorHandling(http);
  // Route schemas are zod schemas: requests are validated (and defaults applied) before a handler runs.
  http.setValidatorCompiler(validatorCompiler);
  http.setSerializerCompiler(serializerCompiler);
  const sessions = new RealtimeSessions(
    config.maxSessions,
    new SessionTokens(config.sessionSecret),
    config.unclaimedSessions,
  );
  const accounts = new Accounts(db.accounts);
  const engines = registry.engineSummary();
  const publicBaseUrl = (request: FastifyRequest) =>
    config.publicBaseUrl ?? `${request.protocol}://${request.host}`;

  await http.register(rateLimit, { global: false });
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
  const limitPerAccount = accountRateLimit(http, config.rateLimitPerMinute);
  const rooms = new Rooms(await createRoomBackend(config.rooms), {
    registry,
    sessions,
    log: http.log,
    maxLifetimeMs: config.rooms.maxLifetimeMs,
    emptyTimeoutMs: config.rooms.emptyTimeoutMs,
    emptyPerAccount: config.rooms.emptyPerAccount,
    departureTimeoutMs: config.rooms.departureTimeoutMs,
  });
  if (rooms.backend instanceof EmbeddedRoomServer) await http.register(rooms.backend.routes);
  await http.register(roomRoutes, { rooms, accounts, registry, publicBaseUrl, rateLimit: limitPerAccount });
  await http.register(realtimeRoutes, {
    registry,
    sessions,
    accounts,
    publicBaseUrl: config.publicBaseUrl,
    workerId: config.workerId,
    modelVersionId: (modelName) => `${modelName}/${SERVICE_VERSION}/${engines}`,
  });
  await http.register(dubbingRoutes, {
    db,
    store,
    accounts,
    registry,
    publicBaseUrl,
    maxFileBytes: config.dubbing.maxFileBytes,
    maxDurationSec: config.dubbing.maxDurationSec,
    workDir: config.dubbing.workDir,
    rateLimit: limitPerAccount,
  });
  if (store.kind === "local")
    await http.register(localStorageRoutes, { store, maxBytes: config.dubbing.maxFileBytes });
  http.get("/healthz", async () => ({
    status: registry.unavailable.length === 0 ? "ok" : "degraded",
    version: SERVICE_VERSION,
    worker_id: config.workerId,
    sessions: { live: sessions.liveCount, capacity: config.maxSessions },
    rooms: { open: rooms.count, backend: rooms.backend.kind },
    engines: registry.engines(),
    unavailable_engines: registry.unavailable,
  }));

  return {
    http,
    sessions,
    rooms,
    async shutdown() {
      sessions.drain();
      await rooms.close();
      await http.close();
    },
  };
}
