import { pino } from "pino";
import { buildApp } from "./app.js";
import { ConfigError, loadConfig, type Config } from "./config.js";
import { recognitionTier, type RecognitionTier } from "./engines/routing/languages.js";
import type { VoiceCloneMode } from "./engines/routing/registry.js";
import { openServices } from "./services.js";
import { serve } from "./serving.js";
import { SERVICE_VERSION } from "./version.js";

/**
 * Process entry: configuration → engines, database, storage → HTTP/WebSocket server and dubbing
 * workers. SIGTERM/SIGINT close every session with 1001 and, at the same time, stop the workers (a
 * job in progress is handed back at once, without counting as an attempt, and the next worker
 * resumes it), then exit.
 */
async function main(): Promise<void> {
  const config = loadConfig();
  const services = await openServices(config);
  const logOutput = pino.destination({ dest: 1, sync: false });
  const app = await buildApp(config, services, { logStream: logOutput });
  for (const { kind, id, version, detail } of services.registry.engines())
    app.http.log.info(`engine ${kind} ${id} ${version}${detail ? `: ${detail}` : ""}`);
  for (const { id, reason } of services.registry.unavailable)
    app.http.log.warn(`engine ${id} unavailable: ${reason}`);
  const noKeys = config.apiKeys.length === 0 && (await services.db.accounts.listKeys()).length === 0;
  if (noKeys)
    app.http.log.warn(
      "no API key can open a session: API_KEYS is empty and the database holds no key. " +
        "Start with `API_KEYS=dev-key npm start`, or create one with `npx relay keys create`",
    );
  const serving = await serve(app, config, services);
  // Through the log's own (asynchronous) stream, so that it comes after the lines logged so far.
  logOutput.write(banner(config, recognitionTier(services.registry), services.registry.voiceClone));
  void services.registry.warmUp();

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    app.http.log.info(`${signal}: closing sessions and shutting down`);
    await Promise.all([app.shutdown(), serving.stop()]);
    await services.close();
    process.exit(0);
  };
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("SIGINT", () => void stop("SIGINT"));
}

/** What clone voices (rooms' default) speak with, and how to get the speaker's own voice. */
const CLONE_VOICES: Readonly<Record<VoiceCloneMode, string>> = {
  "tone-color": "Clone voices: each speaker's own voice (OpenVoice tone colour)",
  library:
    "Clone voices: the nearest library voice — `npx relay models pull tone-color`, then restart, for each speaker's own voice",
  off: "Clone voices: the nearest library voice (VOICE_CLONE=off)",
};

/**
 * The human lines after the JSON log: where to point a browser, what recognition this start
 * offers (the tier decides most of the quality, and why the playground's "From" lists what it
 * does), and what rooms' default clone voices speak with.
 */
function banner(config: Config, tier: RecognitionTier, clone: VoiceCloneMode): string {
  const local = ["0.0.0.0", "::", "127.0.0.1", "::1"].includes(config.host);
  const host = local ? "localhost" : config.host.includes(":") ? `[${config.host}]` : config.host;
  const origin = config.publicBaseUrl ?? `http://${host}:${config.port}`;
  return (
    `relay ${SERVICE_VERSION} is listening on ${origin} (playground: ${origin}/, translated meetings: ${origin}/meeting, API reference: ${origin}/docs)\n` +
    `${tier.summary}${tier.upgrade ? ` — ${tier.upgrade}` : ""}\n` +
    `${CLONE_VOICES[clone]}\n`
  );
}

main().catch((error: unknown) => {
  console.error(error instanceof ConfigError ? error.message : error);
  process.exit(1);
});
