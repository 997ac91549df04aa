/** A failure already phrased for the user: printed as `relay: <message>`, exit status 1. */
export class CliError extends Error {}

/** fetch() hides why it failed (ECONNREFUSED, ENOTFOUND) one level down, under "fetch failed". */
export function networkCause(error: unknown): string | undefined {
  if (!(error instanceof Error) || error.message !== "fetch failed") return undefined;
  const cause = (error as { cause?: { code?: unknown; message?: unknown } }).cause;
  return cause ? String(cause.code ?? cause.message) : "network error";
}

const NEXT_STEP: Record<string, string> = {
  ECONNREFUSED: "is the service running? Start it with `npm start`, or name another with --server",
  ENOTFOUND: "check the host name in --server or RELAY_SERVER",
};

/**
 * fetch() that names the address it could not reach and what to try, instead of a bare
 * "TypeError: fetch failed".
 */
export async function request(url: URL | string, init?: RequestInit): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch (error) {
    const cause = networkCause(error);
    if (!cause) throw error;
    const next = NEXT_STEP[cause];
    throw new CliError(`cannot reach ${new URL(url).origin}: ${cause}${next ? ` (${next})` : ""}`);
  }
}
