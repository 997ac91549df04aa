import type { FastifyInstance, FastifyRequest } from "fastify";
import { dubbingRoutes } from "./api/dubbing/routes.js";
import { operationsRoutes } from "./api/operations.js";
import { playgroundRoutes } from "./api/playground.js";
import { accountRateLimit } from "./api/rate-limit.js";
import { createHttpServer } from "./app-http.js";
import { realtimeRoutes } from "./api/realtime/routes.js";
import { RealtimeSessions } from "./api/realtime/sessions.js";
import { roomRoutes } from "./api/rooms/routes.js";
import { Accounts } from "./auth/accounts.js";
import { SessionTokens } from "./auth/session-tokens.js";
import type { Config } from "./config.js";
import { EmbeddedRoomServer } from "./rooms/embedded/room-server.js";
import { createRoomBackend } from "./rooms/index.js";
import { Rooms } from "./rooms/rooms.js";
import { FleetMembership, memberId } from "./fleet/membership.js";
import { RoomDirectory } from "./fleet/room-directory.js";
import { HOST_EVENTS, type HostEvent } from "./engines/kit/model-host/host.js";
import { Metrics } from "./metrics.js";
import { SERVICE_VERSION } from "./version.js";
import { MemoryAccountSlots, RedisAccountSlots } from "./sessions/account-slots.js";
import { MemoryPendingSessions, RedisPendingSessions } from "./sessions/pending.js";
import { uploadGate } from "./dubbing/jobs/retention.js";
import { localStorageRoutes } from "./storage/local-routes.js";
import type { Services } from "./services.js";

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

/**
 * The service on its HTTP server (src/app-http.ts): real-time sessions, fleet membership, rooms,
 * metrics, and the routes of every surface, on the engines, database and store of `services`.
 */
export async function buildApp(config: Config, services: Services, options: BuildOptions = {}): Promise<App> {
  const { registry, db, store, redis } = services;
  const http = await createHttpServer(config, redis, options.logStream);
  let draining = false;
  const keyPrefix = config.redis?.keyPrefix ?? "";
  const { perAccount, revocationCheckMs } = config.liveSessions;
  const startedAt = Date.now();
  const sharedSlots =
    redis &&
    new RedisAccountSlots(redis, keyPrefix, perAccount, memberId({ workerId: config.workerId, startedAt }));
  const sessions = new RealtimeSessions({
    capacity: config.maxSessions,
    tokens: new SessionTokens(config.sessionSecret),
    pending: redis
      ? new RedisPendingSessions(redis, keyPrefix, config.unclaimedSessions)
      : new MemoryPendingSessions(config.unclaimedSessions),
    accountSlots: sharedSlots ?? new MemoryAccountSlots(perAccount),
    revokedAmong: (accountIds) => db.accounts.revokedAccounts(accountIds),
    revocationCheckMs,
    fleetHasRoom: () => fleet.hasRoom(),
    onError: (error, what) => http.log.warn({ err: error }, `${what} failed`),
  });
  // Joining refuses a setup the other processes on this database cannot work with.
  const fleet = await FleetMembership.join({
    db,
    workerId: config.workerId,
    startedAt,
    address: config.advertiseUrl,
    setup: services.sharedSetup,
    load: () => ({ live: sessions.liveCount, capacity: sessions.capacity, draining: sessions.isDraining }),
    log: http.log,
    onBeat: (beat) =>
      void sharedSlots?.heartbeat(beat).then(
        (dropped) => {
          for (const { member, slots } of dropped)
            http.log.warn({ member, slots }, "freed the live-session slots of a process gone from the fleet");
        },
        (error: unknown) => http.log.warn({ err: error }, "live-session slots could not be renewed in Redis"),
      ),
  });
  const roomDirectory = redis ? new RoomDirectory(redis, keyPrefix) : undefined;
  const accounts = new Accounts(db.accounts);
  const engines = registry.engineSummary();
  const publicBaseUrl = (request: FastifyRequest) =>
    config.publicBaseUrl ?? `${request.protocol}://${request.host}`;

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
    maxParticipants: config.rooms.maxParticipants,
    invitationSecret: config.sessionSecret,
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
    hosts: () => registry.hosts(),
  });
  // Model hosts' crashes, missed deadlines and replacements (src/engines/kit/model-host/host.ts).
  const logHostEvent = (event: unknown) => {
    const { host, event: what, message } = event as HostEvent;
    http.log.warn({ host, event: what }, message);
  };
  HOST_EVENTS.subscribe(logHostEvent);
  http.addHook("onClose", async () => void HOST_EVENTS.unsubscribe(logHostEvent));
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
