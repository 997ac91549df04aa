import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { PROJECT_ROOT } from "./run-script.js";
import { startTestServers } from "./servers.js";

/** The newest modification time under `dir` (0 where it does not exist). */
function newestMtime(dir: string): number {
  let newest = 0;
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true, recursive: true });
  } catch {
    return 0;
  }
  for (const entry of entries) {
    if (entry.isFile()) newest = Math.max(newest, statSync(path.join(entry.parentPath, entry.name)).mtimeMs);
  }
  return newest;
}

function mtimeOf(file: string): number {
  try {
    return statSync(file).mtimeMs;
  } catch {
    return 0;
  }
}

/**
 * Before any test file: builds dist/ when the sources changed since the last build (tests spawn the
 * service and the CLI as users run them, from the build; `npm run setup` builds, so a fresh checkout
 * after setup builds nothing here), and gives the whole run one directory of voice measurements
 * (`VOICE_MEASUREMENTS_DIR`, inherited by the test processes and the services they spawn), so the
 * voice library is measured once per run rather than once per test server, and starts the servers
 * the tests use where they are not running (PostgreSQL, Redis, LiveKit: test/support/servers.ts).
 * Returns the teardown.
 */
export default async function setup(): Promise<() => Promise<void>> {
  buildIfStale();
  const measurements = mkdtempSync(path.join(tmpdir(), "relay-test-voice-measurements-"));
  process.env.VOICE_MEASUREMENTS_DIR = measurements;
  const stopServers = await startTestServers();
  return async () => {
    await stopServers();
    rmSync(measurements, { recursive: true, force: true });
  };
}

function buildIfStale(): void {
  const root = (...parts: string[]) => path.join(PROJECT_ROOT, ...parts);
  const built = Math.min(mtimeOf(root("dist", "main.js")), mtimeOf(root("dist", "cli", "main.js")));
  const sources = Math.max(
    newestMtime(root("src")),
    newestMtime(root("packages", "client", "src")),
    mtimeOf(root("tsconfig.json")),
    mtimeOf(root("package.json")),
  );
  if (built >= sources) return;
  console.log("global setup: the sources changed since the last build; npm run build");
  execFileSync("npm", ["run", "build"], { cwd: PROJECT_ROOT, stdio: ["ignore", "inherit", "inherit"] });
}
