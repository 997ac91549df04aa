import { readFileSync } from "node:fs";

/** The package version; part of `model_version_id` and `/healthz`. */
export const SERVICE_VERSION: string = (
  JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string }
).version;
