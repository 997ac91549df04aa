import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

/** `../shared` beside the project root (tests read speech and text from there, never from the repo). */
export const SHARED_DIR =
  process.env.SHARED_DIR ?? path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../shared");

export function sharedPath(...parts: string[]): string {
  const full = path.join(SHARED_DIR, ...parts);
  if (!existsSync(full)) throw new Error(`test material missing: ${full} (set SHARED_DIR)`);
  return full;
}

/**
 * True (after saying so) when test material is absent, for `describe.skipIf`: the suite then skips
 * the tests that need it instead of failing.
 */
export function sharedMissing(...parts: string[]): boolean {
  const full = path.join(SHARED_DIR, ...parts);
  if (existsSync(full)) return false;
  console.warn(`skipping tests that need ${full}: it is missing (set SHARED_DIR to where ../shared is)`);
  return true;
}
