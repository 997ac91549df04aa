/**
 * LibreTranslate's HTTP API (`GET /languages`, `POST /translate`, `GET /spec`) behind the guard
 * every remote engine uses (src/engines/kit/remote/): concurrency limit, circuit breaker, per-attempt
 * timeout and whole-call watchdog, and `withRetries` on 408/409/429/5xx, connection errors and
 * timeouts, honouring Retry-After. Other answers (400 bad request, 403 banned or wrong key) are
 * reported with the server's message, never retried.
 */
import { z } from "zod";
import {
  RemoteEngineError,
  deepestCause,
  isRetryableStatus,
  serverMessage,
  truncate,
} from "../kit/remote/errors.js";
import { RemoteGuard, type CircuitStatus, type ResilienceOptions } from "../kit/remote/guard.js";
import { retryAfterMs, withRetries } from "../kit/remote/retry.js";
import { languageList, type LanguageList } from "./languages.js";

export interface LibreTranslateOptions extends ResilienceOptions {
  /** Where the server is, e.g. "http://localhost:5000" (with the path prefix it is served under, if any). */
  readonly url: string;
  /** Sent as `api_key` with every translation (servers started with `--api-keys`). */
  readonly apiKey?: string;
}

const translation = z.object({ translatedText: z.string() });
/** The OpenAPI document: `info.version` is the server's version, "?" when it does not know it. */
const spec = z.object({ info: z.object({ version: z.string() }) });

export class LibreTranslateClient {
  /** How errors name the server: the configured URL without query or trailing slash. */
  readonly displayUrl: string;
  /** The configured URL with a trailing slash, so endpoints resolve below its path. */
  private readonly root: URL;
  private readonly apiKey: string | undefined;
  private readonly guard: RemoteGuard;

  get circuit(): CircuitStatus {
    return this.guard.circuit;
  }

  constructor(options: LibreTranslateOptions) {
    let url: URL;
    try {
      url = new URL(options.url);
    } catch {
      throw new Error(`LibreTranslate: url "${options.url}" is not a URL`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw new Error(`LibreTranslate: url must be an http(s) URL, got "${url.protocol}"`);
    }
    if (url.username || url.password) {
      throw new Error("LibreTranslate: url must not contain credentials; pass apiKey instead");
    }
    const path = url.pathname.replace(/\/+$/u, "");
    this.displayUrl = `${url.origin}${path}`;
    this.root = new URL(`${url.origin}${path}/`);
    this.apiKey = options.apiKey?.trim() || undefined;
    this.guard = new RemoteGuard("MT", this.displayUrl, options, (error) =>
      this.guard.error("invalid-response", `returned an unusable answer: ${deepestCause(error)}`, undefined, {
        cause: error,
      }),
    );
  }

  /** `GET /languages`. */
  languages(): Promise<LanguageList> {
    return this.request("GET", "languages", undefined, languageList);
  }

  /** `POST /translate` of plain text between two of the server's codes. */
  async translate(q: string, source: string, target: string, signal?: AbortSignal): Promise<string> {
    const body = { q, source, target, format: "text", ...(this.apiKey ? { api_key: this.apiKey } : {}) };
    const answer = await this.request("POST", "translate", body, translation, signal);
    return answer.translatedText;
  }

  /**
   * The server's version from `GET /spec`, when it says: one attempt outside the breaker, since a
   * server without it (or a proxy hiding it) is no less usable.
   */
  async version(): Promise<string | undefined> {
    try {
      const answer = await this.attempt("GET", "spec", undefined, spec, new AbortController().signal);
      const version = answer.info.version.trim();
      return version === "" || version === "?" ? undefined : version;
    } catch {
      return undefined;
    }
  }

  /** Fails calls still waiting and cancels calls in flight; later calls fail at once. */
  close(): void {
    this.guard.close();
  }

  private request<S extends z.ZodType>(
    method: "GET" | "POST",
    path: string,
    body: object | undefined,
    schema: S,
    signal?: AbortSignal,
  ): Promise<z.output<S>> {
    return this.guard.call(
      ({ signal, deadline }) =>
        withRetries((attempt) => this.attempt(method, path, body, schema, attempt), {
          maxRetries: this.guard.maxRetries,
          deadline,
          signal,
        }),
      signal,
    );
  }

  /** One HTTP exchange within `timeoutMs`, answer read and checked. Errors are RemoteEngineErrors. */
  private async attempt<S extends z.ZodType>(
    method: "GET" | "POST",
    path: string,
    body: object | undefined,
    schema: S,
    signal: AbortSignal,
  ): Promise<z.output<S>> {
    const timeout = new AbortController();
    const timer = setTimeout(() => timeout.abort(), this.guard.timeoutMs);
    let response: Response;
    let text: string;
    try {
      response = await fetch(new URL(path, this.root), {
        method,
        headers: {
          accept: "application/json",
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.any([signal, timeout.signal]),
      });
      text = await response.text();
    } catch (error) {
      // The guard's own reasons (cancelled, closed, its watchdog) are reported as they are.
      if (signal.aborted) throw signal.reason as Error;
      if (timeout.signal.aborted) throw this.guard.timeoutError(this.guard.timeoutMs, error);
      throw this.guard.error("unreachable", `is unreachable: ${deepestCause(error)}`, undefined, {
        cause: error,
      });
    } finally {
      clearTimeout(timer);
    }
    if (!response.ok) throw this.statusError(response, text);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (error) {
      throw this.unusable(method, path, "not JSON", error);
    }
    const parsed = schema.safeParse(json);
    if (!parsed.success) throw this.unusable(method, path, z.prettifyError(parsed.error), parsed.error);
    return parsed.data;
  }

  private statusError(response: Response, text: string): RemoteEngineError {
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // A proxy's HTML or plain-text page: quoted as it is.
    }
    const status = response.status;
    const message = truncate(serverMessage(body) ?? "") || response.statusText;
    return isRetryableStatus(status)
      ? this.guard.error("server", `failed with HTTP ${status}: ${message}`, status, {
          retryAfterMs: retryAfterMs(response.headers),
        })
      : this.guard.error("rejected", `rejected the request with HTTP ${status}: ${message}`, status);
  }

  private unusable(method: string, path: string, why: string, cause: unknown): RemoteEngineError {
    return this.guard.error(
      "invalid-response",
      `returned an unusable answer to ${method} /${path}: ${truncate(why)}`,
      undefined,
      { cause },
    );
  }
}
