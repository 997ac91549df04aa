import { readFile, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { injectApp } from "../support/app.js";
import { durationOf, makeTestVideo, probeStreams } from "../support/media.js";
import { API_KEY, BROKE_KEY, startServer, type TestServer } from "../support/server.js";
import { sharedMissing } from "../support/shared.js";

/**
 * The dubbing REST API end to end: real HTTP, real upload, real worker, real engines and ffmpeg.
 * The validation tests need none of that but the real engines (what they refuse depends on what
 * the engines serve): they go through `inject()`, on an injected app where the limits differ.
 */
const SPEECH_MISSING = sharedMissing("data/speech/librivox-pocketsphinx");

let server: TestServer;
let dir: string;
let video: string;
let sourceServer: Server;
let sourceBase: string;

type Send = (route: string, init: RequestInit) => Promise<Response>;

/** A request to the API over the port. */
function api(
  method: string,
  route: string,
  body?: unknown,
  headers: Record<string, string> = {},
  key = API_KEY,
) {
  return call((path, init) => fetch(new URL(path, server.baseUrl), init), method, route, body, headers, key);
}

/** The same request through `inject()`. */
function injected(
  method: string,
  route: string,
  body?: unknown,
  headers: Record<string, string> = {},
  key = API_KEY,
) {
  return call(server.inject, method, route, body, headers, key);
}

async function call(
  send: Send,
  method: string,
  route: string,
  body: unknown,
  headers: Record<string, string>,
  key: string,
): Promise<{ status: number; body: Record<string, unknown>; headers: Headers }> {
  const response = await send(route, {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
      ...headers,
    },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  return {
    status: response.status,
    body: (await response.json()) as Record<string, unknown>,
    headers: response.headers,
  };
}

async function waitForJob(
  id: string,
  timeoutMs = 120_000,
): Promise<{ job: Record<string, unknown>; percents: number[] }> {
  const deadline = Date.now() + timeoutMs;
  const percents: number[] = [];
  for (;;) {
    const { body: job } = await api("GET", `/api/dubbing/jobs/${id}`);
    const progress = job.progress as { percent: number } | null;
    if (progress) percents.push(progress.percent);
    if (job.status === "completed" || job.status === "failed") return { job, percents };
    if (Date.now() > deadline) throw new Error(`job ${id} still ${String(job.status)}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "dubbing-api-"));
  server = await startServer({
    DUBBING_WORKERS: "1",
    SOURCE_URL_ALLOW_PRIVATE: "1",
    RATE_LIMIT_PER_MINUTE: "1000",
  });
  if (!SPEECH_MISSING) video = await makeTestVideo(dir);
  await writeFile(path.join(dir, "not-media.mp4"), "this is not a video at all".repeat(100));
  sourceServer = createServer((request, response) => {
    const file = path.join(dir, path.basename(request.url ?? ""));
    readFile(file).then(
      (bytes) => response.writeHead(200, { "content-type": "video/mp4" }).end(bytes),
      () => response.writeHead(404).end("missing"),
    );
  });
  await new Promise<void>((resolve) => sourceServer.listen(0, "127.0.0.1", resolve));
  sourceBase = `http://127.0.0.1:${(sourceServer.address() as { port: number }).port}`;
});
afterAll(async () => {
  await server?.close();
  await new Promise((resolve) => sourceServer?.close(resolve));
  await rm(dir, { recursive: true, force: true });
});

describe.skipIf(SPEECH_MISSING)("dubbing a video end to end", () => {
  it("uploads through the presigned URL, runs the job with monotonic progress, charges once and returns a dubbed MP4", async () => {
    const balanceBefore = await server.services.db.accounts.balanceUsd(
      (await server.services.db.accounts.findByKey(API_KEY))!.id,
    );
    const upload = await api("POST", "/api/dubbing/upload-url", {
      filename: "talk.mp4",
      content_type: "video/mp4",
    });
    expect(upload.status).toBe(200);
    expect(upload.body).toMatchObject({
      upload_url: expect.stringMatching(/^http/),
      source_url: expect.stringMatching(/^http/),
      upload_id: expect.any(String),
      max_file_size_bytes: 500 * 1024 * 1024,
      expires_in_sec: expect.any(Number),
    });
    const put = await fetch(upload.body.upload_url as string, {
      method: "PUT",
      headers: { "content-type": "video/mp4" },
      body: await readFile(video),
    });
    expect(put.status).toBeLessThan(300);

    const created = await api("POST", "/api/dubbing/jobs", {
      source_url: upload.body.source_url,
      target_lang: "es",
      source_lang: "en",
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      job_id: expect.any(String),
      status: "pending",
      source_lang: "en",
      target_lang: "es",
      created_at: expect.any(String),
      limits: { max_duration_sec: 600, max_file_size_bytes: 500 * 1024 * 1024 },
    });
    const { job, percents } = await waitForJob(created.body.job_id as string);
    expect(job.error ?? null).toBeNull();
    expect(job.status).toBe("completed");
    for (let i = 1; i < percents.length; i++) expect(percents[i]).toBeGreaterThanOrEqual(percents[i - 1]!);
    expect(percents.at(-1)).toBe(100);
    expect(job.input_duration_sec as number).toBeCloseTo(7.2, 0);
    expect(job.cost_usd).toBeCloseTo((Math.ceil(job.input_duration_sec as number) * 0.5) / 60, 5);
    expect(Date.parse(job.output_expires_at as string) - Date.now()).toBeGreaterThan(47 * 3600 * 1000);

    const segments = job.segments as { text: string; translated_text: string }[];
    expect(segments.map((s) => s.text).join(" ")).toContain("go forward ten meters");
    expect(segments.map((s) => s.translated_text).join(" ")).toMatch(/metros/);

    const download = await fetch(job.output_url as string);
    expect(download.status).toBe(200);
    const output = path.join(dir, "dubbed.mp4");
    await writeFile(output, Buffer.from(await download.arrayBuffer()));
    const streams = await probeStreams(output);
    expect(streams.find((s) => s.codec_type === "video")?.codec_name).toBe("h264");
    expect(streams.find((s) => s.codec_type === "audio")?.codec_name).toBe("aac");
    expect(Math.abs((await durationOf(output)) - 7.2)).toBeLessThan(0.3);

    const result = await api("GET", `/api/dubbing/jobs/${job.job_id as string}/result`);
    expect(result.body).toEqual({
      job_id: job.job_id,
      download_url: expect.any(String),
      expires_at: expect.any(String),
    });
    expect((await fetch(result.body.download_url as string)).status).toBe(200);

    const srt = await fetch(
      new URL(
        `/api/dubbing/jobs/${job.job_id as string}/subtitles?track=translated&format=srt`,
        server.baseUrl,
      ),
      {
        headers: { authorization: `Bearer ${API_KEY}` },
      },
    );
    expect(await srt.text()).toMatch(/^1\n00:00:\d\d,\d{3} --> 00:00:\d\d,\d{3}\n.*metros/ms);

    const balanceAfter = await server.services.db.accounts.balanceUsd(
      (await server.services.db.accounts.findByKey(API_KEY))!.id,
    );
    expect(balanceBefore - balanceAfter).toBeCloseTo(job.cost_usd as number, 6);
  });

  it("downloads public URLs, and fails with the spec's codes for bad sources", async () => {
    const good = await api("POST", "/api/dubbing/jobs", {
      source_url: `${sourceBase}/${path.basename(video)}`,
      target_lang: "fr",
      source_lang: "en",
    });
    const missing = await api("POST", "/api/dubbing/jobs", {
      source_url: `${sourceBase}/nothing.mp4`,
      target_lang: "es",
      source_lang: "en",
    });
    const garbage = await api("POST", "/api/dubbing/jobs", {
      source_url: `${sourceBase}/not-media.mp4`,
      target_lang: "es",
      source_lang: "en",
    });
    const [goodJob, missingJob, garbageJob] = (await Promise.all(
      [good, missing, garbage].map((r) => waitForJob(r.body.job_id as string)),
    )) as [
      Awaited<ReturnType<typeof waitForJob>>,
      Awaited<ReturnType<typeof waitForJob>>,
      Awaited<ReturnType<typeof waitForJob>>,
    ];
    expect(goodJob.job.status).toBe("completed");
    expect(goodJob.job).toMatchObject({ error: null, error_message: null });
    expect(missingJob.job).toMatchObject({
      error: "download_failed",
      error_message: expect.stringMatching(/404/),
    });
    expect(garbageJob.job).toMatchObject({ error: "unsupported_format", error_message: expect.any(String) });
    expect(missingJob.job.cost_usd ?? null).toBeNull();
  });
});

describe("dubbing API validation", () => {
  it("rejects bad requests with the error body and the spec's codes", async () => {
    const cases: [unknown, number, string][] = [
      [{ source_url: "not a url", target_lang: "es" }, 400, "invalid_url"],
      [{ source_url: "ftp://example.com/v.mp4", target_lang: "es" }, 400, "invalid_url"],
      [{ source_url: "https://example.com/v.mp4", target_lang: "xx" }, 400, "unsupported_language"],
      [
        { source_url: "https://example.com/v.mp4", target_lang: "es", source_lang: "de" },
        400,
        "unsupported_language",
      ],
      [{ target_lang: "es" }, 400, "invalid_url"],
      ["{not json", 400, "invalid_request"],
      [[1, 2], 400, "invalid_request"],
    ];
    for (const [body, status, code] of cases) {
      const response = await injected("POST", "/api/dubbing/jobs", body);
      expect(response.status).toBe(status);
      expect(response.body).toEqual({ error: { code, message: expect.any(String) } });
    }
    const ja = await injected("POST", "/api/dubbing/jobs", {
      source_url: "https://example.com/v.mp4",
      target_lang: "ja",
    });
    expect(ja.status).toBe(400);
    expect((ja.body.error as { message: string }).message).toMatch(/translation into "ja"/);
  });

  it("accepts source_lang auto (also by default) when the recognizers know one language", async () => {
    // Jobs are dubbed from English, checked to sound like it (dubbing-auto-source.test.ts).
    expect(server.registry.languageIdentifier()).toBeUndefined();
    expect(server.registry.recognitionLanguages()).toEqual(["en"]);
    for (const body of [
      { source_url: "https://203.0.113.1/default.mp4", target_lang: "es" },
      { source_url: "https://203.0.113.1/auto.mp4", target_lang: "es", source_lang: "auto" },
    ]) {
      const accepted = await injected("POST", "/api/dubbing/jobs", body);
      expect(accepted.status).toBe(201);
      expect(accepted.body.source_lang).toBe("auto");
    }
  });

  it("answers 401 without a key and 402 without balance", async () => {
    const anonymous = await server.inject("/api/dubbing/jobs");
    expect(anonymous.status).toBe(401);
    const broke = await injected(
      "POST",
      "/api/dubbing/jobs",
      { source_url: "https://example.com/v.mp4", target_lang: "es", source_lang: "en" },
      {},
      BROKE_KEY,
    );
    expect(broke.status).toBe(402);
    expect(broke.body).toEqual({ error: { code: "insufficient_balance", message: expect.any(String) } });
  });

  it("404s unknown jobs and results of unfinished jobs; lists newest first with bounds checked", async () => {
    const unknown = await injected("GET", "/api/dubbing/jobs/no-such-job");
    expect(unknown.status).toBe(404);
    expect(unknown.body).toEqual({ error: { code: "not_found", message: expect.any(String) } });
    const created = await injected("POST", "/api/dubbing/jobs", {
      source_url: "https://203.0.113.1/never.mp4",
      target_lang: "es",
      source_lang: "en",
    });
    const early = await injected("GET", `/api/dubbing/jobs/${created.body.job_id as string}/result`);
    expect(early.status).toBe(404);
    const list = await injected("GET", "/api/dubbing/jobs?limit=2&offset=0");
    expect(list.body).toMatchObject({ limit: 2, offset: 0, total: expect.any(Number) });
    const jobs = list.body.jobs as { job_id: string; created_at: string }[];
    expect(jobs[0]!.job_id).toBe(created.body.job_id);
    for (const bad of ["limit=0", "limit=101", "offset=-1", "limit=abc"]) {
      const response = await injected("GET", `/api/dubbing/jobs?${bad}`);
      expect(response.status).toBe(400);
    }
  });

  it("makes creation safe to retry with Idempotency-Key", async () => {
    const body = { source_url: "https://203.0.113.1/once.mp4", target_lang: "es", source_lang: "en" };
    const first = await injected("POST", "/api/dubbing/jobs", body, { "idempotency-key": "retry-me-1" });
    const second = await injected("POST", "/api/dubbing/jobs", body, { "idempotency-key": "retry-me-1" });
    expect(first.status).toBe(201);
    expect(second.body.job_id).toBe(first.body.job_id);
  });

  it("rate limits per API key with 429 rate_limited and Retry-After", async () => {
    const limited = await injectApp({ RATE_LIMIT_PER_MINUTE: "3" }, { registry: server.registry });
    try {
      const statuses: number[] = [];
      let last: Response | undefined;
      for (let i = 0; i < 5; i++) {
        last = await limited.inject("/api/dubbing/upload-url", {
          method: "POST",
          headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" },
          body: JSON.stringify({ filename: "a.mp4", content_type: "video/mp4" }),
        });
        statuses.push(last.status);
      }
      expect(statuses).toEqual([200, 200, 200, 429, 429]);
      expect(Number(last!.headers.get("retry-after"))).toBeGreaterThan(0);
      expect(await last!.json()).toEqual({ error: { code: "rate_limited", message: expect.any(String) } });
      // another key is not affected
      const other = await limited.inject("/api/dubbing/upload-url", {
        method: "POST",
        headers: { authorization: "Bearer dubbing-key", "content-type": "application/json" },
        body: JSON.stringify({ filename: "a.mp4", content_type: "video/mp4" }),
      });
      expect(other.status).toBe(200);
    } finally {
      await limited.close();
    }
  });
});
