import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { createWriteStream } from "node:fs";
import { rename, rm } from "node:fs/promises";
import http from "node:http";
import https from "node:https";
import { isIP, isIPv4, type LookupFunction } from "node:net";
import { pipeline } from "node:stream/promises";
import ipaddr from "ipaddr.js";

/**
 * Downloads a job's source over http(s) into a local file with the size cap enforced while
 * streaming and, when asked, a deadline for the whole download; or mirrors it on a loopback port
 * for ffprobe (`withGuardedMirror`). Server-side request forgery is refused: every address a host
 * name resolves to must be public (see `isPublicAddress`) unless `allowPrivate`, and the connection
 * is pinned to the checked address (no DNS rebinding between the check and the connect). Redirects
 * are followed (up to 5), each one checked again.
 */

/** How a job whose source is one of the service's own uploads records it: `upload:<upload id>`. */
export const UPLOAD_SOURCE_SCHEME = "upload:";

export class DownloadError extends Error {
  constructor(
    message: string,
    /** For the operator's log only, never the client (how a host name resolved, say). */
    readonly detail?: string,
  ) {
    super(message);
  }
}

/** The refusal of a source on a private address: it does not tell the client how names resolve. */
const NOT_PUBLIC = "the source's host is not a public address; refused";
export class SourceTooLargeError extends Error {
  constructor(readonly maxBytes: number) {
    super(`the source is larger than the ${maxBytes}-byte limit`);
  }
}

const MAX_REDIRECTS = 5;

export interface DownloadOptions {
  readonly maxBytes: number;
  readonly allowPrivate: boolean;
  /** Idle limit: the source must answer, and then send something, within this (default 30 s). */
  readonly timeoutMs?: number;
  readonly signal?: AbortSignal;
  /** The whole download's time limit (connection, redirects and body); none without it. */
  readonly deadline?: DownloadDeadline;
}

/**
 * A download may take `baseMs` plus one second per `minBytesPerSec` bytes received so far. A source
 * that drips bytes falls behind soon after `baseMs`, while one sending at least that rate is never
 * cut off; the size cap bounds the whole at `baseMs` plus `maxBytes / minBytesPerSec` seconds.
 * (Content-Length is not trusted to extend it: a dripping source could declare any size.)
 */
export interface DownloadDeadline {
  readonly baseMs: number;
  readonly minBytesPerSec: number;
}

const IPV4_MAPPED = ipaddr.parseCIDR("::ffff:0:0/96");
const NAT64_WELL_KNOWN = ipaddr.parseCIDR("64:ff9b::/96");
const GLOBAL_UNICAST = ipaddr.parseCIDR("2000::/3");

/**
 * Whether a source may be fetched from `address`. IPv4: only what ipaddr.js calls unicast (not
 * private, loopback, link-local, CGNAT, multicast, broadcast, reserved, …). IPv6: only global
 * unicast (2000::/3) that ipaddr.js calls unicast, which refuses every range that embeds an IPv4
 * address and could lead back to a private one: IPv4-compatible ::/96, IPv4-translated
 * ::ffff:0:0:0/96, 6to4 2002::/16, Teredo 2001::/32, local-use NAT64 64:ff9b:1::/48, and the
 * reserved, documentation and special-purpose ranges. Two embeddings are judged by the IPv4 address
 * they carry instead: IPv4-mapped ::ffff:0:0/96 (the socket connects to that IPv4 address) and
 * well-known NAT64 64:ff9b::/96 (DNS64 answers with these for IPv4-only sites on IPv6-only hosts).
 * Anything that is not an IP address is refused.
 */
export function isPublicAddress(address: string): boolean {
  if (isIPv4(address)) return ipaddr.IPv4.parse(address).range() === "unicast";
  const parsed = parseIPv6(address);
  if (!parsed) return false;
  if (parsed.match(IPV4_MAPPED) || parsed.match(NAT64_WELL_KNOWN)) {
    return isPublicAddress(embeddedIPv4(parsed));
  }
  return parsed.match(GLOBAL_UNICAST) && parsed.range() === "unicast";
}

