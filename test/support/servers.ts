import {
  DEFAULT_POSTGRES_URL,
  DEFAULT_REDIS_URL,
  ensurePostgres,
  ensureRedis,
  liveKitMissing,
  postgresProblemAt,
  redisProblemAt,
  startLiveKit,
  type LocalServer,
} from "../../scripts/local-servers.js";

/**
 * The servers tests use besides the service: PostgreSQL, Redis and LiveKit. The global setup
 * (test/support/global-setup.ts) finds or starts them once per run, on loopback, and hands their
 * addresses to the test processes in the environment:
 * - `RELAY_TEST_POSTGRES_URL`, `RELAY_TEST_REDIS_URL`: used as given when set; otherwise the
 *   development defaults (127.0.0.1:5432 and :6379) when they answer; otherwise throw-away servers
 *   started for the run (scripts/local-servers.ts).
 * - `RELAY_TEST_LIVEKIT_URL` with `_KEY` and `_SECRET`: a LiveKit server as given; otherwise the
 *   pinned build (scripts/install-livekit.sh) started for the run.
 * Where one cannot be had, `RELAY_TEST_<NAME>_PROBLEM` says why, and the tests that need it skip
 * with that reason, unless `RELAY_TEST_REQUIRE_SERVERS=1` (set by .ci/run): then they fail.
 */

type Name = "POSTGRES" | "REDIS" | "LIVEKIT";

const problemVariable = (name: Name) => `RELAY_TEST_${name}_PROBLEM`;

async function bring(
  name: Name,
  stops: LocalServer[],
  start: () => Promise<LocalServer & Partial<{ apiKey: string; apiSecret: string }>>,
): Promise<void> {
  try {
    const server = await start();
    stops.push(server);
    process.env[`RELAY_TEST_${name}_URL`] = server.url;
    if (server.apiKey) process.env.RELAY_TEST_LIVEKIT_KEY = server.apiKey;
    if (server.apiSecret) process.env.RELAY_TEST_LIVEKIT_SECRET = server.apiSecret;
    if (server.started)
      console.log(`global setup: started ${name.toLowerCase()} at ${server.url} for this run`);
  } catch (error) {
    process.env[problemVariable(name)] = (error as Error).message;
    console.warn(`global setup: no ${name.toLowerCase()} for this run: ${(error as Error).message}`);
  }
}

/** Finds or starts the servers (once per run); returns what stops those it started. */
export async function startTestServers(): Promise<() => Promise<void>> {
  const started: LocalServer[] = [];
  await Promise.all([
    bring("POSTGRES", started, () =>
      process.env.RELAY_TEST_POSTGRES_URL
        ? alreadyRunning(process.env.RELAY_TEST_POSTGRES_URL)
        : ensurePostgres(DEFAULT_POSTGRES_URL),
    ),
    bring("REDIS", started, () =>
      process.env.RELAY_TEST_REDIS_URL
        ? alreadyRunning(process.env.RELAY_TEST_REDIS_URL)
        : ensureRedis(DEFAULT_REDIS_URL),
    ),
    bring("LIVEKIT", started, async () =>
      process.env.RELAY_TEST_LIVEKIT_URL
        ? {
            ...(await alreadyRunning(process.env.RELAY_TEST_LIVEKIT_URL)),
            apiKey: process.env.RELAY_TEST_LIVEKIT_KEY ?? "devkey",
            apiSecret: process.env.RELAY_TEST_LIVEKIT_SECRET ?? "secret",
          }
        : startLiveKit(),
    ),
  ]);
  return async () => {
    await Promise.all(started.map((server) => server.stop().catch(() => undefined)));
  };
}

/** A server the environment names: used as it is, never stopped here. */
async function alreadyRunning(url: string): Promise<LocalServer> {
  return { url, started: false, stop: async () => undefined };
}

/**
 * A test's verdict on a missing server: the reason (the test skips with it), or, with
 * `RELAY_TEST_REQUIRE_SERVERS=1`, an error (the test fails).
 */
export function required(problem: string | undefined): string | undefined {
  if (problem !== undefined && process.env.RELAY_TEST_REQUIRE_SERVERS === "1") {
    throw new Error(
      `RELAY_TEST_REQUIRE_SERVERS=1 and a server or tool this test needs is missing: ${problem}`,
    );
  }
  return problem;
}

/** The run's PostgreSQL (an admin URL: superuser, database `postgres`). */
export const postgresUrl = (): string => process.env.RELAY_TEST_POSTGRES_URL ?? DEFAULT_POSTGRES_URL;
/** The run's Redis. */
export const redisUrl = (): string => process.env.RELAY_TEST_REDIS_URL ?? DEFAULT_REDIS_URL;

/** Why PostgreSQL cannot be used by the tests, or undefined when it can (see `required`). */
export async function postgresProblem(): Promise<string | undefined> {
  return required(process.env[problemVariable("POSTGRES")] ?? (await postgresProblemAt(postgresUrl())));
}

/** Why Redis cannot be used by the tests, or undefined when it can (see `required`). */
export async function redisProblem(): Promise<string | undefined> {
  return required(process.env[problemVariable("REDIS")] ?? (await redisProblemAt(redisUrl())));
}

/** The run's LiveKit server. */
export interface TestLiveKit {
  readonly url: string;
  readonly apiKey: string;
  readonly apiSecret: string;
}

/** The run's LiveKit server, or why there is none (see `required`). */
export function testLiveKit(): TestLiveKit | { problem: string } {
  const url = process.env.RELAY_TEST_LIVEKIT_URL;
  const problem =
    process.env[problemVariable("LIVEKIT")] ??
    (url ? undefined : (liveKitMissing() ?? "no LiveKit server was started for this run"));
  if (required(problem) !== undefined || !url) return { problem: problem! };
  return {
    url,
    apiKey: process.env.RELAY_TEST_LIVEKIT_KEY ?? "devkey",
    apiSecret: process.env.RELAY_TEST_LIVEKIT_SECRET ?? "secret",
  };
}

/** Why the LiveKit server binary cannot be started by a test of its own, or undefined (see `required`). */
export function liveKitBinaryProblem(): string | undefined {
  return required(liveKitMissing());
}
