/**
 * What an operator sees: Prometheus metrics at /metrics (moved by a real session through the real
 * engines) and liveness / readiness; request ids are in http-hardening.test.ts.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readWavAsPcm16 } from "../../src/audio/wav.js";
import { createSession, RealtimeSocket } from "../../src/cli/recording-socket.js";
import { dubbingClient } from "../support/dubbing-client.js";
import { makeTestVideo } from "../support/media.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";
import { sharedMissing, sharedPath } from "../support/shared.js";
import { openSession } from "../support/session-socket.js";

const SPEECH_MISSING = sharedMissing("data/speech/librivox-pocketsphinx");
let server: TestServer;

let dir: string | undefined;

beforeAll(async () => {
  server = await startServer({ DUBBING_WORKERS: "1" });
});
afterAll(async () => {
  await server?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function scrape(): Promise<string> {
  const response = await fetch(new URL("/metrics", server.baseUrl));
  expect(response.status).toBe(200);
  expect(response.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
  return response.text();
}

/** The value of one series (`name{labels}`), or undefined when it is not exported. */
function valueOf(text: string, series: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe("GET /metrics", () => {
  // (prom-client writes NaN as "Nan"; Prometheus parses floats case-insensitively.)
  it("is Prometheus text: every sample line is a metric name, optional labels and a number", async () => {
    const text = await scrape();
    for (const line of text.split("\n").filter((l) => l !== "" && !l.startsWith("#")))
      expect(line).toMatch(/^[a-zA-Z_:][\w:]*(\{[^}]*\})? (-?[\d.e+-]+|[Nn]a[Nn]|\+Inf|-Inf)$/u);
    expect(valueOf(text, "relay_sessions_capacity")).toBeGreaterThan(0);
    expect(valueOf(text, "relay_sessions_live")).toBe(0);
    expect(valueOf(text, 'relay_dubbing_jobs{status="pending"}')).toBe(0);
    expect(text).toContain("relay_process_resident_memory_bytes");
  });

  it.skipIf(SPEECH_MISSING)(
    "counts a real session: its close code, pipeline latencies and engine calls",
    async () => {
      const before = await scrape();
      const closedBefore = valueOf(before, 'relay_sessions_closed_total{by="client",code="1000"}') ?? 0;
      const session = await createSession(server.baseUrl, API_KEY, {
        sourceLanguage: "en",
        targetLanguage: "es",
      });
      const socket = await RealtimeSocket.connect(session.ws_url);
      await socket.waitFor((m) => m.type === "ready");
      const live = await scrape();
      expect(valueOf(live, "relay_sessions_live")).toBe(1);

      const speech = await readWavAsPcm16(sharedPath("data/speech/librivox-pocketsphinx/goforward.wav"));
      await socket.stream(speech, { speed: 4 });
      socket.finalize();
      // Stable mode may commit the line in parts: wait for the whole translation.
      await socket.waitFor(
        (m) =>
          m.type === "translated_transcript" && m.is_final === true && /diez metros/i.test(String(m.text)),
      );
      // Speech follows the translation: wait for its last frame.
      for (let i = 0; i < 200 && socket.audioFrames.length === 0; i++)
        await new Promise((r) => setTimeout(r, 50));
      expect(socket.audioFrames.length).toBeGreaterThan(0);
      socket.close();
      let after = await scrape();
      for (let i = 0; i < 100 && valueOf(after, "relay_sessions_live") !== 0; i++) {
        await new Promise((r) => setTimeout(r, 50));
        after = await scrape();
      }

      expect(valueOf(after, "relay_sessions_live")).toBe(0);
      expect(valueOf(after, 'relay_sessions_closed_total{by="client",code="1000"}')).toBe(closedBefore + 1);
      for (const stage of ["first_interim", "final_transcript", "translation", "first_audio"])
        expect(
          valueOf(after, `relay_pipeline_latency_seconds_count{stage="${stage}"}`),
        ).toBeGreaterThanOrEqual(1);
      expect(
        valueOf(
          after,
          'relay_engine_call_seconds_count{kind="recognize",engine="pocketsphinx",outcome="ok"}',
        ),
      ).toBeGreaterThanOrEqual(1);
      expect(
        valueOf(after, 'relay_engine_call_seconds_count{kind="translate",engine="apertium",outcome="ok"}'),
      ).toBeGreaterThanOrEqual(1);
      expect(
        valueOf(after, 'relay_engine_call_seconds_count{kind="synthesize",engine="espeak-ng",outcome="ok"}'),
      ).toBeGreaterThanOrEqual(1);
      expect(
        valueOf(after, 'relay_http_requests_total{method="GET",route="/v1/session",status="200"}'),
      ).toBeGreaterThanOrEqual(1);
    },
  );

  it.skipIf(SPEECH_MISSING)("counts dubbing jobs by status, their stage durations and outcomes", async () => {
    dir = await mkdtemp(path.join(tmpdir(), "relay-metrics-"));
    const client = dubbingClient(server.baseUrl, API_KEY);
    const { body } = await client.request("POST", "/api/dubbing/jobs", {
      source_url: await client.upload(await makeTestVideo(dir)),
      source_lang: "en",
      target_lang: "es",
      voice: "female",
    });
    const job = await client.finished(body.job_id as string);
    expect(job.status).toBe("completed");
    const text = await scrape();
    expect(valueOf(text, 'relay_dubbing_jobs{status="completed"}')).toBe(1);
    expect(valueOf(text, 'relay_dubbing_jobs{status="pending"}')).toBe(0);
    expect(valueOf(text, 'relay_dubbing_jobs_finished_total{outcome="completed"}')).toBe(1);
    for (const stage of ["downloading", "probing", "segmenting", "recognizing", "synthesizing", "muxing"])
      expect(valueOf(text, `relay_dubbing_stage_seconds_count{stage="${stage}"}`)).toBe(1);
  });

  it("counts the client's close codes apart from the server's, collapsing the codes a client chooses", async () => {
    const series = (by: string, code: string) => `relay_sessions_closed_total{by="${by}",code="${code}"}`;
    const before = await scrape();
    const open = (params: Record<string, string> = {}) => openSession(server.baseUrl, params);
    // Codes a client may choose: each counted as "other", none as a series of its own.
    for (const code of [3000, 4123, 4999]) {
      const socket = await open();
      socket.close(code);
      await socket.closed();
    }
    // The server's own close after a session-start error, and after a message over 64 KiB.
    const rejected = await open({ modelName: "nope" });
    expect(await rejected.closed()).toBe(1000);
    const oversized = await open();
    oversized.sendRaw(Buffer.alloc(65 * 1024), true);
    expect(await oversized.closed()).toBe(1009);
    const closedBy = (text: string, by: string, code: string) => valueOf(text, series(by, code)) ?? 0;
    const others = closedBy(before, "client", "other") + 3;
    await expect.poll(async () => closedBy(await scrape(), "client", "other")).toBe(others);
    const after = await scrape();
    expect(closedBy(after, "client", "other")).toBe(closedBy(before, "client", "other") + 3);
    expect(closedBy(after, "server", "1000")).toBe(closedBy(before, "server", "1000") + 1);
    expect(closedBy(after, "server", "1009")).toBe(closedBy(before, "server", "1009") + 1);
    expect(after).not.toMatch(/relay_sessions_closed_total\{[^}]*code="(3000|4123|4999)"/u);
  });

  it("counts refusals by route and status", async () => {
    const response = await fetch(new URL("/v1/session", server.baseUrl), {
      headers: { authorization: "Bearer nope" },
    });
    expect(response.status).toBe(401);
    const text = await scrape();
    expect(
      valueOf(text, 'relay_http_requests_total{method="GET",route="/v1/session",status="401"}'),
    ).toBeGreaterThanOrEqual(1);
  });
});

describe("liveness and readiness", () => {
  it("/livez and /readyz answer 200 while the service is whole", async () => {
    const live = await fetch(new URL("/livez", server.baseUrl));
    expect(live.status).toBe(200);
    expect(await live.json()).toMatchObject({ status: "ok", worker_id: expect.any(String) });
    const ready = await fetch(new URL("/readyz", server.baseUrl));
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ status: "ready", problems: [] });
  });

  it("/readyz answers 503 once the database cannot be reached", async () => {
    const other = await startServer({}, { registry: server.services.registry });
    try {
      await other.services.db.close();
      const ready = await fetch(new URL("/readyz", other.baseUrl));
      expect(ready.status).toBe(503);
      expect(await ready.json()).toMatchObject({
        status: "not_ready",
        problems: [expect.stringMatching(/^database unreachable/)],
      });
      expect((await fetch(new URL("/livez", other.baseUrl))).status).toBe(200);
    } finally {
      await other.close().catch(() => undefined);
    }
  });
});