/**
 * Through the WHATWG URL parser (the one that reads `source_url`) first: ipaddr.js reads
 * `::a.b.c.d` as IPv4-mapped, where the socket connects to the IPv4-compatible ::a.b.c.d. A zone
 * index (`%eth0`) only goes with link-local addresses, which are refused anyway.
 */
function parseIPv6(address: string): ipaddr.IPv6 | undefined {
  if (isIP(address) !== 6 || address.includes("%")) return undefined;
  return ipaddr.IPv6.parse(new URL(`http://[${address}]/`).hostname.slice(1, -1));
}

/** The IPv4 address in the last 32 bits of an IPv6 address. */
function embeddedIPv4(address: ipaddr.IPv6): string {
  return address.toByteArray().slice(12).join(".");
}

function guardedLookup(allowPrivate: boolean): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses: LookupAddress[]) => {
      if (error) return callback(error, "", 0);
      const refused = addresses.find((a) => !allowPrivate && !isPublicAddress(a.address));
      if (refused) {
        return callback(new DownloadError(NOT_PUBLIC, `${hostname} resolves to ${refused.address}`), "", 0);
      }
      const [first] = addresses;
      if (!first) return callback(new DownloadError(`${hostname} did not resolve`), "", 0);
      if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
      callback(null, first.address, first.family);
    });
  };
}

/**
 * Opens `url` through the guarded client, following redirects (each checked again): the response
 * once it is 200 (or 206 to a `range` request); a DownloadError for any other status.
 */
async function openSource(
  url: string,
  options: DownloadOptions,
  range?: string,
): Promise<http.IncomingMessage> {
  let current = new URL(url);
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    const response = await request(current, options, range);
    const status = response.statusCode ?? 0;
    if (status >= 300 && status < 400 && response.headers.location) {
      response.resume();
      current = new URL(response.headers.location, current);
      continue;
    }
    if (status !== 200 && !(range !== undefined && status === 206)) {
      response.resume();
      throw new DownloadError(`the source answered HTTP ${status}`);
    }
    return response;
  }
  throw new DownloadError(`more than ${MAX_REDIRECTS} redirects`);
}

/** Downloads `url` to `destination` (atomically: a partial download never appears there). */
export async function downloadSource(
  url: string,
  destination: string,
  options: DownloadOptions,
): Promise<number> {
  const partial = `${destination}.partial`;
  const deadline = options.deadline && new Deadline(options.deadline);
  let bytes = 0;
  try {
    const signals = [options.signal, deadline?.signal].filter((s) => s !== undefined);
    const response = await openSource(url, {
      ...options,
      signal: signals.length > 0 ? AbortSignal.any(signals) : undefined,
    });
    const declared = Number(response.headers["content-length"] ?? Number.NaN);
    if (declared > options.maxBytes) {
      response.destroy();
      throw new SourceTooLargeError(options.maxBytes);
    }
    response.on("data", (chunk: Buffer) => {
      bytes += chunk.length;
      deadline?.allowFor(bytes);
      if (bytes > options.maxBytes) response.destroy(new SourceTooLargeError(options.maxBytes));
    });
    await pipeline(response, createWriteStream(partial));
    await rename(partial, destination);
    return bytes;
  } catch (error) {
    await rm(partial, { force: true });
    if (deadline?.signal.aborted) throw new DownloadError(deadline.failure(bytes));
    if (error instanceof SourceTooLargeError || error instanceof DownloadError) throw error;
    throw new DownloadError((error as Error).message);
  } finally {
    deadline?.stop();
  }
}

