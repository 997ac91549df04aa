import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";
import { PROJECT_ROOT } from "./run-script.js";
import { required } from "./servers.js";

/**
 * The Python environments scripts/setup-python-clients.sh makes: Pinch's own clients (`clients`,
 * test/python/requirements.txt), schemathesis (`fuzz`, test/python/fuzz-requirements.txt) and the
 * real-model tools (`models`, test/python/models-requirements.txt: faster-whisper, its server,
 * piper-tts, jiwer, sacrebleu).
 */
export type PythonEnvironment = "clients" | "fuzz" | "models";

const ENVIRONMENTS: Record<PythonEnvironment, { readonly requirements: string; readonly holds: string }> = {
  clients: { requirements: "test/python/requirements.txt", holds: "Pinch's Python clients are" },
  fuzz: { requirements: "test/python/fuzz-requirements.txt", holds: "schemathesis is" },
  models: {
    requirements: "test/python/models-requirements.txt",
    holds: "faster-whisper, piper-tts and the scorers are",
  },
};

/**
 * Where the script makes an environment: ${RELAY_CACHE_DIR:-~/.cache/relay}/python-<name>/<first 12
 * hex digits of the SHA-256 of its requirements file>.
 */
export function pythonEnvDir(name: PythonEnvironment): string {
  const requirements = readFileSync(path.join(PROJECT_ROOT, ENVIRONMENTS[name].requirements));
  const hash = createHash("sha256").update(requirements).digest("hex").slice(0, 12);
  return path.join(
    process.env.RELAY_CACHE_DIR ?? path.join(homedir(), ".cache/relay"),
    `python-${name}`,
    hash,
  );
}

/** Why an environment cannot be used, or undefined when it can (a failure in CI: `required`). */
export function pythonEnvProblem(name: PythonEnvironment): string | undefined {
  const dir = pythonEnvDir(name);
  const setup = `sh scripts/setup-python-clients.sh${name === "clients" ? "" : ` ${name}`}`;
  return required(
    existsSync(path.join(dir, ".complete"))
      ? undefined
      : `${ENVIRONMENTS[name].holds} not installed in ${dir}: run ${setup}`,
  );
}

/** The environment of Pinch's Python clients. */
export const pythonClientsDir = (): string => pythonEnvDir("clients");

/** Why Pinch's Python clients cannot run, or undefined when they can. */
export const pythonClientsProblem = (): string | undefined => pythonEnvProblem("clients");
