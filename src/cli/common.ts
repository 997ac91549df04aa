import { OUTPUT_SAMPLE_RATE } from "@relay-translate/client/protocol";
import { constants } from "node:fs";
import { access, readFile, stat } from "node:fs/promises";
import path from "node:path";
import { concatFloat32 } from "../audio/pcm.js";
import { CliError, networkCause, request } from "./network.js";
import {
  createSession,
  HttpError,
  RealtimeSocket,
  type ServerMessage,
  type SessionInfo,
} from "./recording-socket.js";

export { CliError, request } from "./network.js";

export interface Connection {
  readonly server: string;
  readonly apiKey: string | undefined;
}

const HTTP_HINTS: Record<number, string> = {
  401: "check --api-key or RELAY_API_KEY",
  402: "the API key has no balance left",
  403: "the API key is not entitled to real-time translation",
  503: "the server is at capacity; retry shortly",
};

const CLOSE_MEANINGS: Record<number, string> = {
  1001: "the server is shutting down",
  1008: "the server closed the connection (policy violation)",
  4500: "internal server error",
  4503: "no capacity on the server that accepted the socket; retry shortly",
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

/**
 * GET a JSON document from the service. The voice and language listings need no key; one given is
 * sent anyway (a gateway in front of the service may require it).
 */
export async function getJson({ server, apiKey }: Connection, path: string): Promise<unknown> {
  const headers: Record<string, string> = apiKey ? { authorization: `Bearer ${apiKey}` } : {};
  const response = await request(new URL(path, server), { headers });
  const body: unknown = await response.json().catch(() => undefined);
  if (!response.ok) throw new HttpError(response.status, body);
  return body;
}

export function requireKey({ apiKey }: Connection): string {
  if (!apiKey) throw new CliError("no API key: pass --api-key or set RELAY_API_KEY");
  return apiKey;
}

/**
 * Creates a session and opens its socket. The `ready` frame is not awaited here: a rejected session
 * sends `ready`, `error`, then closes, which `failure` reports.
 */
export async function openSession(
  connection: Connection,
  params: Record<string, string>,
): Promise<{ session: SessionInfo; socket: RealtimeSocket }> {
  const apiKey = requireKey(connection);
  let session: SessionInfo;
  try {
    session = await createSession(connection.server, apiKey, params);
  } catch (error) {
    throw new CliError(`session request failed: ${describeError(error)}`);
  }
  try {
    return { session, socket: await RealtimeSocket.connect(session.ws_url) };
  } catch (error) {
    const detail =
      error instanceof HttpError && error.status === 401
        ? "HTTP 401 (the session URL is invalid or expired; try again)"
        : describeError(error);
    throw new CliError(`WebSocket handshake refused: ${detail}`);
  }
}

/**
 * An `error` frame directly after `ready` may be the session-start rejection; it is one if the server
 * then closes with 1000 (an in-session error can also follow `ready` directly).
 */
export function isRejection(messages: readonly ServerMessage[], index: number): boolean {
  return messages[index]?.type === "error" && messages[index - 1]?.type === "ready";
}

export function errorText(message: ServerMessage): string {
  return typeof message.error === "string" ? message.error : JSON.stringify(message);
}

/** Why the server ended the session, or undefined while it is open (we never close before asking). */
export function failure(socket: RealtimeSocket): string | undefined {
  if (socket.closeCode === undefined) return undefined;
  const { messages } = socket;
  const rejected = socket.closeCode === 1000 ? messages.findIndex((_, i) => isRejection(messages, i)) : -1;
  if (rejected >= 0) return `session rejected: ${errorText(messages[rejected]!)}`;
  const lastError = messages.findLast((m) => m.type === "error");
  const meaning = CLOSE_MEANINGS[socket.closeCode] ?? "connection closed unexpectedly";
  const reason = socket.closeReason ? `, "${socket.closeReason}"` : "";
  return (
    `${meaning} (close ${socket.closeCode}${reason})` +
    (lastError ? `; last server error: ${errorText(lastError)}` : "")
  );
}

/** Throws the session's failure as a CliError, if it has failed. */
export function checkSession(socket: RealtimeSocket): void {
  const problem = failure(socket);
  if (problem) throw new CliError(problem);
}

/** Waits for a message, turning a server-side close into the reason the session failed. */
export async function expectMessage(
  socket: RealtimeSocket,
  predicate: (message: ServerMessage) => boolean,
  what: string,
  timeoutMs = 30_000,
): Promise<ServerMessage> {
  try {
    return await socket.waitFor(predicate, timeoutMs);
  } catch {
    checkSession(socket);
    throw new CliError(`no ${what} from the server within ${timeoutMs / 1000} s`);
  }
}

/** Closes with 1000 (the spec's normal end) and waits briefly for the server's close frame. */
export async function closeNormally(socket: RealtimeSocket): Promise<void> {
  if (socket.closeCode !== undefined) return;
  socket.close(1000);
  await socket.closed(5_000).catch(() => socket.terminate());
}

/**
 * Refuses an output path the command could not write, before a session or a job is paid for: it
 * must not be a directory, its directory must exist and be writable, and an existing file writable.
 */
export async function checkOutputPath(out: string, flag = "--out"): Promise<void> {
  const directory = path.dirname(path.resolve(out));
  if ((await stat(out).catch(() => undefined))?.isDirectory())
    throw new CliError(`${flag} ${out} is a directory; name a file to write`);
  if (!(await stat(directory).catch(() => undefined))?.isDirectory())
    throw new CliError(`${flag}: the directory ${directory} does not exist`);
  for (const [target, what] of [
    [directory, `the directory ${directory}`],
    [out, out],
  ] as const) {
    await access(target, constants.W_OK).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== "ENOENT") throw new CliError(`${flag}: cannot write to ${what} (${error.code})`);
    });
  }
}

/** Concatenates the received speech frames into one float32 24 kHz WAV; returns its duration in s. */
export async function writeSpeech(path: string, frames: readonly Float32Array[]): Promise<number> {
  const samples = concatFloat32(frames);
  // Loaded here, not with this module: every command imports it, few write speech.
  const { writeWavFloat32 } = await import("../audio/wav.js");
  await writeWavFloat32(path, { samples, sampleRate: OUTPUT_SAMPLE_RATE });
  return samples.length / OUTPUT_SAMPLE_RATE;
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Prints rows under a header in left-aligned columns (`relay voices`, `relay models list`). */
export function printTable(header: readonly string[], rows: readonly string[][]): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  for (const row of [header, ...rows]) {
    console.log(
      row
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join("  ")
        .trimEnd(),
    );
  }
}

/** `--context` or `--context-file` (not both): the session's or job's context. */
export async function contextOption(options: {
  readonly context?: string;
  readonly contextFile?: string;
}): Promise<string | undefined> {
  if (options.context !== undefined && options.contextFile !== undefined)
    throw new CliError("pass --context or --context-file, not both");
  if (options.contextFile === undefined) return options.context;
  try {
    return await readFile(options.contextFile, "utf8");
  } catch (error) {
    throw new CliError(`cannot read --context-file ${options.contextFile}: ${(error as Error).message}`);
  }
}
