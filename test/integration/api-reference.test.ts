/**
 * The API reference against the running service: the OpenAPI document generated from the route
 * schemas names only routes that exist; the responses of a real session, a real dubbing job and the
 * error body validate against it; the WebSocket messages of a real session validate against the
 * messages' JSON Schema; `/docs` serves the reference page.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readWavAsPcm16 } from "../../src/audio/wav.js";
import { RealtimeSocket } from "../../src/cli/recording-socket.js";
import { dubbingClient } from "../support/dubbing-client.js";
import { makeTestVideo } from "../support/media.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";
import { sharedMissing, sharedPath } from "../support/shared.js";

interface Operation {
  readonly responses: Record<string, { content?: Record<string, { schema: object }> }>;
}
type OpenApi = { openapi: string; paths: Record<string, Record<string, Operation>> };

let server: TestServer;
let doc: OpenApi;
let dir: string;
const ajv = new Ajv2020({ strict: false, allErrors: true });

beforeAll(async () => {
  server = await startServer({ DUBBING_WORKERS: "1" });
  doc = (await (await fetch(new URL("/openapi.json", server.baseUrl))).json()) as OpenApi;
  dir = await mkdtemp(path.join(tmpdir(), "relay-reference-"));
});
afterAll(async () => {
  await server?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** The documented schema of a route's response. */
function responseSchema(route: string, method: string, status: number): ValidateFunction {
  const operation = doc.paths[route]?.[method];
  const schema = operation?.responses[String(status)]?.content?.["application/json"]?.schema;
  if (!schema) throw new Error(`${method.toUpperCase()} ${route} documents no JSON ${status} response`);
  return ajv.compile(schema);
}

function expectValid(validate: ValidateFunction, value: unknown): void {
  const valid = validate(value);
  expect(valid ? [] : validate.errors).toEqual([]);
}

