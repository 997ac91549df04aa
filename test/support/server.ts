import { serve } from "../../src/serving.js";
import { openTestApp, type InjectAppOptions, type InjectedApp } from "./app.js";
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
 * `options.registry` serves with engines the caller already opened (left open), typically another
 * server's of the same file: a second server that differs only in configuration then costs no
 * engine start.
 */
export async function startServer(
  env: Record<string, string> = {},
  options: InjectAppOptions = {},
): Promise<TestServer> {
  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const handle = await openTestApp(baseUrl, env, options);
  const serving = await serve(handle.app, handle.config, handle.services, {
    port,
    host: "127.0.0.1",
    pollMs: 200,
  });
  return {
    ...handle,
    baseUrl,
    async close() {
      await serving.stop();
      await handle.close();
    },
  };
}
