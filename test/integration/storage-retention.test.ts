import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { startDubbingWorkers } from "../../src/dubbing/jobs/worker.js";
import { dubbingClient, type DubbingAnswer } from "../support/dubbing-client.js";
import { API_KEY, BROKE_KEY, DUBBING_ONLY_KEY, startServer, type TestServer } from "../support/server.js";

/**
 * What the object store keeps, through the real server: uploads deleted once their jobs finished or
 * their URL expired unused (never while a job still needs them, even one whose worker died),
 * results deleted after their retention (the status and /result then say so), upload URLs that
 * need a positive balance, fit a per-account quota and store one file once.
 */
function api(server: TestServer, method: string, route: string, body?: unknown, key = API_KEY) {
  return dubbingClient(server.baseUrl, key).request(method, route, body);
}

async function waitFor(what: string, condition: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  // performance.now(): the retention test moves Date by hand.
  const deadline = performance.now() + timeoutMs;
  while (!(await condition())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

interface Upload {
  readonly id: string;
  readonly sourceUrl: string;
  readonly url: string;
  readonly headers: Record<string, string>;
  readonly maxBytes: number;
}

async function uploadUrl(server: TestServer, contentType = "audio/wav", key = API_KEY): Promise<Upload> {
  const { status, body } = await api(
    server,
    "POST",
    "/api/dubbing/upload-url",
    {
      filename: "clip.wav",
      content_type: contentType,
    },
    key,
  );
  expect(status, JSON.stringify(body)).toBe(200);
  return {
    id: body.upload_id as string,
    sourceUrl: body.source_url as string,
    url: body.upload_url as string,
    headers: body.upload_headers as Record<string, string>,
    maxBytes: body.max_file_size_bytes as number,
  };
}

async function put(upload: Upload, body: Buffer): Promise<DubbingAnswer> {
  const response = await fetch(upload.url, { method: "PUT", headers: upload.headers, body });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

describe("retention of uploads and results", () => {
  let server: TestServer;
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "retention-"));
    server = await startServer({
      DUBBING_WORKERS: "0",
      UPLOAD_URL_TTL_SEC: "2",
      UPLOAD_RETENTION_SEC: "0",
      RESULT_RETENTION_SEC: "4",
      RETENTION_SWEEP_SEC: "1",
      RATE_LIMIT_PER_MINUTE: "1000",
    });
  });
  afterAll(async () => {
    await server?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("keeps uploads unfinished jobs need, deletes them once their jobs finished or their URL expired unused, and results after their retention", async () => {
    const store = server.services.store;
    const db = server.services.db;
    // The service (in this process) reads the time from Date: it stands still until the test moves
    // it, so URLs and results expire when the test says, however slowly a loaded machine gets to
    // each step (the sweeps and the worker still run on real timers).
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() });
    try {
      await keepsAndDeletes(store, db);
    } finally {
      vi.useRealTimers();
    }
  });

  async function keepsAndDeletes(
    store: TestServer["services"]["store"],
    db: TestServer["services"]["db"],
  ): Promise<void> {
    // Jobs on it fail quickly (unsupported_format): what matters here is that they finish.
    const notMedia = Buffer.from("not media at all ".repeat(100));
    const createJob = async (upload: Upload, targetLang = "es") =>
      api(server, "POST", "/api/dubbing/jobs", {
        source_url: upload.sourceUrl,
        source_lang: "en",
        target_lang: targetLang,
      });

    const forResult = await uploadUrl(server);
    const forPending = await uploadUrl(server);
    const forRetried = await uploadUrl(server);
    const unused = await uploadUrl(server);
    const neverPut = await uploadUrl(server);
    for (const upload of [forResult, forPending, forRetried, unused]) {
      expect((await put(upload, notMedia)).status).toBe(200);
    }

    // A job completes (its result stored as a worker stores it).
    const resultJob = await createJob(forResult);
    expect(resultJob.status, JSON.stringify(resultJob.body)).toBe(201);
    const resultJobId = resultJob.body.job_id as string;
    const finisher = (await db.jobs.claim("finisher/0", 60_000))!;
    expect(finisher.id).toBe(resultJobId);
    const resultKey = `results/${resultJobId}.mp3`;
    const resultFile = path.join(dir, "result.mp3");
    await writeFile(resultFile, "a dubbed file");
    await store.putFile(resultKey, resultFile, "audio/mpeg");
    await db.jobs.update(resultJobId, "finisher/0", { outputKind: "audio" });
    expect(
      await db.jobs.complete(resultJobId, "finisher/0", {
        outputKey: resultKey,
        costUsd: 0,
        progress: { stage: "completed", stageName: "Completed", percent: 100 },
      }),
    ).toBe(true);
    const completed = (await api(server, "GET", `/api/dubbing/jobs/${resultJobId}`)).body;
    expect(completed).toMatchObject({
      status: "completed",
      output_url: expect.any(String),
      output_expired: false,
    });
    const retainedUntil = Date.parse(completed.output_retained_until as string);
    expect(retainedUntil - Date.parse(completed.updated_at as string)).toBe(4000);
    // The output URL never outlives the result.
    expect(Date.parse(completed.output_expires_at as string)).toBeLessThanOrEqual(retainedUntil);

    // Jobs are taken oldest first: each is created a moment after the one before.
    vi.setSystemTime(Date.now() + 10);
    const pendingJob = (await createJob(forPending)).body.job_id as string;
    vi.setSystemTime(Date.now() + 10);
    const retriedJob = (await createJob(forRetried)).body.job_id as string;
    // A worker takes a job and dies at once: the job is running, its lease expired, nobody on it.
    const taken = (await db.jobs.claim("dead-worker/0", 1))!;
    expect(taken.id).toBe(pendingJob);
    expect(await db.jobs.update(taken.id, "dead-worker/0", { status: "downloading" })).toBe(true);
    const jobs = { retried: taken.id, pending: retriedJob };
    // The upload URLs expire (2 s; their rows a second later, src/api/dubbing/submission.ts), and
    // the dead worker's lease.
    vi.setSystemTime(Date.now() + 3_500);

    // Sweeps run once the URLs have expired: the unused upload, the one never PUT and the completed
    // job's go...
    for (const upload of [unused, neverPut, forResult]) {
      await waitFor(
        "an upload no unfinished job needs is deleted",
        async () => (await db.uploads.get(upload.id))!.deletedAt !== null,
      );
      await waitFor("its object is deleted", async () => !(await store.exists(`uploads/${upload.id}`)));
    }
    // ...while those of the pending job and of the running job whose worker died stay.
    for (const upload of [forPending, forRetried]) {
      expect(await store.exists(`uploads/${upload.id}`)).toBe(true);
      expect((await db.uploads.get(upload.id))!.deletedAt).toBeNull();
    }
    const late = await createJob(unused);
    expect(late.status).toBe(400);
    expect(late.body).toMatchObject({
      error: { code: "invalid_url", message: expect.stringMatching(/has been deleted/) },
    });

    // The result goes after its retention (4 s after it completed); the status and /result say so.
    vi.setSystemTime(Date.now() + 1_500);
    await waitFor(
      "the result has expired",
      async () => (await api(server, "GET", `/api/dubbing/jobs/${resultJobId}/result`)).status === 404,
    );
    const result = await api(server, "GET", `/api/dubbing/jobs/${resultJobId}/result`);
    expect(result.body).toMatchObject({
      error: {
        code: "result_expired",
        message: expect.stringMatching(/was deleted on .*kept 4 seconds after the job completed/),
      },
    });
    const expired = await api(server, "GET", `/api/dubbing/jobs/${resultJobId}`);
    expect(expired.body).toMatchObject({
      status: "completed",
      output_expired: true,
      output_url: null,
      output_expires_at: null,
    });
    await waitFor("the result object is deleted", async () => !(await store.exists(resultKey)));

    // A worker comes: it runs the pending job and takes over the dead worker's; once they have
    // finished, their uploads go.
    const workers = startDubbingWorkers(
      { ...server.config, dubbing: { ...server.config.dubbing, workers: 1 } },
      server.services,
      server.app.http.log,
      { pollMs: 100 },
    );
    try {
      for (const id of Object.values(jobs)) {
        await waitFor(
          "the job has failed",
          async () => (await api(server, "GET", `/api/dubbing/jobs/${id}`)).body.status === "failed",
        );
      }
      for (const upload of [forPending, forRetried]) {
        await waitFor(
          "a finished job's upload is deleted",
          async () => !(await store.exists(`uploads/${upload.id}`)),
        );
      }
      expect((await createJob(forPending, "fr")).status).toBe(400);
    } finally {
      await workers.stop();
    }
  }
});

