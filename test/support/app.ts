import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { FastifyInstance, InjectOptions } from "fastify";
import { buildApp, type App } from "../../src/app.js";
import { loadConfig, type Config } from "../../src/config.js";
import { EngineRegistry } from "../../src/engines/routing/registry.js";
import { openServices, type Services } from "../../src/services.js";
import { testEnv } from "./env.js";

/**
 * The base URL an injected app advertises (`PUBLIC_BASE_URL`: in session, room and upload URLs).
 * Nothing listens there: requests go through `app.http.inject()`, never a socket.
 */
export const INJECT_BASE_URL = "http://127.0.0.1:9";

/** A `fetch` lookalike answered by `inject()`: the same request, no socket. */
export type InjectFetch = (route: string | URL, init?: RequestInit) => Promise<Response>;

export interface InjectedApp {
  /** Where the service is reached; for an injected app the advertised `INJECT_BASE_URL`, where nothing listens. */
  readonly baseUrl: string;
  readonly app: App;
  readonly config: Config;
  readonly services: Services;
  readonly registry: EngineRegistry;
  /** Sends a request to the app through `inject()` (a `fetch` lookalike answering a real `Response`). */
  readonly inject: InjectFetch;
  close(): Promise<void>;
}

export interface InjectAppOptions {
  /**
   * Engines to serve with, owned by the caller (left open by `close()`): typically the registry of
   * the file's real server (`TestServer.registry`), or `EngineRegistry.fromEngines(...)` for tests
   * that need no engine. Without one, the test process's shared registry serves the default engines
   * (`workerRegistry`), and other configured engines are opened (and closed).
   */
  readonly registry?: EngineRegistry;
  /** Open engines of its own (and close them), never the shared ones: for tests that break them. */
  readonly ownEngines?: boolean;
}

/**
 * The real app (routes, validation, authentication, rate limits, rooms, dubbing API) over a fresh
 * in-memory SQLite database and a local object store in a temporary directory, answering through
 * Fastify's `inject()` instead of a port: for HTTP-level tests that need no WebSocket, no raw socket
 * and no dubbing worker. Configured like `startServer()` (same API keys), `env` on top.
 */
export async function injectApp(
  env: Record<string, string> = {},
  options: InjectAppOptions = {},
): Promise<InjectedApp> {
  const handle = await openTestApp(INJECT_BASE_URL, { DATABASE_URL: "sqlite::memory:", ...env }, options);
  await handle.app.http.ready();
  return handle;
}

/**
 * The app of a test, not yet serving: the test configuration for `baseUrl` (`env` on top), its
 * services over a fresh data directory, and the app built on them. `close()` shuts the app down,
 * closes the services and removes the directory.
 */
export async function openTestApp(
  baseUrl: string,
  env: Record<string, string>,
  options: InjectAppOptions,
): Promise<InjectedApp> {
  const dataDir = await mkdtemp(path.join(tmpdir(), "relay-test-"));
  const config = loadConfig({ ...testEnv(baseUrl, dataDir), ...env });
  const registry =
    options.registry ?? (options.ownEngines ? undefined : await workerRegistry(config.engines));
  const services = await openServices(config, registry ? { registry } : {});
  const app = await buildApp(config, services).catch(async (error: unknown) => {
    await services.close();
    await rm(dataDir, { recursive: true, force: true });
    throw error;
  });
  return {
    baseUrl: config.publicBaseUrl ?? baseUrl,
    app,
    config,
    services,
    registry: services.registry,
    inject: injectFetch(app.http),
    async close() {
      await app.shutdown();
      await services.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

type EngineConfig = Config["engines"];

/** The engine configuration without its per-data-directory paths (which do not change what is built). */
function engineKey({ modelsDir: _models, voiceMeasurementsDir: _voices, ...engines }: EngineConfig): string {
  return JSON.stringify(engines);
}

let defaultEngineKey: string | undefined;
let shared: Promise<EngineRegistry> | undefined;

/**
 * The registry of the default test engines, built once per test process and shared by every test
 * server and file it runs (the integration tier runs files one after another in a few processes,
 * vitest's `isolate: false`); undefined when `engines` is configured otherwise, which then gets its
 * own. Never closed: the process's exit ends its engines' programs.
 */
async function workerRegistry(engines: EngineConfig): Promise<EngineRegistry | undefined> {
  defaultEngineKey ??= engineKey(loadConfig(testEnv(INJECT_BASE_URL, tmpdir())).engines);
  if (engineKey(engines) !== defaultEngineKey) return undefined;
  shared ??= EngineRegistry.create(engines);
  return shared;
}

/**
 * `fetch` through `http.inject()`: the route (a path, or an absolute URL whose path and query are
 * used) and the init are turned into the request `fetch` would send — header values normalized by
 * `Headers` as fetch does, a string body without a content type sent as `text/plain;charset=UTF-8`
 * — and the answer into a real `Response` (status, headers, body).
 */
export function injectFetch(http: FastifyInstance): InjectFetch {
  return async (route, init = {}) => {
    const url = new URL(route, INJECT_BASE_URL);
    const headers = new Headers(init.headers);
    const body = init.body;
    if (body !== undefined && body !== null && typeof body !== "string" && !(body instanceof Uint8Array)) {
      throw new Error("injectFetch sends string and byte bodies only");
    }
    if (typeof body === "string" && !headers.has("content-type")) {
      headers.set("content-type", "text/plain;charset=UTF-8");
    }
    const answer = await http.inject({
      method: (init.method ?? "GET") as InjectOptions["method"],
      url: `${url.pathname}${url.search}`,
      headers: Object.fromEntries(headers),
      ...(body === undefined || body === null ? {} : { payload: Buffer.from(body) }),
    });
    const responseHeaders = new Headers();
    for (const [name, value] of Object.entries(answer.headers)) {
      if (value === undefined) continue;
      for (const item of Array.isArray(value) ? value : [value]) responseHeaders.append(name, String(item));
    }
    const nullBody = [101, 204, 205, 304].includes(answer.statusCode);
    return new Response(nullBody ? null : answer.rawPayload, {
      status: answer.statusCode,
      statusText: answer.statusMessage,
      headers: responseHeaders,
    });
  };
}
