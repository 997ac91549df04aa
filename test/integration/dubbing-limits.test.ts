import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type ServerResponse, type Server } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { costOf } from "../../src/dubbing/jobs/pricing.js";
import { dubbingClient } from "../support/dubbing-client.js";
import { API_KEY, DUBBING_ONLY_KEY, startServer, type TestServer } from "../support/server.js";

/**
 * What keeps one client from stalling dubbing for everyone, through the real server: a source
 * that drips bytes fails at the download deadline, an account's unfinished jobs are capped (across
 * the processes sharing a database), and a source whose duration cannot be read at creation in
 * time holds the price of the longest accepted input.
 */

let sources: Server;
let sourceBase: string;
/** Responses the source server keeps open (dripping or never answered), ended after the tests. */
const open = new Set<ServerResponse>();
let dir: string;
/** Downloads (requests without a Range header) of `/fair/<name>`, in the order they came. */
const downloads: string[] = [];
/** Called when `/fair/<name>` is first downloaded. */
const downloaded = new Map<string, () => void>();
/** The download of `/fair/first` is answered when this is called. */
let releaseFirst: () => void = () => undefined;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "dubbing-limits-"));
  sources = createServer((request, response) => {
    open.add(response);
    response.on("close", () => open.delete(response));
    if (request.url === "/drip.mp4") {
      // One byte every 100 ms, no Content-Length, never ending: never idle for the 30 s idle limit.
      response.writeHead(200, { "content-type": "video/mp4" });
      const timer = setInterval(() => response.write("x"), 100);
      response.on("close", () => clearInterval(timer));
      return;
    }
    const fair = /^\/fair\/(\w+)$/u.exec(request.url ?? "");
    if (fair) {
      // ffprobe's range requests at creation get a 404 (the duration is unknown, the job holds the
      // longest input's price); downloads are recorded and fail with a 404 too, the first one only
      // when released.
      if (request.headers.range !== undefined) return response.writeHead(404).end();
      const name = fair[1]!;
      downloads.push(name);
      downloaded.get(name)?.();
      if (name === "first") releaseFirst = () => response.writeHead(404).end();
      else response.writeHead(404).end();
      return;
    }
    // "/silent.mp4": headers never come.
  });
  await new Promise<void>((resolve) => sources.listen(0, "127.0.0.1", resolve));
  sourceBase = `http://127.0.0.1:${(sources.address() as { port: number }).port}`;
});

afterAll(async () => {
  for (const response of open) response.destroy();
  sources?.closeAllConnections();
  await new Promise((resolve) => sources?.close(resolve));
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function availableUsd(server: TestServer, key: string): Promise<number> {
  const { db } = server.services;
  return db.accounts.availableUsd((await db.accounts.findByKey(key))!.id);
}

describe("download deadline", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({
      DUBBING_WORKERS: "1",
      SOURCE_URL_ALLOW_PRIVATE: "1",
      DUBBING_SOURCE_PROBE_SEC: "1",
      DUBBING_DOWNLOAD_BASE_SEC: "1",
      DUBBING_DOWNLOAD_MIN_BYTES_PER_SEC: "1000",
    });
  });
  afterAll(async () => server?.close());

  it("a source that drips bytes fails download_failed once it falls behind the deadline", async () => {
    const client = dubbingClient(server.baseUrl, API_KEY);
    const created = await client.request("POST", "/api/dubbing/jobs", {
      source_url: `${sourceBase}/drip.mp4`,
      target_lang: "es",
      source_lang: "en",
    });
    expect(created.status).toBe(201);
    const job = await client.finished(created.body.job_id as string);
    expect(job).toMatchObject({
      status: "failed",
      error: "download_failed",
      error_message: expect.stringMatching(
        /^the download took too long \(\d+ bytes in [\d.]+ s\); a source must arrive within 1 s plus 1 s per 1000 bytes$/,
      ),
      cost_usd: null,
    });
  });
});