describe("upload URLs: balance, quota, one PUT", () => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startServer({
      STORAGE_QUOTA_BYTES: "1000",
      DUBBING_MAX_FILE_BYTES: "600",
      RATE_LIMIT_PER_MINUTE: "1000",
    });
  });
  afterAll(async () => {
    await server?.close();
  });

  it("refuses an account without balance with 402", async () => {
    const refused = await api(
      server,
      "POST",
      "/api/dubbing/upload-url",
      {
        filename: "clip.wav",
        content_type: "audio/wav",
      },
      BROKE_KEY,
    );
    expect(refused.status).toBe(402);
    expect(refused.body).toMatchObject({ error: { code: "insufficient_balance" } });
  });

  it("fits upload URLs into the account's quota, counting a stored file at its size", async () => {
    const first = await uploadUrl(server);
    expect(first.maxBytes).toBe(600);
    const second = await uploadUrl(server);
    // What the quota leaves.
    expect(second.maxBytes).toBe(400);
    const refused = await api(server, "POST", "/api/dubbing/upload-url", {
      filename: "clip.wav",
      content_type: "audio/wav",
    });
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({
      error: {
        code: "storage_quota_exceeded",
        message: expect.stringMatching(/1000 of its 1000-byte storage quota/),
      },
    });

    // Stored, the first counts 100 bytes instead of 600.
    expect(await put(first, Buffer.alloc(100, 1))).toMatchObject({ status: 200, body: { bytes: 100 } });
    const third = await uploadUrl(server);
    expect(third.maxBytes).toBe(500);
    // A URL's allowance is a hard limit on its PUT.
    expect((await put(second, Buffer.alloc(401, 2))).status).toBe(413);
  });

  it("stores one file per upload URL: a second PUT is refused with 412", async () => {
    // Another account: the test before used up this one's quota.
    const upload = await uploadUrl(server, "audio/wav", DUBBING_ONLY_KEY);
    expect((await put(upload, Buffer.alloc(50, 3))).status).toBe(200);
    const second = await put(upload, Buffer.alloc(60, 4));
    expect(second.status).toBe(412);
    expect(second.body).toMatchObject({ error: { code: "already_uploaded" } });
    expect(await server.services.db.uploads.get(upload.id)).toMatchObject({ deletedAt: null });
  });
});
