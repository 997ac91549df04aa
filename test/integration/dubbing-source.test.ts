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
} from "../../src/dubbing/source.js";

let server: Server;
let base: string;
let dir: string;
const payload = Buffer.alloc(300_000, 7);

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "source-test-"));
  server = createServer((request, response) => {
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

  it("refuses loopback sources given as an address or as a name resolving to one", async () => {
    const options = { maxBytes: 1e9, allowPrivate: false };
    const refused = downloadSource(`${base}/file`, path.join(dir, "a"), options);
    await expect(refused).rejects.toBeInstanceOf(DownloadError);
    await expect(refused).rejects.toThrow(/not a public address/);
    const port = (server.address() as { port: number }).port;
    await expect(
      downloadSource(`http://localhost:${port}/file`, path.join(dir, "b"), options),
    ).rejects.toThrow(/non-public address/);
    expect(existsSync(path.join(dir, "a"))).toBe(false);
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
