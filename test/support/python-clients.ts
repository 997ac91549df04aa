import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";
import { PROJECT_ROOT } from "./run-script.js";
import { required } from "./servers.js";

/**
 * The Python environment of Pinch's own clients, where scripts/setup-python-clients.sh makes it:
 * ${RELAY_CACHE_DIR:-~/.cache/relay}/python-clients/<first 12 hex digits of the SHA-256 of
 * test/python/requirements.txt>.
 */
export function pythonClientsDir(): string {
  const requirements = readFileSync(path.join(PROJECT_ROOT, "test/python/requirements.txt"));
  const hash = createHash("sha256").update(requirements).digest("hex").slice(0, 12);
  return path.join(
    process.env.RELAY_CACHE_DIR ?? path.join(homedir(), ".cache/relay"),
    "python-clients",
    hash,
  );
}

/** Why Pinch's Python clients cannot run, or undefined when they can (a failure in CI: `required`). */
export function pythonClientsProblem(): string | undefined {
  const dir = pythonClientsDir();
  return required(
    existsSync(path.join(dir, ".complete"))
      ? undefined
      : `Pinch's Python clients are not installed in ${dir}: run sh scripts/setup-python-clients.sh`,
  );
}
