/**
 * What an anonymous client can do to the service over HTTP, against the real server: fill its logs
 * (bounded lines, refused and unauthenticated requests written at most REQUEST_LOG_PER_SEC a
 * second), choose the request id its lines are logged under (only trusted proxies may), learn how
 * internal names resolve (SSRF refusals say only that the address is not allowed), or frame the
 * page where an API key is typed (security headers; the playground and /docs still work under the
 * Content-Security-Policy, in headless Chromium).
 */
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp, type App } from "../../src/app.js";
import { loadConfig } from "../../src/config.js";
import { startDubbingWorkers } from "../../src/dubbing/jobs/worker.js";
import { openServices } from "../../src/services.js";
import { dubbingClient } from "../support/dubbing-client.js";
import { testEnv } from "../support/env.js";
import { freePort } from "../support/ports.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";
import { WAIT } from "../support/wait.js";

const LINES_PER_SEC = 5;
let server: TestServer;
let logged: LoggedServer;

interface LoggedServer {
  readonly baseUrl: string;
  readonly app: App;
  /** Every log line written so far, parsed. */
  readonly lines: Record<string, unknown>[];
  /** Bytes of log written so far. */
  bytes(): number;
  /** Resolves once `condition` holds for the lines written (checked as each line arrives). */
  until(condition: () => boolean): Promise<void>;
  close(): Promise<void>;
}

/**
 * The real service on a free port whose log (level info) is captured line by line, with the
 * engines of `server`, trusting loopback as a proxy, and one dubbing worker.
 */
