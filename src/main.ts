import { buildApp } from "./app.js";
import { ConfigError, loadConfig } from "./config.js";
import { startRetention } from "./dubbing/retention.js";
import { startDubbingWorkers } from "./dubbing/worker.js";
import { openServices } from "./services.js";

/**
 * Process entry: configuration → engines, database, storage → HTTP/WebSocket server and dubbing
 * workers. SIGTERM/SIGINT close every session with 1001 and, at the same time, stop the workers (a
 * job in progress is handed back at once, without counting as an attempt, and the next worker
 * resumes it), then exit.
 */
async function main(): Promise<void> {
  const config = loadConfig();
  const services = await openServices(config);
  const app = await buildApp(config, services);
  for (const { kind, id, version, detail } of services.registry.engines())
    app.http.log.info(`engine ${kind} ${id} ${version}${detail ? `: ${detail}` : ""}`);
  for (const { id, reason } of services.registry.unavailable)
    app.http.log.warn(`engine ${id} unavailable: ${reason}`);
  if (config.apiKeys.length === 0)
    app.http.log.warn("API_KEYS is empty: only keys already in the database work");
  await app.http.listen({ port: config.port, host: config.host });
  void services.registry.warmUp();
  const workers = startDubbingWorkers(config, services, app.http.log, { observer: app.metrics.dubbing });
  const retention = startRetention(config, services, app.http.log);

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    app.http.log.info(`${signal}: closing sessions and shutting down`);
    await Promise.all([app.shutdown(), workers.stop(), retention.stop()]);
    await services.close();
    process.exit(0);
  };
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("SIGINT", () => void stop("SIGINT"));
}

main().catch((error: unknown) => {
  console.error(error instanceof ConfigError ? error.message : error);
  process.exit(1);
});