async function call(
  method: string,
  route: string,
  body?: unknown,
): Promise<{ status: number; json: unknown }> {
  const response = await fetch(new URL(route, server.baseUrl), {
    method,
    headers: {
      authorization: `Bearer ${API_KEY}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, json: text.startsWith("{") ? JSON.parse(text) : text };
}

describe("the OpenAPI document", () => {
  it("is OpenAPI 3.1 and names only routes the service has, the WebSocket endpoints included", async () => {
    expect(doc.openapi).toBe("3.1.0");
    const routes = Object.entries(doc.paths).flatMap(([route, methods]) =>
      Object.keys(methods).map((method) => ({ route, method: method.toUpperCase() })),
    );
    expect(routes.length).toBeGreaterThanOrEqual(18);
    expect(routes).toContainEqual({ route: "/v1/ws", method: "GET" });
    expect(routes).toContainEqual({ route: "/rooms/{roomName}", method: "GET" });
    for (const { route, method } of routes) {
      const url = route.replace("{id}", "00000000-0000-0000-0000-000000000000").replace(/\{[^}]+\}/gu, "x");
      const { status, json } = await call(method, url);
      // A route that exists answers anything but the framework's "no such route".
      const unmatched = status === 404 && JSON.stringify(json).includes("no such route");
      expect(unmatched, `${method} ${route}`).toBe(false);
    }
  });

  it("documents every error response with the error body, and real errors match it", async () => {
    for (const [route, methods] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        for (const [status, response] of Object.entries(operation.responses)) {
          // /readyz's 503 is its readiness report, for load balancers, not an error of the request.
          if (Number(status) < 400 || route === "/readyz") continue;
          const schema = response.content?.["application/json"]?.schema as
            { properties?: object } | undefined;
          expect(schema?.properties, `${method} ${route} ${status}`).toHaveProperty("error");
        }
      }
    }
    const refused = await fetch(new URL("/v1/session", server.baseUrl));
    expect(refused.status).toBe(401);
    expectValid(responseSchema("/v1/session", "get", 401), await refused.json());
    const notFound = await call("GET", "/api/dubbing/jobs/00000000-0000-0000-0000-000000000000");
    expect(notFound.status).toBe(404);
    expectValid(responseSchema("/api/dubbing/jobs/{id}", "get", 404), notFound.json);
  });

  it("documents every operation's success: a 2xx, or a WebSocket endpoint's 101 upgrade", () => {
    const undocumented: string[] = [];
    for (const [route, methods] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        const statuses = Object.keys(operation.responses).map(Number);
        // A WebSocket endpoint is the one that answers 426 to a plain GET.
        const success = statuses.includes(426)
          ? statuses.includes(101)
          : statuses.some((s) => s >= 200 && s < 300);
        if (!success) undocumented.push(`${method.toUpperCase()} ${route}`);
      }
    }
    expect(undocumented).toEqual([]);
    const subtitles = doc.paths["/api/dubbing/jobs/{id}/subtitles"]?.get?.responses["200"]?.content ?? {};
    expect(Object.keys(subtitles).sort()).toEqual(["application/x-subrip", "text/vtt"]);
  });

  it.skipIf(sharedMissing("data/speech"))(
    "describes a real session: GET /v1/session's answer and every WebSocket message",
    async () => {
      const created = await call("GET", "/v1/session?sourceLanguage=en&targetLanguage=es");
      expect(created.status).toBe(200);
      expectValid(responseSchema("/v1/session", "get", 200), created.json);

      const messagesDoc = (await (
        await fetch(new URL("/v1/messages.schema.json", server.baseUrl))
      ).json()) as {
        $defs: Record<string, object>;
      };
      const serverMessage = ajv.compile(messagesDoc.$defs.ServerMessage!);
      const clientMessage = ajv.compile(messagesDoc.$defs.ClientMessage!);
      const socket = await RealtimeSocket.connect((created.json as { ws_url: string }).ws_url);
      await socket.waitFor((m) => m.type === "ready");
      await socket.stream(
        await readWavAsPcm16(sharedPath("data/speech/librivox-pocketsphinx/goforward.wav")),
        {
          speed: 4,
        },
      );
      const finalize = { type: "finalize" };
      expectValid(clientMessage, finalize);
      socket.send(finalize);
      await socket.waitFor((m) => m.type === "translated_transcript" && m.is_final === true);
      const update = { type: "update_metadata", metadata: { context: "a lecture" } };
      expectValid(clientMessage, update);
      socket.send(update);
      await socket.waitFor((m) => m.type === "metadata_ack");
      socket.send({ type: "no_such_message" });
      socket.sendRaw("not json", false);
      await socket.waitFor((m) => m.type === "error");
      socket.close();
      const types = new Set(socket.messages.map((m) => m.type));
      expect([...types].sort()).toEqual(
        ["error", "metadata_ack", "original_transcript", "ready", "translated_transcript"].sort(),
      );
      for (const message of socket.messages) expectValid(serverMessage, message);
      // The schema is not a rubber stamp.
      expect(serverMessage({ type: "original_transcript", text: 1 })).toBe(false);
    },
  );

  it.skipIf(sharedMissing("data/speech"))(
    "describes a real dubbing job from creation to completion",
    async () => {
      const client = dubbingClient(server.baseUrl, API_KEY);
      const uploaded = await call("POST", "/api/dubbing/upload-url", {
        filename: "talk.mp4",
        content_type: "video/mp4",
      });
      expectValid(responseSchema("/api/dubbing/upload-url", "post", 200), uploaded.json);
      const sourceUrl = await client.upload(await makeTestVideo(dir));
      const created = await call("POST", "/api/dubbing/jobs", {
        source_url: sourceUrl,
        source_lang: "en",
        target_lang: "es",
      });
      expect(created.status).toBe(201);
      expectValid(responseSchema("/api/dubbing/jobs", "post", 201), created.json);
      const jobId = (created.json as { job_id: string }).job_id;
      const job = await client.finished(jobId);
      expect(job.status).toBe("completed");
      expectValid(responseSchema("/api/dubbing/jobs/{id}", "get", 200), job);
      expectValid(
        responseSchema("/api/dubbing/jobs/{id}/result", "get", 200),
        (await call("GET", `/api/dubbing/jobs/${jobId}/result`)).json,
      );
      expectValid(
        responseSchema("/api/dubbing/jobs", "get", 200),
        (await call("GET", "/api/dubbing/jobs")).json,
      );
      // The subtitles answer in a content type their documented 200 names.
      const documented = doc.paths["/api/dubbing/jobs/{id}/subtitles"]?.get?.responses["200"]?.content ?? {};
      for (const format of ["vtt", "srt"]) {
        const subtitles = await fetch(
          new URL(`/api/dubbing/jobs/${jobId}/subtitles?track=translated&format=${format}`, server.baseUrl),
          { headers: { authorization: `Bearer ${API_KEY}` } },
        );
        expect(subtitles.status).toBe(200);
        const type = subtitles.headers.get("content-type")?.split(";")[0] ?? "";
        expect(Object.keys(documented)).toContain(type);
      }
    },
    120_000,
  );

  it("serves the reference page at /docs and the document it reads", async () => {
    const page = await fetch(new URL("/docs/", server.baseUrl));
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toMatch(/text\/html/u);
    expect(await page.text()).toMatch(/swagger/iu);
    const json = await fetch(new URL("/docs/json", server.baseUrl));
    expect(((await json.json()) as OpenApi).openapi).toBe("3.1.0");
  });
});
