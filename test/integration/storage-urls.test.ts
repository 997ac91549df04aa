/**
 * Where the embedded store's presigned URLs point (issue 30, item 1): without PUBLIC_BASE_URL, at the
 * origin the client reached the service at (a browser at http://localhost:PORT/ must be sent there,
 * not to 127.0.0.1, or the playground's CSP and any LAN client are refused); with it, there.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { createLocalObjectStore } from "../../src/storage/local.js";
import { injectApp } from "../support/app.js";
import { API_KEY } from "../support/server.js";

const askUpload = (app: Awaited<ReturnType<typeof injectApp>>, host: string) =>
  app.inject("/api/dubbing/upload-url", {
    method: "POST",
    headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json", host },
    body: JSON.stringify({ filename: "talk.mp4", content_type: "video/mp4" }),
  });

describe("presigned storage URLs", () => {
  it("follow the request's origin when PUBLIC_BASE_URL is unset, and work there", async () => {
    const app = await injectApp({ PUBLIC_BASE_URL: "" });
    try {
      for (const host of ["localhost:8080", "192.0.2.10:8080"]) {
        const answer = await askUpload(app, host);
        expect(answer.status).toBe(200);
        const body = (await answer.json()) as { upload_url: string; source_url: string };
        expect(body.upload_url.startsWith(`http://${host}/storage/uploads/`)).toBe(true);
        expect(body.source_url.startsWith(`http://${host}/`)).toBe(true);
      }
      // The URL's signature does not depend on its origin: the PUT is accepted.
      const body = (await (await askUpload(app, "localhost:8080")).json()) as { upload_url: string };
      const url = new URL(body.upload_url);
      const put = await app.inject(`${url.pathname}${url.search}`, {
        method: "PUT",
        headers: { "content-type": "video/mp4", host: "localhost:8080" },
        body: new Uint8Array(1024),
      });
      expect(put.status).toBeLessThan(300);
    } finally {
      await app.close();
    }
  });

  it("point at PUBLIC_BASE_URL when it is set, whatever the request's Host", async () => {
    const app = await injectApp({ PUBLIC_BASE_URL: "https://relay.example.org" });
    try {
      const body = (await (await askUpload(app, "localhost:8080")).json()) as { upload_url: string };
      expect(body.upload_url.startsWith("https://relay.example.org/storage/uploads/")).toBe(true);
    } finally {
      await app.close();
    }
  });

  it("the store signs download URLs at the origin asked for, else its own", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "relay-storage-urls-"));
    try {
      const store = createLocalObjectStore({
        dir,
        publicBaseUrl: "http://127.0.0.1:8080",
        secret: "s".repeat(32),
      });
      const asked = await store.presignDownload("results/x.mp4", {
        expiresInSec: 60,
        baseUrl: "http://localhost:9/",
      });
      expect(asked.url.startsWith("http://localhost:9/storage/results/x.mp4?")).toBe(true);
      const own = await store.presignDownload("results/x.mp4", { expiresInSec: 60 });
      expect(own.url.startsWith("http://127.0.0.1:8080/storage/results/x.mp4?")).toBe(true);
      // Both verify: the origin is not part of what is signed.
      for (const { url } of [asked, own]) {
        const query = Object.fromEntries(new URL(url).searchParams);
        expect(store.verify("GET", "results/x.mp4", query)).toMatchObject({ ok: true });
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
