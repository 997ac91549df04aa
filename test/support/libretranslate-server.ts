/**
 * A stand-in for a LibreTranslate server (`GET /languages`, `POST /translate`, `GET /spec`) on a
 * loopback port, answering as LibreTranslate does: JSON or form bodies, `{"error": "…"}` with 400
 * for a bad request (missing parameter, unknown language, pair not offered), 403 for a wrong API
 * key. Translations are deterministic (`[target] q` unless `reply` says otherwise); every request is
 * recorded; failures can be scripted per endpoint.
 */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import { readBody, responseDelays } from "./stand-in-http.js";

export type Endpoint = "languages" | "translate" | "spec";

const ROUTES: Readonly<Record<string, { readonly endpoint: Endpoint; readonly method: string }>> = {
  "/languages": { endpoint: "languages", method: "GET" },
  "/translate": { endpoint: "translate", method: "POST" },
  "/spec": { endpoint: "spec", method: "GET" },
};

/** One entry of `GET /languages`; without `targets` it is the answer of a server before that field. */
export interface ServerLanguage {
  readonly code: string;
  readonly name: string;
  readonly targets?: readonly string[];
}

export interface RecordedRequest {
  readonly endpoint: Endpoint | undefined;
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  /** The parameters of a JSON or form body. */
  readonly body?: Readonly<Record<string, unknown>>;
  /** The status answered, once the answer is sent. */
  status: number | undefined;
  /** The client went away before the answer was sent. */
  aborted: boolean;
}

/** One scripted misbehavior, used by the next request of its endpoint (that `when` accepts). */
export interface Fault {
  /** Only for a request with these parameters (e.g. the whole sentence, not an interim's words). */
  readonly when?: (body: Readonly<Record<string, unknown>>) => boolean;
  /** Answer with this status and `{"error": message}` instead (after `delayMs`). */
  readonly status?: number;
  readonly message?: string;
  /** Wait this long before answering (a normal answer unless `status` is set). */
  readonly delayMs?: number;
  /** Extra response headers (e.g. `retry-after`). */
  readonly headers?: Readonly<Record<string, string>>;
  /** Send the status line, headers and part of a normal answer, then stall this long. */
  readonly stallBodyMs?: number;
  /** Answer with this JSON text (status `status`, default 200) instead. */
  readonly body?: string;
}

export interface LibreTranslateTestServer {
  /** "http://127.0.0.1:<port>" */
  readonly url: string;
  readonly requests: RecordedRequest[];
  /** What `GET /languages` answers. */
  languages: readonly ServerLanguage[];
  /** `info.version` of `GET /spec`; undefined: the server has no `/spec` (404). */
  version: string | undefined;
  /** When set, `POST /translate` needs one of these `api_key`s (a server run with `--api-keys`). */
  apiKeys: readonly string[] | undefined;
  /** The translation of `q`. */
  reply: (q: string, source: string, target: string) => string;
  /** Scripts the next requests of `endpoint` (each fault is used once, in order). */
  script(endpoint: Endpoint, ...faults: Fault[]): void;
  /** Drops the faults of `endpoint` not used yet. */
  unscript(endpoint: Endpoint): void;
  count(endpoint: Endpoint): number;
  ofEndpoint(endpoint: Endpoint): RecordedRequest[];
  reset(): void;
  close(): Promise<void>;
}

/** A LibreTranslate 1.6 answer: English to several languages, Brazilian Portuguese, both Chinese scripts. */
const DEFAULT_LANGUAGES: readonly ServerLanguage[] = [
  { code: "en", name: "English", targets: ["de", "es", "fr", "pt-BR", "zh-Hans", "zh-Hant"] },
  { code: "de", name: "German", targets: ["en", "fr"] },
  { code: "es", name: "Spanish", targets: ["en"] },
  { code: "fr", name: "French", targets: ["de", "en"] },
  { code: "pt-BR", name: "Portuguese (Brazil)", targets: ["en"] },
  { code: "zh-Hans", name: "Chinese", targets: ["en"] },
  { code: "zh-Hant", name: "Chinese (traditional)", targets: ["en"] },
];

const DEFAULT_VERSION = "1.6.2";

const defaultReply = (q: string, _source: string, target: string): string => `[${target}] ${q}`;

/** LibreTranslate reads parameters from a JSON body or from a form. */
function parameters(req: IncomingMessage, raw: Buffer): Record<string, unknown> | undefined {
  if (raw.length === 0) return undefined;
  const text = raw.toString("utf8");
  if (/json/u.test(req.headers["content-type"] ?? "")) return JSON.parse(text) as Record<string, unknown>;
  return Object.fromEntries(new URLSearchParams(text));
}