async function startLoggedServer(env: Record<string, string>): Promise<LoggedServer> {
  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const dataDir = await mkdtemp(path.join(tmpdir(), "relay-logged-"));
  const config = loadConfig({
    ...testEnv(baseUrl, dataDir),
    LOG_LEVEL: "info",
    DUBBING_WORKERS: "1",
    ...env,
  });
  const services = await openServices(config, { registry: server.registry });
  const lines: Record<string, unknown>[] = [];
  const waiters = new Set<() => void>();
  let bytes = 0;
  const app = await buildApp(config, services, {
    logStream: {
      write(line: string) {
        bytes += Buffer.byteLength(line);
        lines.push(JSON.parse(line) as Record<string, unknown>);
        for (const wake of waiters) wake();
      },
    },
  });
  await app.http.listen({ port, host: "127.0.0.1" });
  const workers = startDubbingWorkers(config, services, app.http.log, { pollMs: 100 });
  return {
    baseUrl,
    app,
    lines,
    bytes: () => bytes,
    until: (condition) =>
      new Promise((resolve) => {
        const check = () => {
          if (!condition()) return;
          waiters.delete(check);
          resolve();
        };
        waiters.add(check);
        check();
      }),
    async close() {
      await workers.stop();
      await app.shutdown();
      await services.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

beforeAll(async () => {
  server = await startServer();
  logged = await startLoggedServer({
    REQUEST_LOG_PER_SEC: String(LINES_PER_SEC),
    TRUSTED_PROXIES: "10.0.0.0/8,127.0.0.1",
  });
});
afterAll(async () => {
  await logged?.close();
  await server?.close();
});

const completed = (line: Record<string, unknown>) => line.msg === "request completed";

describe("request logs", () => {
  it("a flood of long-URL anonymous and refused requests writes a bounded log", async () => {
    const long = "q=" + "x".repeat(15_000);
    const FLOOD = 400;
    const before = { lines: logged.lines.length, bytes: logged.bytes() };
    const started = Date.now();
    for (let sent = 0; sent < FLOOD; sent += 40) {
      await Promise.all(
        Array.from({ length: 40 }, async (_, i) => {
          // Alternately a 200 nobody authenticated and a 401.
          const route = (sent + i) % 2 === 0 ? `/livez?${long}` : `/v1/session?${long}`;
          const response = await fetch(new URL(route, logged.baseUrl));
          await response.arrayBuffer();
        }),
      );
    }
    const ended = Date.now();
    const flood = () => logged.lines.slice(before.lines);
    const accounted = () =>
      flood().filter(completed).length +
      flood().reduce((sum, line) => sum + (typeof line.suppressed === "number" ? line.suppressed : 0), 0);
    // Every request is either logged or counted in a summary line (written when its second is over).
    await logged.until(() => accounted() >= FLOOD);
    expect(accounted()).toBe(FLOOD);

    const seconds = Math.floor(ended / 1000) - Math.floor(started / 1000) + 1;
    const perRequest = flood().filter(completed);
    expect(perRequest.length).toBeLessThanOrEqual(LINES_PER_SEC * seconds);
    expect(perRequest.length).toBeGreaterThan(0);
    // Each line is short whatever the URL: the URL is cut, its length noted.
    const { req } = perRequest[0] as { req: { url: string } };
    expect(req.url).toMatch(/^\/(livez|v1\/session)\?q=x+…\(15\d{3} characters\)$/u);
    const written = logged.bytes() - before.bytes;
    expect(written).toBeLessThanOrEqual(1024 * flood().length);
    expect(flood().length).toBeLessThanOrEqual(2 * LINES_PER_SEC * seconds + seconds + 1);
  });

  it("still logs every authenticated request that succeeds, with its status", async () => {
    const response = await fetch(new URL("/api/dubbing/jobs", logged.baseUrl), {
      headers: { authorization: `Bearer ${API_KEY}` },
    });
    expect(response.status).toBe(200);
    const id = response.headers.get("x-request-id");
    await logged.until(() => logged.lines.some((line) => completed(line) && line.request_id === id));
    const line = logged.lines.find((l) => completed(l) && l.request_id === id)!;
    expect(line).toMatchObject({
      req: { method: "GET", url: "/api/dubbing/jobs" },
      res: { statusCode: 200 },
    });
  });
});

describe("x-request-id", () => {
  it("is adopted from a trusted proxy (TRUSTED_PROXIES) when it is a plain token, with its X-Forwarded-For", async () => {
    // An authenticated request: its line is always written (an anonymous one may be counted instead).
    const given = await fetch(new URL("/api/dubbing/jobs", logged.baseUrl), {
      headers: {
        authorization: `Bearer ${API_KEY}`,
        "x-request-id": "lb-1234.abc",
        "x-forwarded-for": "203.0.113.7",
      },
    });
    expect(given.headers.get("x-request-id")).toBe("lb-1234.abc");
    await logged.until(() => logged.lines.some((line) => line.request_id === "lb-1234.abc"));
    expect(logged.lines.find((line) => line.request_id === "lb-1234.abc")).toMatchObject({
      req: { remoteAddress: "203.0.113.7" },
    });
    for (const bad of ["has space", "x".repeat(129), "a/b;c=d"]) {
      const replaced = await fetch(new URL("/v1/voices", logged.baseUrl), {
        headers: { "x-request-id": bad },
      });
      expect(replaced.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/u);
    }
    // Error responses carry it too.
    const refused = await fetch(new URL("/v1/session", logged.baseUrl), {
      headers: { "x-request-id": "trace-7" },
    });
    expect(refused.status).toBe(401);
    expect(refused.headers.get("x-request-id")).toBe("trace-7");
  });

  it("is made by the service for any other client, whatever it sends", async () => {
    // `server` trusts no proxy (the default).
    for (const route of ["/livez", "/v1/session"]) {
      const response = await fetch(new URL(route, server.baseUrl), {
        headers: { "x-request-id": "chosen-by-client" },
      });
      expect(response.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/u);
    }
    const made = await fetch(new URL("/livez", server.baseUrl));
    expect(made.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/u);
  });
});

describe("SSRF refusals", () => {
  it("tell the client only that the address is not allowed; how the name resolved goes to the log", async () => {
    const client = dubbingClient(logged.baseUrl, API_KEY);
    const created = await client.request("POST", "/api/dubbing/jobs", {
      source_url: `${logged.baseUrl.replace("127.0.0.1", "localhost")}/talk.mp4`,
      source_lang: "en",
      target_lang: "es",
    });
    const told =
      created.status === 201
        ? await client.finished(created.body.job_id as string)
        : (created.body.error as Record<string, unknown>);
    const text = JSON.stringify(told);
    expect(text).not.toMatch(/127\.0\.0\.1|::1|resolves/u);
    expect(text).toMatch(/not a public address/u);
    await logged.until(() =>
      logged.lines.some((line) => /^localhost resolves to /u.test(String(line.detail))),
    );
  });
});

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

describe("security headers", () => {
  it("every response forbids framing and sniffing; pages get a Content-Security-Policy", async () => {
    for (const route of ["/", "/docs/", "/v1/voices", "/v1/session", "/no-such-route"]) {
      const response = await fetch(new URL(route, server.baseUrl));
      expect(response.headers.get("x-frame-options"), route).toBe("DENY");
      expect(response.headers.get("x-content-type-options"), route).toBe("nosniff");
      const csp = response.headers.get("content-security-policy") ?? "";
      expect(csp, route).toMatch(/frame-ancestors 'none'/u);
      expect(csp, route).toMatch(/script-src 'self'(;|$)/u);
      expect(csp, route).toMatch(/object-src 'none'/u);
      expect(response.headers.get("strict-transport-security"), route).toBeNull();
    }
  });

  it.skipIf(!existsSync(CHROMIUM))(
    "the playground and the reference page work under the policy, and neither can be framed",
    async () => {
      const browser = await chromium.launch({
        executablePath: CHROMIUM,
        args: ["--headless", "--no-sandbox"],
      });
      try {
        const page = await browser.newPage();
        const violations: string[] = [];
        page.on("console", (message) => {
          if (/Content Security Policy/iu.test(message.text()))
            violations.push(`${page.url()}: ${message.text()}`);
        });
        // The playground fills its choices from the API (fetch, under connect-src).
        await page.goto(server.baseUrl);
        await page.waitForSelector("#live-to option[value=es]", { state: "attached" });
        // The reference page renders the operations from /openapi.json.
        await page.goto(new URL("/docs/", server.baseUrl).href);
        await page.waitForSelector(".opblock", { timeout: WAIT.timeout });
        expect(violations).toEqual([]);
        // A page elsewhere that frames the playground gets nothing in the frame.
        const framing = await browser.newPage();
        const blocked = new Promise<string>((resolve) =>
          framing.on("console", (message) => {
            if (/frame-ancestors|X-Frame-Options|refused to display/iu.test(message.text()))
              resolve(message.text());
          }),
        );
        await framing.setContent(`<iframe src="${server.baseUrl}/"></iframe>`);
        expect(await blocked).toMatch(/frame-ancestors|X-Frame-Options|refused/iu);
        const frame = framing.frames().find((f) => f !== framing.mainFrame());
        expect(await frame?.$("#api-key").catch(() => null)).toBeFalsy();
      } finally {
        await browser.close();
      }
    },
    90_000,
  );
});