describe("jobs per account", () => {
  let first: TestServer;
  let second: TestServer;
  beforeAll(async () => {
    // Two processes sharing one database, as in a fleet.
    const env = {
      DATABASE_URL: `sqlite:${path.join(dir, "shared.db")}`,
      DUBBING_JOBS_PER_ACCOUNT: "2",
      RATE_LIMIT_PER_MINUTE: "1000",
    };
    first = await startServer(env);
    second = await startServer(env, { registry: first.registry });
  });
  afterAll(async () => {
    await second?.close();
    await first?.close();
  });

  it("refuses a job beyond DUBBING_JOBS_PER_ACCOUNT unfinished ones with 429, on any process; other accounts are unaffected", async () => {
    // A reserved (documentation) address: the creation probe refuses it at once, the job waits.
    const request = { source_url: "https://203.0.113.1/v.mp4", target_lang: "es", source_lang: "en" };
    const statuses = [
      (await dubbingClient(first.baseUrl, API_KEY).request("POST", "/api/dubbing/jobs", request)).status,
      (await dubbingClient(second.baseUrl, API_KEY).request("POST", "/api/dubbing/jobs", request)).status,
    ];
    expect(statuses).toEqual([201, 201]);
    for (const server of [first, second]) {
      const refused = await dubbingClient(server.baseUrl, API_KEY).request(
        "POST",
        "/api/dubbing/jobs",
        request,
      );
      expect(refused).toEqual({
        status: 429,
        body: {
          error: {
            code: "rate_limited",
            message:
              "the account already has 2 dubbing jobs pending or running, the most it may have; " +
              "create more once some have finished",
          },
        },
      });
    }
    const other = await dubbingClient(second.baseUrl, DUBBING_ONLY_KEY).request(
      "POST",
      "/api/dubbing/jobs",
      request,
    );
    expect(other.status).toBe(201);
  });
});

describe("duration unknown at creation", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({ SOURCE_URL_ALLOW_PRIVATE: "1", DUBBING_SOURCE_PROBE_SEC: "1" });
  });
  afterAll(async () => server?.close());

  it("a source whose headers do not come within DUBBING_SOURCE_PROBE_SEC is accepted holding the longest input's price", async () => {
    const before = await availableUsd(server, DUBBING_ONLY_KEY);
    const created = await dubbingClient(server.baseUrl, DUBBING_ONLY_KEY).request(
      "POST",
      "/api/dubbing/jobs",
      {
        source_url: `${sourceBase}/silent.mp4`,
        target_lang: "es",
        source_lang: "en",
      },
    );
    expect(created.status).toBe(201);
    const maxDurationSec = server.config.dubbing.maxDurationSec;
    expect(before - (await availableUsd(server, DUBBING_ONLY_KEY))).toBeCloseTo(costOf(maxDurationSec), 6);
    const job = await dubbingClient(server.baseUrl, DUBBING_ONLY_KEY).request(
      "GET",
      `/api/dubbing/jobs/${created.body.job_id as string}`,
    );
    expect(job.body).toMatchObject({ status: "pending", input_duration_sec: null });
  });
});

describe("fair claiming", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({ DUBBING_WORKERS: "1", SOURCE_URL_ALLOW_PRIVATE: "1" });
  });
  afterAll(async () => server?.close());

  it("the one worker takes the next job from the account served least recently, not the oldest job", async () => {
    const create = async (key: string, name: string) => {
      const created = await dubbingClient(server.baseUrl, key).request("POST", "/api/dubbing/jobs", {
        source_url: `${sourceBase}/fair/${name}`,
        target_lang: "es",
        source_lang: "en",
      });
      expect(created.status).toBe(201);
      return created.body.job_id as string;
    };
    const firstDownloaded = new Promise<void>((resolve) => downloaded.set("first", resolve));
    const first = await create(API_KEY, "first");
    await firstDownloaded;
    // While the worker is busy with the first, the same account queues two more, then another account one.
    const jobs = [
      [API_KEY, await create(API_KEY, "second")],
      [API_KEY, await create(API_KEY, "third")],
      [DUBBING_ONLY_KEY, await create(DUBBING_ONLY_KEY, "other")],
    ] as const;
    releaseFirst();
    await dubbingClient(server.baseUrl, API_KEY).finished(first);
    for (const [key, id] of jobs) await dubbingClient(server.baseUrl, key).finished(id);
    expect(downloads.filter((name) => ["first", "second", "third", "other"].includes(name))).toEqual([
      "first",
      "other",
      "second",
      "third",
    ]);
  });
});
