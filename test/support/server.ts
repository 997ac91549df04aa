import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { buildApp } from "../../src/app.js";
import { loadConfig } from "../../src/config.js";
import { startDubbingWorkers } from "../../src/dubbing/worker.js";
import type { EngineRegistry } from "../../src/engines/registry.js";
import { openServices } from "../../src/services.js";
import { injectFetch, type InjectedApp } from "./app.js";
import { testEnv } from "./env.js";
import { freePort } from "./ports.js";

export { API_KEY, BROKE_KEY, DUBBING_ONLY_KEY } from "./env.js";

/**
 * The same handle as an injected app; `baseUrl` is the port the service listens on, and `inject`
 * serves the HTTP-only tests of a file that needs the port for others.
 */
export type TestServer = InjectedApp;

/**
 * The real service (real engines, database, storage, HTTP/WebSocket) on a free loopback port, with
 * its own data directory (SQLite database and local object store) unless `env` says otherwise.
 * Dubbing workers run in process when `DUBBING_WORKERS` is set above 0 (default 0 here).
 * `options.registry` serves with engines the caller already opened (and closes), typically another
 * server's of the same file: a second server that differs only in configuration then costs no
 * engine start.
 */
export async function startServer(
  env: Record<string, string> = {},
  options: { readonly registry?: EngineRegistry } = {},
): Promise<TestServer> {
  const port = await freePort();
  const dataDir = await mkdtemp(path.join(tmpdir(), "relay-test-"));
  const config = loadConfig({ ...testEnv(`http://127.0.0.1:${port}`, dataDir), ...env });
  const services = await openServices(config, options);
  const app = await buildApp(config, services);
  await app.http.listen({ port, host: "127.0.0.1" });
  const workers = startDubbingWorkers(config, services, app.http.log, { pollMs: 200 });
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    app,
    config,
    services,
    registry: services.registry,
    inject: injectFetch(app.http),
    async close() {
      await app.shutdown();
      await workers.stop();
      await services.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
