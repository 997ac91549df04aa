import rateLimit from "@fastify/rate-limit";
import websocket from "@fastify/websocket";
import { randomUUID } from "node:crypto";
import Fastify, { LogController, type FastifyInstance, type FastifyRequest } from "fastify";
import { serializerCompiler, validatorCompiler } from "fastify-type-provider-zod";
import { dubbingRoutes } from "./api/dubbing/routes.js";
import { frameworkErrorOptions, registerErrorHandling } from "./api/errors.js";
import { registerApiReference } from "./api/openapi.js";
import { operationsRoutes } from "./api/operations.js";
import { playgroundRoutes } from "./api/playground.js";
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
import { FleetMembership } from "./fleet/membership.js";
import { RoomDirectory } from "./fleet/room-directory.js";
import { Metrics } from "./metrics.js";
import { SERVICE_VERSION } from "./version.js";
import { MemoryPendingSessions, RedisPendingSessions } from "./sessions/pending.js";
import { localStorageRoutes } from "./storage/local.js";
import type { Services } from "./services.js";

/** An `x-request-id` the service adopts: letters, digits and `._:-`, at most 128 characters. */
const REQUEST_ID = /^[\w.:-]{1,128}$/u;

/** Largest WebSocket message accepted; bigger ones close the socket with 1009. */
export const MAX_MESSAGE_BYTES = 64 * 1024;

export interface App {
  readonly http: FastifyInstance;
  readonly sessions: RealtimeSessions;
  readonly rooms: Rooms;
  readonly metrics: Metrics;
  readonly fleet: FleetMembership;
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
    // A caller's (or load balancer's) `x-request-id` is kept when it is a plain token, so one id
    // follows a request through the fleet's logs; otherwise the service makes one. Either way it is
    // echoed on the response and names the request in every log line.
    requestIdHeader: false,
    genReqId: (request) => {
      const given = request.headers["x-request-id"];
      return typeof given === "string" && REQUEST_ID.test(given) ? given : randomUUID();
    },
    logController: new LogController({ requestIdLogLabel: "request_id" }),
    ...frameworkErrorOptions,
  });
  http.addHook("onRequest", async (request, reply) => {
    reply.header("x-request-id", request.id);
  });
  registerErrorHandling(http);
  // Route schemas are zod schemas: requests are validated (and defaults applied) before a handler runs.
  http.setValidatorCompiler(validatorCompiler);
  http.setSerializerCompiler(serializerCompiler);
  let draining = false;
  const { redis } = services;
  const keyPrefix = config.redis?.keyPrefix ?? "";
  const sessions = new RealtimeSessions(
    config.maxSessions,
    new SessionTokens(config.sessionSecret),
    redis
      ? new RedisPendingSessions(redis, keyPrefix, config.unclaimedSessions)
      : new MemoryPendingSessions(config.unclaimedSessions),
    () => fleet.hasRoom(),
  );
  // Joining refuses a setup the other processes on this database cannot work with.
  const fleet = await FleetMembership.join({
    db,
    workerId: config.workerId,
    address: config.advertiseUrl,
    setup: services.sharedSetup,
    load: () => ({ live: sessions.liveCount, capacity: sessions.capacity, draining: sessions.isDraining }),
    log: http.log,
  });
  const roomDirectory = redis ? new RoomDirectory(redis, keyPrefix) : undefined;
  const accounts = new Accounts(db.accounts);
  const engines = registry.engineSummary();
  const publicBaseUrl = (request: FastifyRequest) =>
    config.publicBaseUrl ?? `${request.protocol}://${request.host}`;

  // With Redis the counters are the fleet's, so a key's budget is the same whichever process
  // counts a request; without it they are this process's.
  await http.register(rateLimit, {
    global: false,
    ...(redis ? { redis, nameSpace: `${keyPrefix}rate:` } : {}),
  });
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
  // Before the routes: the reference collects them as they are added.
  await registerApiReference(http);
  const limitPerAccount = accountRateLimit(http, config.rateLimitPerMinute);
  const hostOf = roomDirectory
    ? async (roomName: string) => {
        const location = await roomDirectory.lookup(roomName);
        return location && fleet.addressOf(location.workerId);
      }
    : undefined;
  const rooms = new Rooms(await createRoomBackend(config.rooms, hostOf), {
    registry,
    sessions,
    log: http.log,
    maxLifetimeMs: config.rooms.maxLifetimeMs,
    emptyTimeoutMs: config.rooms.emptyTimeoutMs,
    emptyPerAccount: config.rooms.emptyPerAccount,
    departureTimeoutMs: config.rooms.departureTimeoutMs,
    ...(roomDirectory ? { fleet: { directory: roomDirectory, workerId: config.workerId } } : {}),
  });
  const metrics = new Metrics({
    sessions,
    rooms,
    jobsByStatus: () => db.jobs.countByStatus(),
    circuits: () => registry.circuits(),
  });
  http.addHook("onResponse", async (request, reply) => {
    // The route pattern, not the URL: ids in paths would make a series per request.
    const route = request.routeOptions.url ?? "unmatched";
    metrics.httpRequests.inc({ method: request.method, route, status: String(reply.statusCode) });
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
    observer: {
      closed: (code) => metrics.sessionsClosed.inc({ code: String(code) }),
      pipeline: metrics.pipeline,
    },
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
  await http.register(playgroundRoutes);
  await http.register(operationsRoutes, {
    registry,
    db,
    sessions,
    rooms,
    fleet,
    metrics,
    workerId: config.workerId,
    draining: () => draining,
  });

  return {
    http,
    sessions,
    rooms,
    metrics,
    fleet,
    async shutdown() {
      draining = true;
      sessions.drain();
      await fleet.leave();
      await rooms.close();
      await http.close();
    },
  };
}