/** The running limit of one download (see DownloadDeadline); `signal` aborts when it passes. */
class Deadline {
  private readonly controller = new AbortController();
  private readonly started = performance.now();
  private bytes = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly limits: DownloadDeadline) {
    this.arm();
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** The download may take as long as `bytes` bytes need (the limit only ever moves later). */
  allowFor(bytes: number): void {
    this.bytes = Math.max(this.bytes, bytes);
  }

  stop(): void {
    clearTimeout(this.timer);
  }

  failure(received: number): string {
    const seconds = (performance.now() - this.started) / 1000;
    return (
      `the download took too long (${received} bytes in ${seconds.toFixed(1)} s); a source must arrive ` +
      `within ${this.limits.baseMs / 1000} s plus 1 s per ${this.limits.minBytesPerSec} bytes`
    );
  }

  private allowedMs(): number {
    return this.limits.baseMs + (this.bytes / this.limits.minBytesPerSec) * 1000;
  }

  /** Wakes when the limit as it stands passes; bytes that arrived meanwhile move it on. */
  private arm(): void {
    const left = this.allowedMs() - (performance.now() - this.started);
    if (left <= 0) {
      this.controller.abort(new DownloadError("download deadline passed"));
      return;
    }
    // setTimeout takes at most 2^31 - 1 ms; a longer wait simply wakes once more.
    this.timer = setTimeout(() => this.arm(), Math.min(left, 2 ** 31 - 1));
  }
}

/**
 * Lets ffprobe read `url` without reaching the network itself: a loopback HTTP server answers each
 * of its requests (with its Range header) by fetching `url` through the guarded client (every
 * address checked and pinned, redirects followed and checked here), relaying at most
 * `options.maxBytes` in all. `use` gets the loopback URL; everything is closed once it settles.
 */
export async function withGuardedMirror<T>(
  url: string,
  options: DownloadOptions,
  use: (localUrl: string) => Promise<T>,
): Promise<T> {
  const done = new AbortController();
  const signal = options.signal ? AbortSignal.any([options.signal, done.signal]) : done.signal;
  let relayed = 0;
  const server = http.createServer((incoming, outgoing) => {
    const range = incoming.headers.range;
    openSource(url, { ...options, signal }, range).then(
      (source) => {
        const headers: http.OutgoingHttpHeaders = {};
        for (const name of ["content-length", "content-range", "accept-ranges", "content-type"]) {
          if (source.headers[name] !== undefined) headers[name] = source.headers[name];
        }
        outgoing.writeHead(source.statusCode!, headers);
        source.on("data", (chunk: Buffer) => {
          relayed += chunk.length;
          if (relayed > options.maxBytes) source.destroy(new SourceTooLargeError(options.maxBytes));
        });
        pipeline(source, outgoing).catch(() => outgoing.destroy());
      },
      () => outgoing.writeHead(502).end(),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  try {
    const { port } = server.address() as { port: number };
    return await use(`http://127.0.0.1:${port}/source`);
  } finally {
    done.abort();
    server.closeAllConnections();
    server.close();
  }
}

function request(url: URL, options: DownloadOptions, range?: string): Promise<http.IncomingMessage> {
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    return Promise.reject(new DownloadError(`unsupported URL scheme ${url.protocol}`));
  }
  const client = url.protocol === "https:" ? https : http;
  const literal = url.hostname.replace(/^\[|\]$/gu, "");
  // A literal IP in the URL skips DNS, so it is checked here.
  if (isIP(literal) !== 0 && !options.allowPrivate && !isPublicAddress(literal)) {
    return Promise.reject(new DownloadError(NOT_PUBLIC, `${literal} is not a public address`));
  }
  return new Promise((resolve, reject) => {
    const req = client.get(url, {
      // A connection of its own: downloads are few and long, and a kept-alive socket the source has
      // just closed (its idle timeout) fails the next request with ECONNRESET.
      agent: false,
      lookup: guardedLookup(options.allowPrivate),
      timeout: options.timeoutMs ?? 30_000,
      signal: options.signal,
      headers: { "user-agent": "relay-dubbing/1", ...(range !== undefined && { range }) },
    });
    req.once("response", resolve);
    req.once("timeout", () => req.destroy(new DownloadError("the source did not answer in time")));
    req.once("error", (error) =>
      reject(error instanceof DownloadError ? error : new DownloadError(error.message)),
    );
  });
}
