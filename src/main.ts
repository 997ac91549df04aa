import { mkdir } from "node:fs/promises";
import { buildApp } from "./app.js";
import { ConfigError, loadConfig } from "./config.js";
import { EngineRegistry } from "./engines/registry.js";

/** Process entry: configuration → engines → HTTP/WebSocket server; SIGTERM/SIGINT drain and exit. */
async function main(): Promise<void> {
  const config = loadConfig();
  await mkdir(config.dataDir, { recursive: true });
  const registry = await EngineRegistry.create(config.engines);
  const app = await buildApp(config, registry);
  for (const { id, reason } of registry.unavailable) app.http.log.warn(`engine ${id} unavailable: ${reason}`);
  if (config.apiKeys.length === 0)
    app.http.log.warn("API_KEYS is empty: GET /v1/session will refuse every request");
  await app.http.listen({ port: config.port, host: config.host });

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    app.http.log.info(`${signal}: closing sessions and shutting down`);
    await app.shutdown();
    await registry.close();
    process.exit(0);
  };
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("SIGINT", () => void stop("SIGINT"));
}

main().catch((error: unknown) => {
  console.error(error instanceof ConfigError ? error.message : error);
  process.exit(1);
});
