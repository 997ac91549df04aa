import { execFile } from "node:child_process";
import { readFile, mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeTestVideo } from "../support/media.js";
import { createTestDatabase, postgresProblem } from "../support/postgres.js";
import { startServer, type TestServer } from "../support/server.js";
import { sharedMissing } from "../support/shared.js";
import { dubbingClient } from "../support/dubbing-client.js";

/**
 * Money over the real HTTP interface, with real workers and engines, on SQLite and on PostgreSQL:
 * concurrent jobs of one account never spend more than its balance, a source's price (an upload's
 * or a public URL's) is checked and held when its job is created, a URL whose duration cannot be
 * read then holds the price of the longest accepted input, and a job found too expensive only
 * after its download fails with the documented reason and costs nothing.
 *
 * The test video lasts 7.2 s: 8 started seconds at 0.50 USD a minute cost 0.066667 USD. The longest
 * accepted input is set to 60 s here, 0.5 USD.
 */
const SPEECH_MISSING = sharedMissing("data/speech/librivox-pocketsphinx");
const pgProblem = await postgresProblem();
if (pgProblem)
  console.warn(`[dubbing-billing] skipping the PostgreSQL run: PostgreSQL unavailable (${pgProblem})`);
const COST = 0.066667;
/** Covers one job of the test video, not two. */
const TIGHT_KEY = "tight-key";
/** Covers one upload job, not two. */
const UPLOAD_KEY = "upload-key";
/** Covers none. */
const POOR_KEY = "poor-key";
/** Covers the test video and its 3 s cut, not the longest accepted input. */
const SMALL_KEY = "small-key";
/** Covers the longest accepted input. */
const RICH_KEY = "rich-key";
/** Covers the 3 s cut, not the test video. */
const CHANGING_KEY = "changing-key";

let dir: string;
let video: string;
let files: Server;
let filesBase: string;
/** Requests for `/unreadable.mp4` without a Range header (downloads) wait for this. */
let downloadGate = gate();

function gate(): { promise: Promise<void>; resolve: () => void } {
  let resolve = (): void => undefined;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "dubbing-billing-"));
  if (!SPEECH_MISSING) {
    video = await makeTestVideo(dir);
    await promisify(execFile)("ffmpeg", [
      "-v",
      "error",
      "-i",
      video,
      "-t",
      "3",
      "-c",
      "copy",
      path.join(dir, "cut.mp4"),
    ]);
  }
  files = createServer((request, response) => {
    // ffprobe reading the headers at creation asks for ranges; the worker's download does not.
    const probing = request.headers.range !== undefined;
    if (request.url === "/unreadable.mp4") {
      // A server that refuses ffprobe's range requests; the download goes through (once released).
      if (probing) return response.writeHead(403).end();
      void downloadGate.promise.then(() =>
        readFile(video).then((bytes) => response.writeHead(200, { "content-type": "video/mp4" }).end(bytes)),
      );
      return;
    }
    // Content that changes after the job was created: a 3 s cut first, the 7.2 s video later.
    const name = request.url === "/changing.mp4" ? (probing ? "cut.mp4" : path.basename(video)) : request.url;
    readFile(path.join(dir, path.basename(name ?? ""))).then(
      (bytes) => response.writeHead(200, { "content-type": "video/mp4" }).end(bytes),
      () => response.writeHead(404).end(),
    );
  });
  await new Promise<void>((resolve) => files.listen(0, "127.0.0.1", resolve));
  filesBase = `http://127.0.0.1:${(files.address() as { port: number }).port}`;
});
afterAll(async () => {
  files?.closeAllConnections();
  await new Promise((resolve) => files?.close(resolve));
  if (dir) await rm(dir, { recursive: true, force: true });
});

const databases: {
  name: string;
  skip: boolean;
  url: () => Promise<{ url?: string; drop(): Promise<void> }>;
}[] = [
  { name: "SQLite", skip: false, url: async () => ({ drop: async () => undefined }) },
  { name: "PostgreSQL", skip: pgProblem !== undefined, url: createTestDatabase },
];

