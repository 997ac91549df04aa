import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";

/** `../shared` beside the project root (tests read speech and text from there, never from the repo). */
export const SHARED_DIR =
  process.env.SHARED_DIR ?? path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../shared");

export function sharedPath(...parts: string[]): string {
  const full = path.join(SHARED_DIR, ...parts);
  if (!existsSync(full)) throw new Error(`test material missing: ${full} (set SHARED_DIR)`);
  return full;
}
