/**
 * The container and service files, checked without Docker (it cannot run on these machines): the
 * Dockerfile by dockerfile-utils' linter plus the properties we promise (multi-stage, non-root,
 * health check, the embedded engines' packages); compose.yaml by `docker-compose config` (Debian's
 * docker-compose, installed by .ci/run) and by reading it; the systemd unit by reading it.
 */
import { execFile } from "node:child_process";
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { validate } from "dockerfile-utils";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { PROJECT_ROOT } from "../support/run-script.js";

const run = promisify(execFile);
const read = (file: string) => readFile(path.join(PROJECT_ROOT, file), "utf8");

async function hasDockerCompose(): Promise<boolean> {
  return run("docker-compose", ["version"]).then(
    () => true,
    () => false,
  );
}
const composeMissing = !(await hasDockerCompose());
if (composeMissing) console.warn("docker-compose is not installed: compose.yaml checked by reading only");

describe("Dockerfile", () => {
  it("passes the linter with no error or warning", async () => {
    // LSP severities: 1 error, 2 warning.
    const problems = validate(await read("Dockerfile")).filter((problem) => (problem.severity ?? 1) <= 2);
    expect(problems.map((problem) => `${problem.range.start.line + 1}: ${problem.message}`)).toEqual([]);
  });

  it("builds in one stage and runs in another, as a non-root user with a health check and the embedded engines", async () => {
    const dockerfile = await read("Dockerfile");
    expect(dockerfile.match(/^FROM /gmu)).toHaveLength(2);
    expect(dockerfile).toMatch(/^USER node$/mu);
    expect(dockerfile).toMatch(/^HEALTHCHECK .*\n.*\/readyz/mu);
    const setup = await read("scripts/setup.sh");
    // The runtime image installs the engines' packages that setup installs (less the toolchain).
    const setupPackages = /PACKAGES="([^"]+)"/u
      .exec(setup)![1]!
      .split(/\s+|\\/u)
      .filter(Boolean);
    for (const pkg of setupPackages.filter(
      (name) => !["build-essential", "cmake", "ccache", "nginx-light"].includes(name),
    ))
      expect(dockerfile).toContain(pkg);
    // Everything the build copies exists.
    for (const [, source] of dockerfile.matchAll(/^COPY (?!--from)(\S+)/gmu)) {
      await expect(
        readFile(path.join(PROJECT_ROOT, source!)).catch((error: NodeJS.ErrnoException) => error.code),
      ).resolves.not.toBe("ENOENT");
    }
  });
});

describe("compose.yaml", () => {
  it.skipIf(composeMissing)("is valid for docker-compose and requires the secrets to be set", async () => {
    const env = { ...process.env, API_KEYS: "key", SESSION_SECRET: "s".repeat(32) };
    const { stdout } = await run("docker-compose", ["-f", "compose.yaml", "config"], {
      cwd: PROJECT_ROOT,
      env,
    });
    expect(parse(stdout).services.relay.environment.SESSION_SECRET).toBe("s".repeat(32));
    const withoutSecret = { ...env, SESSION_SECRET: "" };
    delete (withoutSecret as Record<string, string | undefined>).SESSION_SECRET;
    await expect(
      run("docker-compose", ["-f", "compose.yaml", "config"], { cwd: PROJECT_ROOT, env: withoutSecret }),
    ).rejects.toMatchObject({ stderr: expect.stringMatching(/set SESSION_SECRET/u) });
  });

  it("runs the service on PostgreSQL, Redis, MinIO and LiveKit", async () => {
    const compose = parse(await read("compose.yaml")) as {
      services: Record<string, { image?: string; environment?: Record<string, string>; volumes?: string[] }>;
    };
    expect(Object.keys(compose.services).sort()).toEqual([
      "livekit",
      "minio",
      "minio-bucket",
      "postgres",
      "redis",
      "relay",
    ]);
    const env = compose.services.relay!.environment!;
    expect(env.DATABASE_URL).toMatch(/^postgres:\/\/.*@postgres:5432\//u);
    expect(env.REDIS_URL).toBe("redis://redis:6379");
    expect(env).toMatchObject({
      STORAGE_BACKEND: "s3",
      S3_ENDPOINT: "http://minio:9000",
      LIVEKIT_URL: "ws://livekit:7880",
    });
    await expect(read("deploy/livekit.yaml")).resolves.toMatch(/port: 7880/u);
  });
});

describe("deploy/relay.service", () => {
  it("starts the build as an unprivileged user and stops it with SIGTERM", async () => {
    const unit = await read("deploy/relay.service");
    for (const line of [
      "User=relay",
      "ExecStart=/usr/bin/node dist/main.js",
      "KillSignal=SIGTERM",
      "Restart=on-failure",
      "NoNewPrivileges=true",
    ])
      expect(unit).toContain(line);
  });
});

describe("npm files", () => {
  it("package-lock.json is complete: npm resolves the same lock from package.json, so setup's npm ci leaves it unchanged", async () => {
    // npm install rewrites a lock file that lacks other platforms' optional packages; `npm ci`
    // refuses one that disagrees with package.json. Resolving into a copy shows both at once.
    const dir = await mkdtemp(path.join(tmpdir(), "relay-lock-"));
    try {
      // The workspaces' manifests too: their own dependencies (the LiveKit Agents plugin's) are in the lock.
      const workspaces = (await readdir(path.join(PROJECT_ROOT, "packages"))).map((name) =>
        path.join("packages", name, "package.json"),
      );
      for (const file of ["package.json", "package-lock.json", ...workspaces]) {
        await mkdir(path.dirname(path.join(dir, file)), { recursive: true });
        await copyFile(path.join(PROJECT_ROOT, file), path.join(dir, file));
      }
      await run("npm", ["install", "--package-lock-only", "--ignore-scripts", "--no-audit", "--no-fund"], {
        cwd: dir,
        env: { ...process.env, ONNXRUNTIME_NODE_INSTALL: "skip" },
      });
      expect(await readFile(path.join(dir, "package-lock.json"), "utf8")).toBe(
        await read("package-lock.json"),
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    expect(await read("scripts/setup.sh")).toMatch(/^\s*ONNXRUNTIME_NODE_INSTALL=skip npm ci /mu);
  });

  it("npm reads the project's configuration without a warning (npx relay … prints only its own output)", async () => {
    const { stderr } = await run("npm", ["config", "list"], { cwd: PROJECT_ROOT });
    expect(stderr).not.toMatch(/warn/iu);
  });
});

describe("scripts/setup.sh", () => {
  it("finds the default models of each kind in the built catalogues (the list setup pulls is not empty)", async () => {
    const setup = await read("scripts/setup.sh");
    const lister = /models=\$\(node -e "([^"]+)"\)/u.exec(setup)![1]!;
    const calls = [...setup.matchAll(/^pull_defaults "[^"]+" (\S+) (\S+) /gmu)];
    expect(calls.length).toBeGreaterThanOrEqual(2);
    for (const [, family, exported] of calls) {
      // The same command setup runs, against the dist/ the test run built.
      const { stdout } = await run(
        "node",
        ["-e", lister.replaceAll("$2", family!).replaceAll("$3", exported!)],
        {
          cwd: PROJECT_ROOT,
        },
      );
      expect(stdout.trim(), `${family} ${exported}`).not.toBe("");
    }
  });
});
