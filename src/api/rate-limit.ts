import { createHash } from "node:crypto";
import type { FastifyInstance, FastifyRequest, preHandlerAsyncHookHandler } from "fastify";
import { ApiError } from "./errors.js";

/**
 * The per-API-key request limit the spec puts on room sessions, upload URLs and job creation: one
 * budget per key shared by all three endpoints. Built on @fastify/rate-limit's limiter so its
 * store (and a Redis store, if one is ever configured) is the single home of the counters.
 */
export function perKeyRateLimit(app: FastifyInstance, perMinute: number): preHandlerAsyncHookHandler {
  const check = app.createRateLimit({
    max: perMinute,
    timeWindow: 60_000,
    // A hash of the bearer credential, so the limit applies before the key is even looked up.
    keyGenerator: (request: FastifyRequest) =>
      createHash("sha256")
        .update(request.headers.authorization ?? request.ip)
        .digest("hex"),
  });
  return async (request, reply) => {
    const limit = await check(request);
    if (limit.isAllowed) return;
    reply.headers({
      "x-ratelimit-limit": String(limit.max),
      "x-ratelimit-remaining": String(limit.remaining),
      "x-ratelimit-reset": String(limit.ttlInSeconds),
    });
    if (limit.isExceeded) {
      throw new ApiError(
        429,
        "rate_limited",
        `more than ${limit.max} requests a minute for this API key (room sessions, upload URLs and job ` +
          `creation share the limit); retry in ${limit.ttlInSeconds} s`,
        { "retry-after": String(limit.ttlInSeconds) },
      );
    }
  };
}
