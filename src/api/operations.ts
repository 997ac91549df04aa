import { voiceCloneReport } from "./languages-report.js";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { Database } from "../db/types.js";
import type { EngineRegistry } from "../engines/routing/registry.js";
import type { FleetMembership } from "../fleet/membership.js";
import type { Metrics } from "../metrics.js";
import type { Rooms } from "../rooms/rooms.js";
import { SERVICE_VERSION } from "../version.js";
import type { RealtimeSessions } from "./realtime/sessions.js";

export interface OperationsRouteOptions {
  readonly registry: EngineRegistry;
  readonly db: Database;
  readonly sessions: RealtimeSessions;
  readonly rooms: Rooms;
  readonly fleet: FleetMembership;
  readonly metrics: Metrics;
  readonly workerId: string;
  /** Whether the process is shutting down. */
  readonly draining: () => boolean;
}

const OPERATIONS = ["operations"];

/**
 * An engine's failure as anonymous callers see it: file paths cut to their names, control
 * characters out (a model's metadata may carry anything), at most 300 characters. The whole
 * message goes to the log at start, and `relay models verify` details a pulled model's problem.
 */
export function publicReason(reason: string): string {
  return reason
    .replace(/(?:[A-Za-z]:)?(?:\/[^\s/:'"`]+)+\/([^\s/:'"`]+)/gu, "$1")
    .replace(/\p{Cc}/gu, " ")
    .slice(0, 300);
}

const unavailableEngines = (registry: EngineRegistry) =>
  registry.unavailable.map(({ id, reason }) => ({ id, reason: publicReason(reason) }));

/** `/livez`, `/readyz`, `/healthz` and `/metrics`: for supervisors, load balancers and Prometheus. */
export async function operationsRoutes(app: FastifyInstance, options: OperationsRouteOptions): Promise<void> {
  const { registry, db, sessions, rooms, fleet, metrics, workerId } = options;

  app.get(
    "/metrics",
    {
      schema: {
        tags: OPERATIONS,
        summary: "Prometheus metrics of this process (text exposition format)",
      },
    },
    async (_request, reply) => {
      reply.type(metrics.registry.contentType);
      return metrics.registry.metrics();
    },
  );

  // Liveness: the process answers (its event loop runs). Restart it when this fails.
  app.get(
    "/livez",
    {
      schema: {
        tags: OPERATIONS,
        summary: "Liveness: 200 while the process answers",
        response: { 200: z.object({ status: z.literal("ok"), worker_id: z.string() }) },
      },
    },
    async () => ({ status: "ok" as const, worker_id: workerId }),
  );

  // Readiness: send it traffic. Not while draining for shutdown, with engines that failed to load,
  // or without its database.
  const readiness = z.object({
    status: z.enum(["ready", "not_ready"]),
    worker_id: z.string(),
    problems: z.array(z.string()),
  });
  app.get(
    "/readyz",
    {
      schema: {
        tags: OPERATIONS,
        summary: "Readiness: 503 while shutting down, with engines missing or without the database",
        response: { 200: readiness, 503: readiness },
      },
    },
    async (_request, reply) => {
      const problems: string[] = [];
      if (options.draining()) problems.push("shutting down");
      for (const { id, reason } of unavailableEngines(registry))
        problems.push(`engine ${id} unavailable: ${reason}`);
      await db.jobs.countByStatus().catch((error: unknown) => {
        problems.push(`database unreachable: ${(error as Error).message}`);
      });
      reply.code(problems.length === 0 ? 200 : 503);
      return { status: problems.length === 0 ? "ready" : "not_ready", worker_id: workerId, problems };
    },
  );

  app.get(
    "/healthz",
    {
      schema: {
        tags: OPERATIONS,
        summary: "The process's state: version, load, fleet, rooms and engines",
        response: {
          200: z.object({
            status: z.enum(["ok", "degraded"]),
            version: z.string(),
            worker_id: z.string(),
            sessions: z.object({ live: z.number().int(), capacity: z.number().int() }),
            fleet: z.object({
              processes: z.number().int().describe("Live processes this one knows of"),
              session_room: z.boolean().describe("Whether any of them can take a new session"),
            }),
            rooms: z.object({ open: z.number().int(), backend: z.string() }),
            engines: z.array(z.looseObject({ kind: z.string(), id: z.string() })),
            translation_pairs: z
              .array(
                z.object({
                  from: z.string(),
                  to: z.string(),
                  engines: z.array(z.string()),
                  via: z.string().nullable(),
                }),
              )
              .describe("Every translation direction served, by which engines, and through which pivot"),
            unavailable_engines: z.array(z.looseObject({ id: z.string(), reason: z.string() })),
            voice_clone: z
              .object({ mode: z.enum(["tone-color", "library", "off"]), engine: z.string().nullable() })
              .describe(
                "What clone voices speak with: each speaker's own voice (tone-color), the nearest library voice (library: no tone colour model), or off (VOICE_CLONE=off)",
              ),
            model_hosts: z
              .array(
                z.object({
                  host: z.string(),
                  state: z.enum(["up", "idle", "failing"]),
                  failures: z.number().int(),
                  restarts: z.object({ crash: z.number(), timeout: z.number(), memory: z.number() }),
                  rss_mib: z.number(),
                }),
              )
              .describe(
                "The processes engines run models in: failing (restarts backing off; its work goes to the next engine) makes the status degraded",
              ),
          }),
        },
      },
    },
    async () => ({
      status: registry.healthy() ? ("ok" as const) : ("degraded" as const),
      version: SERVICE_VERSION,
      worker_id: workerId,
      sessions: { live: sessions.liveCount, capacity: sessions.capacity },
      fleet: { processes: fleet.size, session_room: fleet.hasRoom() },
      rooms: { open: rooms.count, backend: rooms.backend.kind },
      engines: registry.engines(),
      translation_pairs: registry.translationPairs(),
      unavailable_engines: unavailableEngines(registry),
      voice_clone: voiceCloneReport(registry),
      model_hosts: registry.hosts().map(({ host, state, failures, restarts, rssBytes }) => ({
        host,
        state,
        failures,
        restarts,
        rss_mib: Math.round(rssBytes / 2 ** 20),
      })),
    }),
  );
}
