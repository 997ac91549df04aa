import { buildApp, type App } from "../../src/app.js";
import { loadConfig } from "../../src/config.js";
import { EngineRegistry } from "../../src/engines/registry.js";

export const API_KEY = "test-key";
export const BROKE_KEY = "broke-key";
export const DUBBING_ONLY_KEY = "dubbing-key";

export interface TestServer {
  readonly baseUrl: string;
  readonly app: App;
  readonly registry: EngineRegistry;
  close(): Promise<void>;
}

/** The real service (real engines, real HTTP/WebSocket) on an ephemeral loopback port. */
export async function startServer(env: Record<string, string> = {}): Promise<TestServer> {
  const config = loadConfig({
    PORT: "0",
    HOST: "127.0.0.1",
    LOG_LEVEL: "silent",
    API_KEYS: `${API_KEY},${BROKE_KEY}:0,${DUBBING_ONLY_KEY}:10:dubbing`,
    DATA_DIR: "/tmp/relay-test-data",
    ...env,
  });
  const registry = await EngineRegistry.create(config.engines);
  const app = await buildApp(config, registry);
  const address = await app.http.listen({ port: 0, host: "127.0.0.1" });
  return {
    baseUrl: address,
    app,
    registry,
    async close() {
      await app.shutdown();
      await registry.close();
    },
  };
}
