import type { FastifyInstance, FastifyRequest } from "fastify";
import type { Account } from "../db/types.js";
import { ApiError } from "./errors.js";

/**
 * The per-account request limit the spec puts on room sessions, upload URLs and job creation: one
 * budget per account shared by all three endpoints. Built on @fastify/rate-limit's limiter so its
 * store (and a Redis store, if one is ever configured) is the single home of the counters.
 *
 * A route calls it after authenticating (the budget belongs to the account, however the
 * `Authorization` header is spelt) and after validating the request: a request refused with 400 has
 * cost nothing and does not use up the budget, so a client fixing its request is not locked out.
 */
export type AccountRateLimit = (request: FastifyRequest, account: Account) => Promise<void>;

export function accountRateLimit(app: FastifyInstance, perMinute: number): AccountRateLimit {
  const accountOf = new WeakMap<FastifyRequest, string>();
  const check = app.createRateLimit({
    max: perMinute,
    timeWindow: 60_000,
    keyGenerator: (request: FastifyRequest) => `account:${accountOf.get(request)}`,
  });
  return async (request, account) => {
    accountOf.set(request, account.id);
    const limit = await check(request);
    if (limit.isAllowed || !limit.isExceeded) return;
    throw new ApiError(
      429,
      "rate_limited",
      `more than ${limit.max} requests a minute for this account (room sessions, upload URLs and job ` +
        `creation share the limit); retry in ${limit.ttlInSeconds} s`,
      {
        "retry-after": String(limit.ttlInSeconds),
        "x-ratelimit-limit": String(limit.max),
        "x-ratelimit-remaining": "0",
        "x-ratelimit-reset": String(limit.ttlInSeconds),
      },
    );
  };
}
