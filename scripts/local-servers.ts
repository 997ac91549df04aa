/**
 * The servers the tests, the fleet and the benchmarks run on — PostgreSQL, Redis and LiveKit — used
 * where they already run and started here on loopback where they do not, each with a throw-away
 * data directory that is removed when it stops. Nothing is installed here: `npm run setup` installs
 * Debian's postgresql and redis-server and builds LiveKit's server (scripts/install-livekit.sh).
 *
 * As a command it starts what is not running and keeps it up until Ctrl-C (`npm run servers`).
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createConnection } from "node:net";
import { tmpdir, userInfo } from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import pg from "pg";
import { freePort } from "../test/support/ports.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** A server this module started (or found running: then `stop` leaves it alone). */
export interface LocalServer {
  readonly url: string;
  /** True when this module started it. */
  readonly started: boolean;
  stop(): Promise<void>;
}

const START_TIMEOUT_MS = 30_000;

// --- Reachability -------------------------------------------------------------------------------

/** Why PostgreSQL at `url` cannot be used, or undefined when it can. */
export async function postgresProblemAt(url: string): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3_000 });
  try {
    await client.connect();
    await client.query("SELECT 1");
    return undefined;
  } catch (error) {
    return `PostgreSQL at ${url} is not reachable: ${(error as Error).message}`;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Why Redis at `url` cannot be used, or undefined when it can. */
export async function redisProblemAt(url: string): Promise<string | undefined> {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, connectTimeout: 2_000 });
  redis.on("error", () => undefined);
  try {
    await redis.connect();
    await redis.ping();
    return undefined;
  } catch (error) {
    return `Redis at ${url} is not reachable: ${(error as Error).message}`;
  } finally {
    redis.disconnect();
  }
}

/** Whether something accepts TCP connections on 127.0.0.1:`port`. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

async function waitFor(what: string, child: ChildProcess, ready: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (!(await ready())) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`${what} exited during start-up (${child.exitCode ?? child.signalCode})`);
    }
    if (Date.now() > deadline) throw new Error(`${what} did not start within ${START_TIMEOUT_MS / 1000} s`);
    await sleep(100);
  }
}

/** Stops a child: `signal` (SIGTERM by default), then SIGKILL after 15 s. */
async function stopChild(child: ChildProcess, signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill(signal);
  const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
  await exited;
  clearTimeout(timer);
}

/**
 * Waits for a started server to be `ready`; if it is not, stops it, runs `cleanUp` and throws with
 * what it logged.
 */
async function untilReady(
  what: string,
  child: ChildProcess,
  ready: () => Promise<boolean>,
  log: () => string,
  cleanUp: () => void = () => undefined,
): Promise<void> {
  try {
    await waitFor(what, child, ready);
  } catch (error) {
    await stopChild(child);
    cleanUp();
    throw new Error(`${(error as Error).message}: ${log()}`, { cause: error });
  }
}

/** The log a child wrote, kept in memory (the last 8 KiB) for start-up errors. */
function keepLog(child: ChildProcess): () => string {
  let log = "";
  const add = (chunk: Buffer) => (log = (log + chunk.toString()).slice(-8192));
  child.stdout?.on("data", add);
  child.stderr?.on("data", add);
  return () => log;
}

// --- PostgreSQL ---------------------------------------------------------------------------------

/** The directory of PostgreSQL's server programs (Debian keeps them out of PATH). */
function postgresBinDir(): string | undefined {
  const debian = "/usr/lib/postgresql";
  if (existsSync(debian)) {
    const versions = readdirSync(debian)
      .filter((name) => existsSync(path.join(debian, name, "bin", "postgres")))
      .sort((a, b) => Number(b) - Number(a));
    if (versions[0]) return path.join(debian, versions[0], "bin");
  }
  try {
    const found = execFileSync("sh", ["-c", "command -v postgres"], { encoding: "utf8" }).trim();
    return found ? path.dirname(found) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A throw-away PostgreSQL cluster on a free loopback port (trust authentication, superuser
 * `postgres`).
 */
export async function startPostgres(): Promise<LocalServer> {
  const bin = postgresBinDir();
  if (!bin) {
    throw new Error(
      "PostgreSQL is not installed (Debian: apt-get install postgresql; `npm run setup` does it)",
    );
  }
  const dir = mkdtempSync(path.join(tmpdir(), "relay-postgres-"));
  // As root, the server runs as the `postgres` user (PostgreSQL refuses root), started with that
  // uid directly (not through runuser or su, which would not pass the stop signal on).
  const user: { uid?: number; gid?: number } =
    userInfo().uid === 0
      ? {
          uid: Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim()),
          gid: Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim()),
        }
      : {};
  if (user.uid !== undefined && user.gid !== undefined) chownSync(dir, user.uid, user.gid);
  const data = path.join(dir, "data");
  execFileSync(
    path.join(bin, "initdb"),
    ["-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"],
    { stdio: ["ignore", "ignore", "pipe"], cwd: dir, ...user },
  );
  const port = await freePort();
  const args = [
    "-D",
    data,
    "-p",
    String(port),
    "-c",
    "listen_addresses=127.0.0.1",
    "-c",
    `unix_socket_directories=${dir}`,
    // Throw-away data: no fsync, so tests do not wait on the disk.
    "-c",
    "fsync=off",
    "-c",
    "max_connections=300",
  ];
  const child = spawn(path.join(bin, "postgres"), args, {
    stdio: ["ignore", "pipe", "pipe"],
    cwd: dir,
    ...user,
  });
  const log = keepLog(child);
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const removeData = () => rmSync(dir, { recursive: true, force: true });
  await untilReady(
    "PostgreSQL",
    child,
    async () => (await postgresProblemAt(url)) === undefined,
    log,
    removeData,
  );
  return {
    url,
    started: true,
    async stop() {
      // SIGTERM is PostgreSQL's "smart" shutdown, which waits for clients: SIGINT ("fast") does not.
      await stopChild(child, "SIGINT");
      removeData();
    },
  };
}