for (const database of databases) {
  describe.skipIf(SPEECH_MISSING || database.skip)(`billing on ${database.name}`, () => {
    let server: TestServer;
    let dropDatabase: () => Promise<void>;

    beforeAll(async () => {
      const { url, drop } = await database.url();
      dropDatabase = drop;
      server = await startServer({
        API_KEYS:
          `${TIGHT_KEY}:0.1:dubbing,${UPLOAD_KEY}:0.1:dubbing,${POOR_KEY}:0.05:dubbing,` +
          `${SMALL_KEY}:0.4:dubbing,${RICH_KEY}:1:dubbing,${CHANGING_KEY}:0.05:dubbing`,
        DUBBING_WORKERS: "2",
        DUBBING_MAX_DURATION_SEC: "60",
        // Generous: reading the headers takes a fraction of a second, but the machine may be busy.
        DUBBING_SOURCE_PROBE_SEC: "30",
        SOURCE_URL_ALLOW_PRIVATE: "1",
        RATE_LIMIT_PER_MINUTE: "1000",
        ...(url ? { DATABASE_URL: url } : {}),
      });
    });
    afterAll(async () => {
      await server?.close();
      await dropDatabase?.();
    });

    const api = (key: string, method: string, route: string, body?: unknown) =>
      dubbingClient(server.baseUrl, key).request(method, route, body);
    const finished = (key: string, id: string) => dubbingClient(server.baseUrl, key).finished(id);
    const upload = (key: string) => dubbingClient(server.baseUrl, key).upload(video);

    async function ledger(key: string): Promise<{ balance: number; available: number; charges: number }> {
      const { db } = server.services;
      const account = (await db.accounts.findByKey(key))!;
      const { jobs } = await db.jobs.list(account.id, 100, 0);
      return {
        balance: await db.accounts.balanceUsd(account.id),
        available: await db.accounts.availableUsd(account.id),
        charges: jobs.filter((job) => job.costUsd !== null).length,
      };
    }

    it("two URL jobs of one account at once: the one the balance cannot cover is refused with 402, the other completes", async () => {
      const request = {
        source_url: `${filesBase}/${path.basename(video)}`,
        target_lang: "es",
        source_lang: "en",
      };
      // The URL's duration is read at creation, and the first job holds its price from then on.
      const created = await Promise.all([
        api(TIGHT_KEY, "POST", "/api/dubbing/jobs", request),
        api(TIGHT_KEY, "POST", "/api/dubbing/jobs", request),
      ]);
      expect(created.map((c) => c.status).sort()).toEqual([201, 402]);
      const refused = created.find((c) => c.status === 402)!;
      expect(refused.body).toEqual({ error: { code: "insufficient_balance", message: expect.any(String) } });
      expect((refused.body.error as { message: string }).message).toMatch(
        /^dubbing this 7\.2 s source costs 0\.066667 USD; the account has 0\.033333 USD available/,
      );
      const accepted = created.find((c) => c.status === 201)!;
      const job = await finished(TIGHT_KEY, accepted.body.job_id as string);
      expect(job).toMatchObject({ status: "completed", cost_usd: COST });
      expect(await ledger(TIGHT_KEY)).toEqual({ balance: 0.033333, available: 0.033333, charges: 1 });
    });

    it("an upload the balance cannot cover is refused at creation with 402; an accepted one holds its price from then on", async () => {
      const sourceUrl = await upload(UPLOAD_KEY);
      const request = { source_url: sourceUrl, target_lang: "es", source_lang: "en" };
      const first = await api(UPLOAD_KEY, "POST", "/api/dubbing/jobs", request);
      expect(first.status).toBe(201);
      // Created holding 0.066667 of the 0.1 USD: a second one cannot be covered, even before the
      // first has started.
      const second = await api(UPLOAD_KEY, "POST", "/api/dubbing/jobs", request);
      expect(second).toEqual({
        status: 402,
        body: { error: { code: "insufficient_balance", message: expect.any(String) } },
      });
      expect((second.body.error as { message: string }).message).toMatch(
        /costs 0\.066667 USD; the account has 0\.033333 USD available/,
      );
      const job = await finished(UPLOAD_KEY, first.body.job_id as string);
      expect(job).toMatchObject({
        status: "completed",
        cost_usd: COST,
        input_duration_sec: expect.closeTo(7.2, 1),
      });
      expect(await ledger(UPLOAD_KEY)).toEqual({ balance: 0.033333, available: 0.033333, charges: 1 });

      const poor = await api(POOR_KEY, "POST", "/api/dubbing/jobs", {
        ...request,
        source_url: await upload(POOR_KEY),
      });
      expect(poor.status).toBe(402);
      expect(poor.body).toEqual({ error: { code: "insufficient_balance", message: expect.any(String) } });
      expect((await api(POOR_KEY, "GET", "/api/dubbing/jobs")).body.total).toBe(0);
    });

    it("a URL source the balance cannot cover is refused with 402 at creation; no job is made", async () => {
      const refused = await api(POOR_KEY, "POST", "/api/dubbing/jobs", {
        source_url: `${filesBase}/${path.basename(video)}`,
        target_lang: "es",
        source_lang: "en",
      });
      expect(refused).toEqual({
        status: 402,
        body: {
          error: {
            code: "insufficient_balance",
            message:
              "dubbing this 7.2 s source costs 0.066667 USD; the account has 0.05 USD available " +
              "(its balance less what its unfinished jobs hold)",
          },
        },
      });
      expect((await api(POOR_KEY, "GET", "/api/dubbing/jobs")).body.total).toBe(0);
      expect(await ledger(POOR_KEY)).toEqual({ balance: 0.05, available: 0.05, charges: 0 });
    });

    it("a URL whose duration cannot be read at creation holds the longest input's price: 402 when not covered, else brought down to the exact price", async () => {
      const request = { source_url: `${filesBase}/unreadable.mp4`, target_lang: "es", source_lang: "en" };
      const refused = await api(SMALL_KEY, "POST", "/api/dubbing/jobs", request);
      expect(refused.status).toBe(402);
      expect(refused.body).toEqual({ error: { code: "insufficient_balance", message: expect.any(String) } });
      expect((refused.body.error as { message: string }).message).toMatch(
        /duration could not be read .*the longest accepted input, 0\.5 USD; the account has 0\.4 USD available/,
      );
      expect((await api(SMALL_KEY, "GET", "/api/dubbing/jobs")).body.total).toBe(0);

      const created = await api(RICH_KEY, "POST", "/api/dubbing/jobs", request);
      expect(created.status).toBe(201);
      // Held until the worker has read the downloaded input (which waits for the gate).
      expect(await ledger(RICH_KEY)).toEqual({ balance: 1, available: 0.5, charges: 0 });
      downloadGate.resolve();
      const job = await finished(RICH_KEY, created.body.job_id as string);
      downloadGate = gate();
      expect(job).toMatchObject({ status: "completed", cost_usd: COST });
      expect(await ledger(RICH_KEY)).toEqual({ balance: 0.933333, available: 0.933333, charges: 1 });
    });

    it("a URL whose content grows after creation and is then found too expensive fails with processing_failed and the reason; nothing is charged", async () => {
      const created = await api(CHANGING_KEY, "POST", "/api/dubbing/jobs", {
        source_url: `${filesBase}/changing.mp4`,
        target_lang: "es",
        source_lang: "en",
      });
      expect(created.status).toBe(201);
      const job = await finished(CHANGING_KEY, created.body.job_id as string);
      expect(job).toMatchObject({
        status: "failed",
        error: "processing_failed",
        error_message:
          "insufficient balance: dubbing 7.2 s costs 0.066667 USD; the account has 0.05 USD available " +
          "(its balance less what its unfinished jobs hold)",
        cost_usd: null,
      });
      expect(await ledger(CHANGING_KEY)).toEqual({ balance: 0.05, available: 0.05, charges: 0 });
    });
  });
}
