import { redisUrl } from "./servers.js";

export { redisProblem } from "./servers.js";

/** The run's Redis (test/support/servers.ts: found or started by the global setup). */
export const REDIS_URL = redisUrl();