// --- Redis --------------------------------------------------------------------------------------

/** A throw-away Redis on a free loopback port (no persistence). */
export async function startRedis(): Promise<LocalServer> {
  const port = await freePort();
  const dir = mkdtempSync(path.join(tmpdir(), "relay-redis-"));
  const child = spawn(
    "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  const log = keepLog(child);
  const spawned = await new Promise<Error | undefined>((resolve) => {
    child.once("spawn", () => resolve(undefined));
    child.once("error", resolve);
  });
  if (spawned) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(
      `redis-server could not be started (${spawned.message}): Debian: apt-get install redis-server; \`npm run setup\` does it`,
    );
  }
  const url = `redis://127.0.0.1:${port}`;
  const removeData = () => rmSync(dir, { recursive: true, force: true });
  await untilReady("Redis", child, async () => (await redisProblemAt(url)) === undefined, log, removeData);
  return {
    url,
    started: true,
    async stop() {
      await stopChild(child);
      removeData();
    },
  };
}

// --- LiveKit ------------------------------------------------------------------------------------

/** The pinned LiveKit server release (scripts/install-livekit.sh builds it). */
export const LIVEKIT_TAG = process.env.RELAY_LIVEKIT_TAG ?? "v1.13.5";

/** Where scripts/install-livekit.sh leaves the binary. */
export function liveKitBinaryPath(): string {
  const cache = process.env.RELAY_CACHE_DIR ?? path.join(process.env.HOME ?? tmpdir(), ".cache", "relay");
  return path.join(cache, "livekit", LIVEKIT_TAG, "livekit-server");
}

/** Why the LiveKit server cannot be started here, or undefined when it can. */
export function liveKitMissing(): string | undefined {
  return existsSync(liveKitBinaryPath())
    ? undefined
    : `LiveKit server ${LIVEKIT_TAG} is not built (${liveKitBinaryPath()} is missing): sh scripts/install-livekit.sh (\`npm run setup\` runs it)`;
}

export interface LiveKitPorts {
  /** Signalling and the room service (HTTP and WebSocket). */
  readonly port: number;
  /** ICE over TCP. */
  readonly tcpPort: number;
  /** ICE over UDP (one port, muxed). */
  readonly udpPort: number;
}

export interface LiveKitServer extends LocalServer {
  readonly apiKey: string;
  readonly apiSecret: string;
  readonly ports: LiveKitPorts;
  /** The server's process id (for CPU accounting). */
  readonly pid: number;
  /** Ends the server with SIGKILL, as a crash would (its rooms vanish with it). */
  kill(): Promise<void>;
  /** What the server has logged so far (the last 8 KiB). */
  log(): string;
}

export interface LiveKitStartOptions {
  /** Fixed ports (to restart a server where it was); free ones by default. */
  readonly ports?: LiveKitPorts;
  readonly apiKey?: string;
  readonly apiSecret?: string;
  /** Extra YAML merged after the loopback settings (as `--config-body` text). */
  readonly extraConfig?: string;
  /**
   * A configuration (YAML text, e.g. a deployment's file) instead of the loopback settings, given
   * as `--config-body`; its keys: LIVEKIT_KEYS in the environment. Its ports are its own.
   */
  readonly config?: string;
  /** LiveKit's development mode (`--dev`: short secrets allowed). */
  readonly development?: boolean;
}

/**
 * The LiveKit configuration for a server on loopback only: WebRTC candidates on 127.0.0.1 (without
 * `enable_loopback_candidate` LiveKit offers none on `lo`), no external IP discovery (no STUN),
 * no TURN, no Redis (one node), and no room made by joining (only the service creates rooms).
 */
