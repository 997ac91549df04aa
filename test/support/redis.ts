import { Redis } from "ioredis";

/** The development Redis (127.0.0.1:6379), also there in CI. */
export const REDIS_URL = process.env.RELAY_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

/** The reason Redis cannot be used, or undefined when it can. */
export async function redisProblem(): Promise<string | undefined> {
  const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0, connectTimeout: 2_000 });
  try {
    await redis.connect();
    await redis.ping();
    return undefined;
  } catch (error) {
    return `Redis at ${REDIS_URL} is not reachable: ${(error as Error).message}`;
  } finally {
    redis.disconnect();
  }
}
