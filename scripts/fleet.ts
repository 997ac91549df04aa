/**
 * Runs the service as a fleet on this machine: N processes behind nginx (round-robin, WebSockets
 * passed through), sharing PostgreSQL, Redis, an S3-compatible store and one data directory (the
 * dubbing work folders). The integration test (test/system/fleet-nginx.test.ts) and the
 * benchmark (scripts/bench-fleet.ts) start their fleets with it; as a command it starts one and
 * keeps it up until Ctrl-C:
 *
 *   npm run fleet -- [--processes 3] [--port 8080] [--balance least_conn|round-robin]
 *
 * PostgreSQL: DATABASE_URL (default: a new database relay_fleet_<random>, dropped at exit, on
 * POSTGRES_ADMIN_URL, by default postgres://postgres@127.0.0.1:5432). Redis: REDIS_URL (default
 * redis://127.0.0.1:6379). Where those defaults do not answer, a throw-away PostgreSQL or Redis is
 * started on loopback for the fleet's life (scripts/local-servers.ts). Storage: S3_ENDPOINT/S3_BUCKET and credentials when given, otherwise an
 * s3rver (the npm package the tests use) in this process. Other variables pass to every process.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import pg from "pg";
import { ensurePostgres, ensureRedis } from "./local-servers.js";
import { freePort } from "../test/support/ports.js";
import { PROJECT_ROOT } from "../test/support/run-script.js";
import { S3_CREDENTIALS, startS3 } from "../test/support/s3.js";

export interface FleetProcess {
  readonly workerId: string;
  /** The process's own address (bypassing nginx). */
  readonly baseUrl: string;
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
}

export interface Fleet {
  /** nginx: where clients connect. */
  readonly url: string;
  readonly processes: readonly FleetProcess[];
  readonly databaseUrl: string;
  readonly dataDir: string;
  close(): Promise<void>;
}

export interface FleetOptions {
  readonly processes: number;
  /** nginx's port (default: a free one). */
  readonly port?: number;
  /** Added to every process's environment. */
  readonly env?: Readonly<Record<string, string>>;
  /** PostgreSQL to share (default: a new database on `postgresAdminUrl`, dropped by close()). */
  readonly databaseUrl?: string;
  /** The server a new database is made on (default POSTGRES_ADMIN_URL, else 127.0.0.1:5432, else one started here). */
  readonly postgresAdminUrl?: string;
  /** Redis (default REDIS_URL, else 127.0.0.1:6379, else one started here). */
  readonly redisUrl?: string;
  /** Passed to each process's stderr (default: inherit). */
  readonly stderr?: "inherit" | "ignore";
  /** Run the build (`dist/main.js`, as `npm start` does) instead of the sources through tsx (the default). */
  readonly built?: boolean;
  /** nginx's balancing: round-robin (its default) or least_conn (what docs/deployment.md recommends for WebSockets). */
  readonly balance?: "round-robin" | "least_conn";
}

export async function launchFleet(options: FleetOptions): Promise<Fleet> {
  const cleanups: (() => Promise<unknown>)[] = [];
  const cleanUp = async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
  };
  try {
    const dir = await mkdtemp(path.join(tmpdir(), "relay-fleet-"));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const databaseUrl =
      options.databaseUrl ??
      (await createDatabase(options.postgresAdminUrl ?? process.env.POSTGRES_ADMIN_URL, cleanups));
    const redis = await ensureRedis(options.redisUrl ?? process.env.REDIS_URL);
    cleanups.push(() => redis.stop());
    const storage = await sharedStorage(cleanups);
    const port = options.port ?? (await freePort());
    const url = `http://127.0.0.1:${port}`;
    const ports = await Promise.all(Array.from({ length: options.processes }, () => freePort()));
    const dataDir = path.join(dir, "data");
    const env: Record<string, string> = {
      DATABASE_URL: databaseUrl,
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: `relay-fleet-${randomBytes(4).toString("hex")}:`,
      SESSION_SECRET: randomBytes(32).toString("hex"),
      PUBLIC_BASE_URL: url,
      DATA_DIR: dataDir,
      HOST: "127.0.0.1",
      LOG_LEVEL: "warn",
      ...storage,
      ...options.env,
    };
    // One after the other: each checks the setup of those already running.
    const processes: FleetProcess[] = [];
    for (const [index, processPort] of ports.entries()) {
      const started = await startProcess(`fleet-${index + 1}`, processPort, env, options);
      processes.push(started);
      cleanups.push(() => stopProcess(started));
    }
    await startNginx(path.join(dir, "nginx"), port, ports, options.balance ?? "round-robin", cleanups);
    return {
      url,
      processes,
      databaseUrl,
      dataDir,
      close: cleanUp,
    };
  } catch (error) {
    await cleanUp();
    throw error;
  }
}

