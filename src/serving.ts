import type { App } from "./app.js";
import type { Config } from "./config.js";
import { startRetention } from "./dubbing/jobs/retention.js";
import { startDubbingWorkers } from "./dubbing/jobs/worker.js";
import type { Services } from "./services.js";

/** A serving app and what runs beside it; `stop` ends the workers and the sweep (not the app). */
export interface Serving {
  stop(): Promise<void>;
}

/**
 * The app listening, with the dubbing workers and the retention sweep beside it: what `npm start`
 * runs (src/main.ts), and the tests' servers with it (test/support/server.ts), so both are wired alike.
 */
export async function serve(
  app: App,
  config: Config,
  services: Services,
  options: { readonly port?: number; readonly host?: string; readonly pollMs?: number } = {},
): Promise<Serving> {
  await app.http.listen({ port: options.port ?? config.port, host: options.host ?? config.host });
  const workers = startDubbingWorkers(config, services, app.http.log, {
    ...(options.pollMs !== undefined ? { pollMs: options.pollMs } : {}),
    observer: app.metrics.dubbing,
  });
  const retention = startRetention(config, services, app.http.log);
  return {
    stop: async () => {
      await Promise.all([workers.stop(), retention.stop()]);
    },
  };
}
