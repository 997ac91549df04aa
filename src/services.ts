import { randomBytes } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import type { Config } from "./config.js";
import { openDatabase } from "./db/index.js";
import type { Database } from "./db/types.js";
import { EngineRegistry } from "./engines/routing/registry.js";
import { Redis } from "ioredis";
import { describeSharedSetup, type SharedSetup } from "./fleet/membership.js";
import { createObjectStore } from "./storage/index.js";
import type { ObjectStore } from "./storage/types.js";

/** What the service runs on: the HTTP app and the dubbing workers are built on top of these. */
export interface Services {
  readonly registry: EngineRegistry;
  readonly db: Database;
  readonly store: ObjectStore;
  /** The fleet's shared Redis, when configured (`REDIS_URL`). */
  readonly redis: Redis | undefined;
  /** What the other processes of a fleet must share with this one. */
  readonly sharedSetup: SharedSetup;
}

/**
 * Opens everything the service runs on — engines, database, object store — and provisions the
 * configured API keys. The HTTP app and the dubbing workers are built on top of these.
 */
export async function openServices(
  config: Config,
  options: {
    /** Engines the caller opened (an embedder's, or a test file's shared set): used as they are and left open. */
    readonly registry?: EngineRegistry;
  } = {},
): Promise<Services & { close(): Promise<void> }> {
  await mkdir(config.dataDir, { recursive: true });
  const [registry, db, redis] = await Promise.all([
    options.registry ?? EngineRegistry.create(config.engines),
    openDatabase(config.databaseUrl),
    config.redis ? openRedis(config.redis.url) : undefined,
  ]);
  for (const { key, balanceUsd, entitlements } of config.apiKeys) {
    await db.accounts.ensureKey(key, { balanceUsd, entitlements });
  }
  const storage = config.storage;
  const storageSecret =
    storage.kind === "local"
      ? (storage.secret ?? (await persistentSecret(path.join(config.dataDir, "storage.secret"))))
      : undefined;
  const store = await createObjectStore(
    storage.kind === "local"
      ? {
          kind: "local",
          dir: storage.dir,
          publicBaseUrl:
            config.publicBaseUrl ??
            `http://${config.host === "0.0.0.0" ? "127.0.0.1" : config.host}:${config.port}`,
          secret: storageSecret!,
        }
      : storage,
  );
  const sharedSetup = await describeSharedSetup(config, storageSecret);
  return {
    registry,
    db,
    store,
    redis,
    sharedSetup,
    async close() {
      await Promise.allSettled([
        options.registry ? undefined : registry.close(),
        db.close(),
        store.close(),
        redis?.quit(),
      ]);
    },
  };
}

/**
 * Connects to Redis and checks it answers, so a wrong `REDIS_URL` stops the start with the reason
 * instead of failing requests later. Commands wait for a lost connection to come back (ioredis's
 * offline queue) rather than failing at once.
 */
async function openRedis(url: string): Promise<Redis> {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 2, connectTimeout: 5_000 });
  try {
    await redis.connect();
    await redis.ping();
  } catch (error) {
    redis.disconnect();
    throw new Error(`cannot use REDIS_URL: ${(error as Error).message}`, { cause: error });
  }
  return redis;
}

/**
 * Presigned download URLs live 48 hours, so the key signing them must survive restarts: when none
 * is configured, one is generated once and kept in DATA_DIR.
 */
async function persistentSecret(file: string): Promise<string> {
  try {
    return (await readFile(file, "utf8")).trim();
  } catch {
    const secret = randomBytes(32).toString("hex");
    await writeFile(file, secret, { mode: 0o600, flag: "wx" }).catch(() => undefined);
    return (await readFile(file, "utf8")).trim();
  }
}
