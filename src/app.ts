import rateLimit from "@fastify/rate-limit";
import websocket from "@fastify/websocket";
import Fastify, { type FastifyInstance, type FastifyRequest } from "fastify";
import { serializerCompiler, validatorCompiler } from "fastify-type-provider-zod";
import { dubbingRoutes } from "./api/dubbing/routes.js";
import { frameworkErrorOptions, limitHeaderBytes, registerErrorHandling } from "./api/errors.js";
import { registerApiReference } from "./api/openapi.js";
import { operationsRoutes } from "./api/operations.js";
import { playgroundRoutes } from "./api/playground.js";
import { accountRateLimit } from "./api/rate-limit.js";
import { requestIds, trustedProxies } from "./api/proxies.js";
import { RequestLog, requestLogSerializers } from "./api/request-log.js";
import { browserOriginsOf, registerSecurityHeaders } from "./api/security-headers.js";
import { CONTEXT_QUERY_BYTES, realtimeRoutes } from "./api/realtime/routes.js";
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
import { MemoryAccountSlots, RedisAccountSlots } from "./sessions/account-slots.js";
import { MemoryPendingSessions, RedisPendingSessions } from "./sessions/pending.js";
import { uploadGate } from "./dubbing/retention.js";
import { localStorageRoutes } from "./storage/local.js";
import type { Services } from "./services.js";

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

export interface BuildOptions {
  /** Where log lines go instead of stdout (tests read them). */
  readonly logStream?: { write(line: string): void };
}

export async function buildApp(config: Config, services: Services, options: BuildOptions = {}): Promise<App> {
  const { registry, db, store } = services;
  const isTrustedProxy = trustedProxies(config.http.trustedProxies);
  const http = Fastify({
    logger: {
      level: config.logLevel,
      serializers: requestLogSerializers,
      ...(options.logStream ? { stream: options.logStream } : {}),
    },
    bodyLimit: 1 << 20,
    // Node's parser holds requests to the largest bound (GET /v1/session's); limitHeaderBytes, the rest.
    http: { maxHeaderSize: config.http.maxHeaderBytes + CONTEXT_QUERY_BYTES },
    forceCloseConnections: true,
    trustProxy: (address: string) => isTrustedProxy(address),
    // The request id is echoed on the response and names the request in every log line.
    requestIdHeader: false,
    genReqId: requestIds(isTrustedProxy),
    logController: new RequestLog(config.http.requestLogPerSec),
    ...frameworkErrorOptions,
  });
  http.addHook("onRequest", async (request, reply) => {
    reply.header("x-request-id", request.id);
  });
  limitHeaderBytes(http, config.http.maxHeaderBytes);
  await registerSecurityHeaders(http, browserOriginsOf(config.publicBaseUrl, config.storage));
  registerErrorHandling(http);
  // Route schemas are zod schemas: requests are validated (and defaults applied) before a handler runs.
  http.setValidatorCompiler(validatorCompiler);
  http.setSerializerCompiler(serializerCompiler);
  let draining = false;
  const { redis } = services;
  const keyPrefix = config.redis?.keyPrefix ?? "";
  const { perAccount, revocationCheckMs } = config.liveSessions;
  const sessions = new RealtimeSessions({
    capacity: config.maxSessions,
    tokens: new SessionTokens(config.sessionSecret),
    pending: redis
      ? new RedisPendingSessions(redis, keyPrefix, config.unclaimedSessions)
      : new MemoryPendingSessions(config.unclaimedSessions),
    accountSlots: redis
      ? new RedisAccountSlots(redis, keyPrefix, perAccount, undefined, (error) =>
          http.log.warn({ err: error }, "live-session leases could not be renewed in Redis"),
        )
      : new MemoryAccountSlots(perAccount),
    revokedAmong: (accountIds) => db.accounts.revokedAccounts(accountIds),
    revocationCheckMs,
    fleetHasRoom: () => fleet.hasRoom(),
    onError: (error, what) => http.log.warn({ err: error }, `${what} failed`),
  });
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
    ...(roomDirectory
      ? {
          fleet: {
            directory: roomDirectory,
            workerId: config.workerId,
            addressOf: (workerId: string) => fleet.addressOf(workerId),
          },
        }
      : {}),
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
    timeouts: { idleMs: config.liveSessions.idleTimeoutMs, maxDurationMs: config.liveSessions.maxDurationMs },
    observer: {
      closed: (code, by) => metrics.sessionClosed(code, by),
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
    jobsPerAccount: config.dubbing.jobsPerAccount,
    sourceProbeMs: config.dubbing.sourceProbeMs,
    allowPrivateSources: config.dubbing.allowPrivateSources,
    rateLimit: limitPerAccount,
    retention: config.retention,
  });
  if (store.kind === "local") {
    await http.register(localStorageRoutes, {
      store,
      maxBytes: config.dubbing.maxFileBytes,
      uploads: uploadGate(db, store),
    });
  }
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
      await sessions.close();
    },
  };
}
