import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pythonEnvDir, pythonEnvProblem } from "../support/python-clients.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";

/**
 * schemathesis (PyPI, pinned in test/python/fuzz-requirements.txt, installed by
 * `sh scripts/setup-python-clients.sh fuzz`) generates requests from relay's own OpenAPI document
 * (`GET /openapi.json`) for every operation, valid and invalid, with the API key, and checks each
 * answer against the document. Bounded: a fixed number of test cases per operation and phase and a
 * fixed seed, so a run is the same requests every time and takes seconds.
 */
const problem = pythonEnvProblem("fuzz");
if (problem) console.warn(`schemathesis not run: ${problem}`);

/** Test cases per operation in each phase (coverage, fuzzing, stateful). */
const MAX_EXAMPLES = 20;
const SEED = 48;
const CHECKS = [
  "not_a_server_error",
  "status_code_conformance",
  "content_type_conformance",
  "response_headers_conformance",
  "response_schema_conformance",
  // A route documented with the API key must refuse a request without one.
  "ignored_auth",
];

interface Run {
  readonly code: number | null;
  readonly output: string;
}

function schemathesis(args: string[], cwd: string): Promise<Run> {
  const child = spawn(path.join(pythonEnvDir("fuzz"), "bin/schemathesis"), args, {
    cwd,
    env: { ...process.env, NO_COLOR: "1", PYTHONUNBUFFERED: "1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const keep = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-60_000));
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  // A hang guard, not a speed limit: the run takes seconds.
  const timer = setTimeout(() => child.kill("SIGKILL"), 300_000);
  return new Promise((resolve) =>
    child.once("close", (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    }),
  );
}

describe.skipIf(problem)("schemathesis against relay's OpenAPI document", () => {
  let server: TestServer;
  let dir: string;

  beforeAll(async () => {
    // Limits far above what the run sends, so that generated requests reach the routes' logic
    // rather than stopping at a 429.
    const plenty = "100000";
    server = await startServer({
      RATE_LIMIT_PER_MINUTE: plenty,
      UNCLAIMED_SESSIONS_PER_ACCOUNT: plenty,
      UNCLAIMED_SESSIONS_MAX: plenty,
      DUBBING_JOBS_PER_ACCOUNT: plenty,
      ROOMS_EMPTY_PER_ACCOUNT: plenty,
    });
    // Its working directory: no configuration file is picked up, and nothing is left behind.
    dir = await mkdtemp(path.join(tmpdir(), "relay-api-fuzz-"));
  });
  afterAll(async () => {
    await server?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("answers every operation with no 5xx and only what the document describes: status, content type, headers and body, error bodies included", async () => {
    const document = (await (await fetch(`${server.baseUrl}/openapi.json`)).json()) as {
      paths: Record<string, Record<string, unknown>>;
    };
    const count = (paths: string[]) =>
      paths.reduce((sum, name) => sum + Object.keys(document.paths[name] ?? {}).length, 0);
    const total = count(Object.keys(document.paths));

    const run = await schemathesis(
      [
        "run",
        `${server.baseUrl}/openapi.json`,
        "--header",
        `Authorization: Bearer ${API_KEY}`,
        "--checks",
        CHECKS.join(","),
        "--max-examples",
        String(MAX_EXAMPLES),
        "--seed",
        String(SEED),
        // Nothing remembered between runs: each run is its seed's.
        "--generation-database",
        "none",
        "--workers",
        "1",
        "--no-color",
      ],
      dir,
    );
    const failures = run.output.slice(Math.max(0, run.output.indexOf("=== FAILURES")));
    expect(run.code, failures).toBe(0);
    expect(run.output).toContain(`Selected: ${total}/${total}`);
    expect(run.output).toMatch(new RegExp(`Tested: ${total}\\n`, "u"));
  });
});
