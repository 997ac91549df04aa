import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  DownloadError,
  downloadSource,
  isPublicAddress,
  SourceTooLargeError,
} from "../../src/dubbing/media/source.js";
import { API_KEY, startServer } from "../support/server.js";

let server: Server;
let base: string;
let dir: string;
const payload = Buffer.alloc(300_000, 7);
/** Every request path the local server received. */
const received: string[] = [];

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "source-test-"));
  server = createServer((request, response) => {
    received.push(request.url ?? "");
    if (request.url === "/file")
      return response.writeHead(200, { "content-length": payload.length }).end(payload);
    if (request.url === "/chunked") {
      response.writeHead(200); // no content-length: the cap must hold while streaming
      for (let i = 0; i < 10; i++) response.write(payload);
      return response.end();
    }
    if (request.url === "/redirect") return response.writeHead(302, { location: "/file" }).end();
    response.writeHead(500).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  await rm(dir, { recursive: true, force: true });
});

describe("downloadSource", () => {
  it("classifies addresses: only public unicast is allowed", () => {
    for (const address of [
      "127.0.0.1",
      "10.1.2.3",
      "172.16.0.1",
      "192.168.1.1",
      "169.254.169.254",
      "::1",
      "fd00::1",
      "fe80::1",
      "0.0.0.0",
      "::ffff:127.0.0.1",
      "224.0.0.1",
    ]) {
      expect(isPublicAddress(address), address).toBe(false);
    }
    for (const address of ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111"])
      expect(isPublicAddress(address), address).toBe(true);
  });

  it("refuses IPv6 addresses that embed a refused IPv4 address, and the embedding ranges", () => {
    for (const address of [
      // IPv4-compatible ::/96 (deprecated), public or not: ipaddr.js calls ::7f00:1 unicast
      "::7f00:1",
      "::127.0.0.1",
      "::a00:1",
      "::8.8.8.8",
      "::808:808",
      // IPv4-mapped, in both notations, embedding a refused address
      "::ffff:127.0.0.1",
      "::ffff:7f00:1",
      "::ffff:a9fe:a9fe",
      "::ffff:10.0.0.1",
      // IPv4-translated ::ffff:0:0:0/96
      "::ffff:0:127.0.0.1",
      "::ffff:0:7f00:1",
      "::ffff:0:8.8.8.8",
      // NAT64: the well-known prefix embedding a refused address; the local-use prefix
      "64:ff9b::7f00:1",
      "64:ff9b::127.0.0.1",
      "64:ff9b::10.0.0.1",
      "64:ff9b::a9fe:a9fe",
      "64:ff9b:1::808:808",
      // 6to4 and Teredo
      "2002:7f00:1::1",
      "2002:a00:1::",
      "2002:808:808::1",
      "2001:0:4136:e378:8000:63bf:80ff:fffe",
      "2001::7f00:1",
      // other ranges ipaddr.js does not call unicast, and space outside global unicast 2000::/3
      "::",
      "100::1",
      "2001:db8::1",
      "3fff::1",
      "2001:2::1",
      "2001:20::1",
      "fec0::1",
      "ff02::1",
      "fe80::1%eth0",
      "4000::1",
      // not an address
      "example.com",
      "",
    ]) {
      expect(isPublicAddress(address), address).toBe(false);
    }
    // The IPv4 behind IPv4-mapped and well-known NAT64 addresses is what the connection reaches.
    for (const address of ["::ffff:8.8.8.8", "::ffff:808:808", "64:ff9b::8.8.8.8", "64:ff9b::101:101"])
      expect(isPublicAddress(address), address).toBe(true);
  });

  it("refuses loopback sources given as an address or as a name resolving to one", async () => {
    const options = { maxBytes: 1e9, allowPrivate: false };
    const refused = downloadSource(`${base}/file`, path.join(dir, "a"), options);
    await expect(refused).rejects.toBeInstanceOf(DownloadError);
    await expect(refused).rejects.toThrow(/not a public address/);
    const port = (server.address() as { port: number }).port;
    const byName = downloadSource(`http://localhost:${port}/file`, path.join(dir, "b"), options);
    await expect(byName).rejects.toThrow(/not a public address/);
    // How the name resolved is for the operator's log, not the client.
    await expect(byName).rejects.not.toThrow(/127\.0\.0\.1|::1/);
    await expect(byName).rejects.toMatchObject({
      detail: expect.stringMatching(/^localhost resolves to (127\.0\.0\.1|::1)$/),
    });
    expect(existsSync(path.join(dir, "a"))).toBe(false);
  });

  it("refuses an IPv4-compatible IPv6 literal for loopback before connecting", async () => {
    const port = (server.address() as { port: number }).port;
    for (const host of ["[::7f00:1]", "[::127.0.0.1]", "[::ffff:0:7f00:1]", "[64:ff9b::7f00:1]"]) {
      await expect(
        downloadSource(`http://${host}:${port}/compatible`, path.join(dir, "c"), {
          maxBytes: 1e9,
          allowPrivate: false,
        }),
        host,
      ).rejects.toThrow(/not a public address/);
    }
    expect(received).not.toContain("/compatible");
  });

  it("downloads, follows redirects, and reports HTTP errors", async () => {
    const options = { maxBytes: 1e9, allowPrivate: true };
    expect(await downloadSource(`${base}/redirect`, path.join(dir, "d"), options)).toBe(payload.length);
    expect(await readFile(path.join(dir, "d"))).toEqual(payload);
    await expect(downloadSource(`${base}/error`, path.join(dir, "e"), options)).rejects.toThrow(/HTTP 500/);
  });

  it("enforces the size cap from Content-Length and while streaming, leaving no file", async () => {
    const options = { maxBytes: 1_000_000, allowPrivate: true };
    await expect(
      downloadSource(`${base}/file`, path.join(dir, "f"), { ...options, maxBytes: 1000 }),
    ).rejects.toBeInstanceOf(SourceTooLargeError);
    await expect(downloadSource(`${base}/chunked`, path.join(dir, "g"), options)).rejects.toBeInstanceOf(
      SourceTooLargeError,
    );
    expect(existsSync(path.join(dir, "g"))).toBe(false);
    expect(existsSync(path.join(dir, "g.partial"))).toBe(false);
  });
});

describe("dubbing job with an embedded-IPv4 source address", () => {
  it("fails download_failed without contacting the local listener", async () => {
    const relay = await startServer({ DUBBING_WORKERS: "1" }); // private sources refused
    try {
      const port = (server.address() as { port: number }).port;
      const created = await fetch(new URL("/api/dubbing/jobs", relay.baseUrl), {
        method: "POST",
        headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" },
        body: JSON.stringify({
          source_url: `http://[::7f00:1]:${port}/via-job`,
          target_lang: "es",
          source_lang: "en",
        }),
      });
      expect(created.status).toBe(201);
      const { job_id: id } = (await created.json()) as { job_id: string };
      let job: Record<string, unknown> = {};
      for (let i = 0; i < 120 && job.status !== "failed" && job.status !== "completed"; i++) {
        await new Promise((resolve) => setTimeout(resolve, 250));
        const response = await fetch(new URL(`/api/dubbing/jobs/${id}`, relay.baseUrl), {
          headers: { authorization: `Bearer ${API_KEY}` },
        });
        job = (await response.json()) as Record<string, unknown>;
      }
      expect(job.status).toBe("failed");
      expect(job.error).toMatch(/^download_failed/);
      // Refused by the address check, not by a failed connection.
      expect(`${String(job.error)} ${String(job.error_message ?? "")}`).toMatch(/not a public address/);
      expect(received).not.toContain("/via-job");
    } finally {
      await relay.close();
    }
  });
});
