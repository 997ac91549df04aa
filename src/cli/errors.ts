import { networkCause } from "./network.js";
import { HttpError } from "./recording-socket.js";

/** How the CLI words what went wrong: one line per error, in the command line's own terms. */

const HTTP_HINTS: Record<number, string> = {
  401: "check --api-key or RELAY_API_KEY",
  402: "the API key has no balance left",
  403: "the API key is not entitled to real-time translation",
  503: "the server is at capacity; retry shortly",
};

/** One line for any error the commands can raise (the service's `{"error":{code,message}}` body included). */
export function describeError(error: unknown): string {
  if (error instanceof HttpError) {
    const body = (error.body ?? {}) as { error?: { code?: unknown; message?: unknown } };
    const code = typeof body.error?.code === "string" ? ` ${body.error.code}` : "";
    const message = typeof body.error?.message === "string" ? `: ${body.error.message}` : "";
    // The service's message already says what is wrong; the hint covers the bare key check and bodiless errors.
    const hint = error.status === 401 || !message ? HTTP_HINTS[error.status] : undefined;
    return `HTTP ${error.status}${code}${message}${hint ? ` (${hint})` : ""}`;
  }
  if (error instanceof Error) {
    const cause = networkCause(error);
    if (cause) return `cannot reach the server: ${cause}`;
    return error.message;
  }
  return String(error);
}

/** The CLI's flag for each request parameter the service names in its messages, per command. */
export type FlagNames = Readonly<Record<string, string>>;

/**
 * The service names request parameters as the API spells them (`modelName=relay-2`,
 * `target_lang "xx"`); someone at the command line knows the flags (`--model relay-2`, `--to xx`).
 * A `name=value` entry of `flags` replaces that exact pair (`audioOutputEnabled=false` → `--no-audio`).
 */
export function inFlagTerms(message: string, flags: FlagNames): string {
  const names = [...new Set(Object.keys(flags).map((key) => key.split("=")[0]!))];
  if (names.length === 0) return message;
  // name=value, name="value" (sessions) or name "value" (dubbing); a bare name is the flag alone.
  const pattern = new RegExp(`(?<![-\\w])(${names.join("|")})\\b(?:="?([^\\s",;:)]*)"?| "([^"]*)")?`, "gu");
  return message.replace(pattern, (whole: string, name: string, assigned?: string, quoted?: string) => {
    const value = assigned ?? quoted;
    const flag = flags[name];
    if (value === undefined) return flag ?? whole;
    return flags[`${name}=${value}`] ?? (flag ? `${flag} ${value}` : whole);
  });
}