export function loopbackLiveKitConfig(ports: LiveKitPorts, keys: Record<string, string>): string {
  return [
    `port: ${ports.port}`,
    "bind_addresses: [127.0.0.1]",
    "rtc:",
    `  tcp_port: ${ports.tcpPort}`,
    `  udp_port: ${ports.udpPort}`,
    "  use_external_ip: false",
    "  node_ip: 127.0.0.1",
    "  enable_loopback_candidate: true",
    "  stun_servers: []",
    "turn:",
    "  enabled: false",
    // Rooms are the service's to create (RoomService/CreateRoom): a token for a room that ended
    // must not open a new, empty one.
    "room:",
    "  auto_create: false",
    "keys:",
    ...Object.entries(keys).map(([key, secret]) => `  ${key}: ${secret}`),
    "logging:",
    "  level: warn",
    "",
  ].join("\n");
}

/** Starts LiveKit's server (the pinned build) on loopback. */
export async function startLiveKit(options: LiveKitStartOptions = {}): Promise<LiveKitServer> {
  const missing = liveKitMissing();
  if (missing) throw new Error(missing);
  const apiKey = options.apiKey ?? "relaytestkey";
  const apiSecret = options.apiSecret ?? "relay-test-livekit-secret-of-40-characters";
  const ports = options.ports ?? {
    port: await freePort(),
    tcpPort: await freePort(),
    udpPort: await freePort(),
  };
  const args = options.config
    ? ["--config-body", options.config, "--bind", "127.0.0.1"]
    : ["--config-body", loopbackLiveKitConfig(ports, { [apiKey]: apiSecret }) + (options.extraConfig ?? "")];
  if (options.development) args.push("--dev");
  const child = spawn(liveKitBinaryPath(), args, {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...(options.config ? { LIVEKIT_KEYS: `${apiKey}: ${apiSecret}` } : {}) },
  });
  const log = keepLog(child);
  const url = `ws://127.0.0.1:${ports.port}`;
  await untilReady("LiveKit server", child, () => listening(ports.port), log);
  return {
    url,
    apiKey,
    apiSecret,
    ports,
    pid: child.pid!,
    started: true,
    log,
    stop: () => stopChild(child),
    async kill() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGKILL");
      await exited;
    },
  };
}

// --- Used where running, started where not ------------------------------------------------------

export const DEFAULT_POSTGRES_URL = "postgres://postgres@127.0.0.1:5432/postgres";
export const DEFAULT_REDIS_URL = "redis://127.0.0.1:6379";

/** PostgreSQL at `url` (default 127.0.0.1:5432) when it answers, else a throw-away one started here. */
export async function ensurePostgres(url = DEFAULT_POSTGRES_URL): Promise<LocalServer> {
  if ((await postgresProblemAt(url)) === undefined)
    return { url, started: false, stop: async () => undefined };
  return startPostgres();
}

/** Redis at `url` (default 127.0.0.1:6379) when it answers, else a throw-away one started here. */
export async function ensureRedis(url = DEFAULT_REDIS_URL): Promise<LocalServer> {
  if ((await redisProblemAt(url)) === undefined) return { url, started: false, stop: async () => undefined };
  return startRedis();
}

/** The LiveKit server people start by hand (docs/livekit.md): LiveKit's usual ports and dev keys. */
const HAND_STARTED_LIVEKIT: LiveKitStartOptions = {
  ports: { port: 7880, tcpPort: 7881, udpPort: 7882 },
  apiKey: "devkey",
  apiSecret: "secret",
};

if (import.meta.url === `file://${process.argv[1]}`) {
  // npm run servers -- [postgres] [redis] [livekit]   (all three when none is named)
  const named = process.argv.slice(2);
  const wanted = (name: string) => named.length === 0 || named.includes(name);
  const servers: LocalServer[] = [];
  const stopAll = async () => {
    for (const server of servers.reverse()) await server.stop().catch(() => undefined);
    process.exit(0);
  };
  process.once("SIGINT", () => void stopAll());
  process.once("SIGTERM", () => void stopAll());
  const note = (server: LocalServer) =>
    server.started ? " (started here; its data goes at Ctrl-C)" : " (already running)";
  try {
    if (wanted("postgres")) {
      const postgres = await ensurePostgres(process.env.DATABASE_URL);
      servers.push(postgres);
      console.log(`PostgreSQL: ${postgres.url}${note(postgres)}`);
    }
    if (wanted("redis")) {
      const redis = await ensureRedis(process.env.REDIS_URL);
      servers.push(redis);
      console.log(`Redis:      ${redis.url}${note(redis)}`);
    }
    if (wanted("livekit")) {
      const livekit = await startLiveKit({ ...HAND_STARTED_LIVEKIT, development: true });
      servers.push(livekit);
      console.log(`LiveKit:    ${livekit.url} (API key ${livekit.apiKey}, secret ${livekit.apiSecret})`);
    }
  } catch (error) {
    console.error(`servers: ${(error as Error).message}`);
    await stopAll();
  }
  console.log(`Ctrl-C stops what was started here (in ${ROOT})`);
}
