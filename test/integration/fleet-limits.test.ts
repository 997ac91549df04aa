/**
 * Two service instances sharing PostgreSQL and Redis (`REDIS_URL`), as processes of one fleet do:
 * a key's request budget is counted once across them, whichever takes each request.
 */
import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, postgresProblem } from "../support/postgres.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";

const REDIS_URL = process.env.RELAY_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

async function redisProblem(): Promise<string | undefined> {
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

const problem = (await postgresProblem()) ?? (await redisProblem());
if (problem) console.warn(`fleet-limits tests skipped: ${problem}`);

let database: { url: string; drop(): Promise<void> };
let servers: TestServer[] = [];
const prefix = `relay-test-${randomUUID()}:`;

beforeAll(async () => {
  if (problem) return;
  database = await createTestDatabase();
  const env = {
    DATABASE_URL: database.url,
    REDIS_URL,
    REDIS_KEY_PREFIX: prefix,
    RATE_LIMIT_PER_MINUTE: "3",
    SESSION_SECRET: "fleet-test-secret-of-at-least-32-characters",
  };
  const first = await startServer({ ...env, WORKER_ID: "fleet-a" });
  servers = [
    first,
    await startServer({ ...env, WORKER_ID: "fleet-b" }, { registry: first.services.registry }),
  ];
}, 60_000);
afterAll(async () => {
  for (const server of servers.reverse()) await server.close();
  if (!problem) {
    const redis = new Redis(REDIS_URL);
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
    await database.drop();
  }
});

async function uploadUrl(server: TestServer): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(new URL("/api/dubbing/upload-url", server.baseUrl), {
    method: "POST",
    headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" },
    body: JSON.stringify({ filename: "talk.mp4", content_type: "video/mp4" }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

describe.skipIf(problem !== undefined)("a fleet's request limits", () => {
  it("counts one key's requests once across the processes", async () => {
    const [a, b] = servers as [TestServer, TestServer];
    // 3 a minute for the key: two on one process and one on the other use it up…
    expect((await uploadUrl(a)).status).toBe(200);
    expect((await uploadUrl(b)).status).toBe(200);
    expect((await uploadUrl(a)).status).toBe(200);
    // …so the next is refused whichever process takes it.
    for (const server of [b, a]) {
      const refused = await uploadUrl(server);
      expect(refused.status).toBe(429);
      expect(refused.body).toMatchObject({ error: { code: "rate_limited" } });
    }
  });
});