async function createDatabase(
  adminUrl: string | undefined,
  cleanups: (() => Promise<unknown>)[],
): Promise<string> {
  const server = await ensurePostgres(adminUrl);
  cleanups.push(() => server.stop());
  const name = `relay_fleet_${randomBytes(6).toString("hex")}`;
  const admin = async (statement: string) => {
    const client = new pg.Client({ connectionString: server.url });
    await client.connect();
    try {
      await client.query(statement);
    } finally {
      await client.end();
    }
  };
  await admin(`CREATE DATABASE ${name}`);
  cleanups.push(() => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
  const url = new URL(server.url);
  url.pathname = `/${name}`;
  return url.toString();
}

/** The configured S3-compatible store, or an s3rver started here. */
async function sharedStorage(cleanups: (() => Promise<unknown>)[]): Promise<Record<string, string>> {
  if (process.env.S3_ENDPOINT && process.env.S3_BUCKET) return { STORAGE_BACKEND: "s3" };
  const bucket = "relay-fleet";
  const s3 = await startS3(bucket);
  cleanups.push(() => s3.close());
  return {
    STORAGE_BACKEND: "s3",
    S3_BUCKET: bucket,
    S3_ENDPOINT: s3.endpoint,
    S3_FORCE_PATH_STYLE: "true",
    S3_ACCESS_KEY_ID: S3_CREDENTIALS.accessKeyId,
    S3_SECRET_ACCESS_KEY: S3_CREDENTIALS.secretAccessKey,
  };
}

async function startProcess(
  workerId: string,
  port: number,
  env: Record<string, string>,
  options: FleetOptions,
): Promise<FleetProcess> {
  const baseUrl = `http://127.0.0.1:${port}`;
  const entry = options.built ? ["dist/main.js"] : ["--import", "tsx", "src/main.ts"];
  const child = spawn(process.execPath, entry, {
    cwd: PROJECT_ROOT,
    env: { ...process.env, ...env, PORT: String(port), WORKER_ID: workerId },
    stdio: ["ignore", "ignore", options.stderr ?? "inherit"],
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  for (;;) {
    if ((await fetch(`${baseUrl}/readyz`).catch(() => undefined))?.status === 200)
      return { workerId, baseUrl, child, exited };
    if (child.exitCode !== null) throw new Error(`${workerId} exited during start-up`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function stopProcess({ child, exited }: FleetProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
  await exited;
  clearTimeout(timer);
}

/**
 * nginx in front: round-robin over the processes, WebSocket upgrades passed through, long-lived
 * sockets not timed out, uploads streamed. A process that refuses connections (killed) is skipped
 * for the next request.
 */
export function nginxConfig(
  prefix: string,
  port: number,
  upstreams: readonly number[],
  balance: "round-robin" | "least_conn" = "round-robin",
): string {
  const temp = (name: string) => `${name}_temp_path ${path.join(prefix, name)};`;
  // As root, nginx's workers would run as nobody, who cannot enter this process's temporary directory.
  const user = process.getuid?.() === 0 ? "user root;\n" : "";
  return `${user}worker_processes 1;
daemon off;
pid ${path.join(prefix, "nginx.pid")};
error_log ${path.join(prefix, "error.log")} warn;
events { worker_connections 4096; }
http {
  access_log off;
  ${["client_body", "proxy", "fastcgi", "uwsgi", "scgi"].map(temp).join("\n  ")}
  map $http_upgrade $connection_upgrade { default upgrade; "" close; }
  upstream relay {
    ${balance === "least_conn" ? "least_conn;\n    " : ""}${upstreams.map((upstream) => `server 127.0.0.1:${upstream} max_fails=1 fail_timeout=10s;`).join("\n    ")}
  }
  server {
    listen 127.0.0.1:${port};
    client_max_body_size 0;
    location / {
      proxy_pass http://relay;
      proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $connection_upgrade;
      proxy_set_header Host $http_host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_read_timeout 3600s;
      proxy_send_timeout 3600s;
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_next_upstream error timeout;
    }
  }
}
`;
}

async function startNginx(
  prefix: string,
  port: number,
  upstreams: readonly number[],
  balance: "round-robin" | "least_conn",
  cleanups: (() => Promise<unknown>)[],
): Promise<void> {
  await mkdir(prefix, { recursive: true });
  const conf = path.join(prefix, "nginx.conf");
  await writeFile(conf, nginxConfig(prefix, port, upstreams, balance));
  const nginx = spawn("nginx", ["-p", prefix, "-c", conf], { stdio: ["ignore", "ignore", "inherit"] });
  const exited = new Promise((resolve) => nginx.once("exit", resolve));
  nginx.once("error", () => undefined);
  cleanups.push(async () => {
    nginx.kill("SIGQUIT");
    await exited;
  });
  for (;;) {
    if ((await fetch(`http://127.0.0.1:${port}/livez`).catch(() => undefined))?.ok) return;
    if (nginx.exitCode !== null) throw new Error(`nginx exited (see ${path.join(prefix, "error.log")})`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: {
      processes: { type: "string", default: "3" },
      port: { type: "string" },
      balance: { type: "string", default: "least_conn" },
    },
  });
  const fleet = await launchFleet({
    processes: Number(values.processes),
    ...(values.port ? { port: Number(values.port) } : {}),
    ...(process.env.DATABASE_URL ? { databaseUrl: process.env.DATABASE_URL } : {}),
    built: true,
    balance: values.balance === "round-robin" ? "round-robin" : "least_conn",
  });
  console.log(
    `relay fleet: ${fleet.url} (nginx) → ${fleet.processes.map((p) => `${p.workerId} ${p.baseUrl}`).join(", ")}`,
  );
  console.log("Ctrl-C stops it");
  const stop = () => void fleet.close().then(() => process.exit(0));
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
}
