import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { buildApp, type App } from "../../src/app.js";
import { loadConfig, type Config } from "../../src/config.js";
import { startDubbingWorkers } from "../../src/dubbing/worker.js";
import type { EngineRegistry } from "../../src/engines/registry.js";
import { openServices, type Services } from "../../src/services.js";
import { freePort } from "./ports.js";

export const API_KEY = "test-key";
export const BROKE_KEY = "broke-key";
export const DUBBING_ONLY_KEY = "dubbing-key";

export interface TestServer {
  readonly baseUrl: string;
  readonly app: App;
  readonly config: Config;
  readonly services: Services;
  readonly registry: EngineRegistry;
  close(): Promise<void>;
}

/**
 * The real service (real engines, database, storage, HTTP/WebSocket) on a free loopback port, with
 * its own data directory (SQLite database and local object store) unless `env` says otherwise.
 * Dubbing workers run in process when `DUBBING_WORKERS` is set above 0 (default 0 here).
 */
export async function startServer(env: Record<string, string> = {}): Promise<TestServer> {
  const port = await freePort();
  const dataDir = await mkdtemp(path.join(tmpdir(), "relay-test-"));
  const config = loadConfig({
    PORT: String(port),
    HOST: "127.0.0.1",
    PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
    LOG_LEVEL: "silent",
    API_KEYS: `${API_KEY},${BROKE_KEY}:0,${DUBBING_ONLY_KEY}:10:dubbing`,
    DATA_DIR: dataDir,
    DUBBING_WORKERS: "0",
    DUBBING_LEASE_SEC: "3",
    ...env,
  });
  const services = await openServices(config);
  const app = await buildApp(config, services);
  await app.http.listen({ port, host: "127.0.0.1" });
  const workers = startDubbingWorkers(config, services, app.http.log, { pollMs: 200 });
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    app,
    config,
    services,
    registry: services.registry,
    async close() {
      await app.shutdown();
      await workers.stop();
      await services.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