export async function startLibreTranslateServer(): Promise<LibreTranslateTestServer> {
  const requests: RecordedRequest[] = [];
  const scripts = new Map<Endpoint, Fault[]>();

  const { wait, clear: clearDelays } = responseDelays();

  const state: Omit<LibreTranslateTestServer, "url" | "close"> = {
    requests,
    languages: DEFAULT_LANGUAGES,
    version: DEFAULT_VERSION,
    apiKeys: undefined,
    reply: defaultReply,
    script(endpoint, ...faults) {
      scripts.set(endpoint, [...(scripts.get(endpoint) ?? []), ...faults]);
    },
    unscript(endpoint) {
      scripts.delete(endpoint);
    },
    count: (endpoint) => requests.filter((r) => r.endpoint === endpoint).length,
    ofEndpoint: (endpoint) => requests.filter((r) => r.endpoint === endpoint),
    reset() {
      requests.length = 0;
      scripts.clear();
      state.languages = DEFAULT_LANGUAGES;
      state.version = DEFAULT_VERSION;
      state.apiKeys = undefined;
      state.reply = defaultReply;
    },
  };

  const sendJson = (
    res: ServerResponse,
    status: number,
    body: unknown,
    headers: Readonly<Record<string, string>> = {},
  ): void => {
    res.writeHead(status, { "content-type": "application/json", ...headers });
    res.end(JSON.stringify(body));
  };

  /** LibreTranslate's checks and answer, in its order (app.py `translate()`). */
  function translate(body: Readonly<Record<string, unknown>>, res: ServerResponse): void {
    if (state.apiKeys) {
      const key = body["api_key"];
      if (typeof key === "string" && key !== "" && !state.apiKeys.includes(key)) {
        sendJson(res, 403, { error: "Invalid API key" });
        return;
      }
      if (typeof key !== "string" || key === "") {
        sendJson(res, 400, { error: "Please contact the server operator to get an API key" });
        return;
      }
    }
    for (const name of ["q", "source", "target"]) {
      if (!body[name]) {
        sendJson(res, 400, { error: `Invalid request: missing ${name} parameter` });
        return;
      }
    }
    const { q, source, target } = body as { q: unknown; source: string; target: string };
    if (typeof q !== "string") {
      sendJson(res, 400, { error: "the stand-in translates one text per request" });
      return;
    }
    const from = state.languages.find((l) => l.code === source);
    if (!from) {
      sendJson(res, 400, { error: `${source} is not supported` });
      return;
    }
    const to = state.languages.find((l) => l.code === target);
    if (!to) {
      sendJson(res, 400, { error: `${target} is not supported` });
      return;
    }
    const format = body["format"] ?? "text";
    if (format !== "text" && format !== "html") {
      sendJson(res, 400, { error: `${String(format)} format is not supported` });
      return;
    }
    const targets = from.targets ?? state.languages.map((l) => l.code);
    if (!targets.includes(target) || source === target) {
      sendJson(res, 400, {
        error: `${to.name} (${to.code}) is not available as a target language from ${from.name} (${from.code})`,
      });
      return;
    }
    sendJson(res, 200, { translatedText: state.reply(q, source, target) });
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? "/").split("?")[0]!;
    const route = ROUTES[path];
    const body = parameters(req, await readBody(req));
    const record: RecordedRequest = {
      endpoint: route?.endpoint,
      method: req.method ?? "GET",
      path,
      headers: req.headers,
      ...(body ? { body } : {}),
      status: undefined,
      aborted: false,
    };
    requests.push(record);
    res.once("finish", () => (record.status = res.statusCode));
    res.once("close", () => {
      if (!res.writableFinished) record.aborted = true;
    });
    if (!route || req.method !== route.method) {
      res.writeHead(404, { "content-type": "text/html" });
      res.end("<!doctype html><title>404 Not Found</title><h1>Not Found</h1>");
      return;
    }
    const faults = scripts.get(route.endpoint) ?? [];
    const index = faults.findIndex((f) => f.when?.(body ?? {}) ?? true);
    const fault = index === -1 ? undefined : faults.splice(index, 1)[0];
    if (!(await wait(fault?.delayMs ?? 0, res))) return;
    if (fault?.body !== undefined) {
      res.writeHead(fault.status ?? 200, { "content-type": "application/json", ...fault.headers });
      res.end(fault.body);
      return;
    }
    if (fault?.status) {
      sendJson(
        res,
        fault.status,
        { error: fault.message ?? `scripted failure ${fault.status}` },
        fault.headers,
      );
      return;
    }
    if (fault?.stallBodyMs) {
      res.writeHead(200, { "content-type": "application/json", ...fault.headers });
      res.write('{"translatedText": ');
      if (!(await wait(fault.stallBodyMs, res))) return;
      res.end('""}');
      return;
    }
    if (route.endpoint === "languages") {
      sendJson(res, 200, state.languages);
    } else if (route.endpoint === "spec") {
      if (state.version === undefined) {
        res.writeHead(404, { "content-type": "text/html" });
        res.end("<!doctype html><title>404 Not Found</title><h1>Not Found</h1>");
      } else {
        sendJson(res, 200, { swagger: "2.0", info: { title: "LibreTranslate", version: state.version } });
      }
    } else {
      translate(body ?? {}, res);
    }
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) sendJson(res, 500, { error: String(error) });
      else res.destroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };

  return Object.assign(state, {
    url: `http://127.0.0.1:${port}`,
    async close() {
      clearDelays();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  });
}
