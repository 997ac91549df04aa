import type { ChildProcess } from "node:child_process";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import BetterSqlite3 from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeTestVideo } from "../support/media.js";
import { dubbingClient } from "../support/dubbing-client.js";
import { startServiceProcess, type ServiceProcess } from "../support/service-process.js";
import { sharedMissing } from "../support/shared.js";

/**
 * Graceful restarts are not failures: the service process (src/main.ts) is stopped with SIGTERM
 * in the middle of a job again and again. Each stop hands the job back at once (the lease is
 * released, the attempt not counted) and the next process finishes it, charged once. The lease is
 * ten minutes long, so a job left to expire would never be taken up again within the test.
 */
const SKIP = sharedMissing("data/speech/librivox-pocketsphinx");
const KEY = "restart-key";
const RESTARTS = 4;

let dir: string;
const children: ChildProcess[] = [];

async function startService(name: string): Promise<ServiceProcess> {
  const service = await startServiceProcess(name, {
    API_KEYS: `${KEY}:100`,
    DATA_DIR: dir,
    STORAGE_SECRET: "restart-test-storage-secret",
    DUBBING_WORKERS: "1",
    DUBBING_LEASE_SEC: "600",
  });
  children.push(service.child);
  return service;
}

const clientOf = (service: ServiceProcess) => dubbingClient(service.baseUrl, KEY);

/** The job's row as the processes left it (read while none runs). */
function jobRow(jobId: string): Record<string, unknown> {
  const db = new BetterSqlite3(path.join(dir, "relay.db"), { readonly: true });
  try {
    return db
      .prepare("SELECT status, lease_owner, lease_expires_at, attempts FROM jobs WHERE id = ?")
      .get(jobId) as Record<string, unknown>;
  } finally {
    db.close();
  }
}

beforeAll(async () => {
  if (!SKIP) dir = await mkdtemp(path.join(tmpdir(), "dubbing-restarts-"));
});
afterAll(async () => {
  for (const child of children) child.kill("SIGKILL");
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe.skipIf(SKIP)("a service stopped with SIGTERM in the middle of a job", () => {
  it(`hands the job back at once each time; after ${RESTARTS} restarts the job still completes, charged once`, async () => {
    let service = await startService("restart-0");
    const video = await makeTestVideo(dir);
    const sourceUrl = await clientOf(service).upload(video);
    const { body: created } = await clientOf(service).request("POST", "/api/dubbing/jobs", {
      source_url: sourceUrl,
      target_lang: "es",
      source_lang: "en",
    });
    const jobId = created.job_id as string;

    for (let restart = 1; restart <= RESTARTS; restart++) {
      // Stop the process as soon as its worker is inside the job.
      for (;;) {
        const { body: job } = await clientOf(service).request("GET", `/api/dubbing/jobs/${jobId}`);
        expect(job.status).not.toMatch(/completed|failed/);
        if (job.status !== "pending") break;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      service.child.kill("SIGTERM");
      expect(await service.exited).toBe(0);
      // Handed back: no lease left to wait for, and the interrupted attempt is not counted.
      expect(jobRow(jobId)).toMatchObject({ lease_owner: null, lease_expires_at: null, attempts: 0 });
      expect(jobRow(jobId).status).not.toMatch(/completed|failed/);
      service = await startService(`restart-${restart}`);
    }

    const job = await clientOf(service).finished(jobId);
    expect(job).toMatchObject({ status: "completed", error: null, cost_usd: 0.066667 });
    service.child.kill("SIGTERM");
    expect(await service.exited).toBe(0);
    expect(jobRow(jobId)).toMatchObject({ attempts: 1, lease_owner: null });
    const db = new BetterSqlite3(path.join(dir, "relay.db"), { readonly: true });
    try {
      const charges = db.prepare("SELECT amount_micro_usd FROM ledger_entries WHERE kind = 'charge'").all();
      expect(charges).toEqual([{ amount_micro_usd: -66667 }]);
    } finally {
      db.close();
    }
    // Each stopped attempt removed its own work folder.
    expect((await readdir(path.join(dir, "work"))).filter((name) => name.includes(jobId))).toEqual([]);
  });
});
