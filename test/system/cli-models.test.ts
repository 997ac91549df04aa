import { createHash, randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CATALOGUE, findModel } from "../../src/engines/whisper-cpp/catalogue.js";
import { freePort } from "../support/ports.js";
import { runScript, type Run } from "../support/run-script.js";

/**
 * `relay models …` run as a child process. Nothing here uses the network: downloads go to a local
 * fixture server, or to a closed local port, through RELAY_MODELS_BASE_URL.
 */

const FIXTURE = randomBytes(700_000);
const FIXTURE_SHA1 = createHash("sha1").update(FIXTURE).digest("hex");

let server: Server;
let serverUrl: string;
let ranges: (string | undefined)[] = [];
let tmp: string;

beforeAll(async () => {
  server = createServer((request, response) => {
    ranges.push(request.headers.range);
    if (!/^\/ggml-[\w.-]+\.bin$/u.test(request.url ?? "")) {
      response.writeHead(404).end();
      return;
    }
    const start = Number(/^bytes=(\d+)-$/u.exec(request.headers.range ?? "")?.[1] ?? 0);
    if (start > 0) {
      response.writeHead(206, {
        "content-length": FIXTURE.length - start,
        "content-range": `bytes ${start}-${FIXTURE.length - 1}/${FIXTURE.length}`,
      });
    } else {
      response.writeHead(200, { "content-length": FIXTURE.length });
    }
    response.end(FIXTURE.subarray(start));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  serverUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  tmp = await mkdtemp(path.join(os.tmpdir(), "relay-cli-models-"));
});
afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

const relay = (args: string[], env: Record<string, string> = {}): Promise<Run> =>
  runScript("src/cli/main.ts", ["models", ...args], { RELAY_MODELS_BASE_URL: "", ...env });
/** The `relay:`-prefixed lines are the CLI's error messages (other stderr lines are progress). */
const errorLines = (result: Run) => result.stderr.split("\n").filter((line) => line.startsWith("relay:"));

async function freshDir(name: string): Promise<string> {
  const dir = path.join(tmp, name);
  await mkdir(dir, { recursive: true });
  return dir;
}

describe("relay models list", () => {
  it("lists the whole catalogue with size, languages and whether each model is pulled", async () => {
    const dir = await freshDir("list");
    await writeFile(path.join(dir, "ggml-base.en.bin"), "x");
    await writeFile(path.join(dir, "ggml-tiny.bin.partial"), "x");
    await writeFile(path.join(dir, "ggml-medium.bin"), "x");
    const result = await relay(["list"], { MODELS_DIR: dir });
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^NAME\s+SIZE\s+LANGUAGES\s+PULLED\s+DESCRIPTION$/mu);
    for (const model of CATALOGUE) expect(result.stdout).toMatch(new RegExp(`^${model.name}\\s`, "mu"));
    expect(result.stdout).toMatch(/^tiny\s+75 MiB\s+multilingual\s+partial \(0\.0 MiB\)\s+\S/mu);
    expect(result.stdout).toMatch(/^base\.en\s+142 MiB\s+en\s+yes\s+\S/mu);
    expect(result.stdout).toMatch(/^small\s+466 MiB\s+multilingual\s+no\s+\S/mu);
    expect(result.stdout).toMatch(/^large-v3-turbo\s+1\.5 GiB\s+multilingual\s+no\s/mu);
    expect(result.stdout).toMatch(/^tiny-q5_1\s+-\s+multilingual\s+no\s/mu);
    expect(result.stdout).toContain(`models directory: ${dir}`);
    expect(result.stdout).toContain("other model files there: ggml-medium.bin");
  });
});

describe("relay models pull", () => {
  it("fails quickly with a clear message when the download host cannot be reached", async () => {
    const dir = await freshDir("offline");
    const port = await freePort();
    const started = Date.now();
    const result = await relay(["pull", "tiny", "--dir", dir], {
      RELAY_MODELS_BASE_URL: `http://127.0.0.1:${port}`,
    });
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(result.code).toBe(1);
    const tiny = findModel("tiny")!;
    expect(errorLines(result)).toEqual([
      `relay: cannot reach 127.0.0.1:${port}: connection refused (ECONNREFUSED). Is this machine offline? ` +
        `To install tiny by hand, download ${tiny.url} on a connected machine and copy it to ` +
        `${path.join(dir, "ggml-tiny.bin")}, then run \`relay models verify tiny\``,
    ]);
    expect(result.stdout).toBe("");
    expect(existsSync(path.join(dir, "ggml-tiny.bin"))).toBe(false);
  });

  it("downloads through the CLI with a progress bar; verify, list and a second pull agree", async () => {
    const dir = await freshDir("pull");
    ranges = [];
    const result = await relay(["pull", "tiny-q5_1", "--dir", dir], { RELAY_MODELS_BASE_URL: serverUrl });
    expect(errorLines(result)).toEqual([]);
    expect(result.code).toBe(0);
    const file = path.join(dir, "ggml-tiny-q5_1.bin");
    expect(result.stdout.trim()).toBe(
      `pulled tiny-q5_1: ${file} (0.7 MiB, no published checksum; SHA-1 ${FIXTURE_SHA1})`,
    );
    expect(result.stderr).toContain(`downloading ggml-tiny-q5_1.bin (size not published) into ${dir}`);
    expect(result.stderr).toMatch(/^\[##########\] 100% 0\.7 MiB \/ 0\.7 MiB [\d.]+ MiB\/s$/mu);
    expect(ranges).toEqual([undefined]);
    expect((await readFile(file)).equals(FIXTURE)).toBe(true);
    expect(existsSync(`${file}.partial`)).toBe(false);

    const verify = await relay(["verify", "--dir", dir]);
    expect(verify.code).toBe(0);
    expect(verify.stdout.trim()).toBe(`tiny-q5_1  no published checksum (0.7 MiB, SHA-1 ${FIXTURE_SHA1})`);

    const list = await relay(["list", "--dir", dir]);
    expect(list.stdout).toMatch(/^tiny-q5_1\s+-\s+multilingual\s+yes\s/mu);

    ranges = [];
    const again = await relay(["pull", "tiny-q5_1", "--dir", dir], { RELAY_MODELS_BASE_URL: serverUrl });
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/^tiny-q5_1 is already pulled: /u);
    expect(ranges).toEqual([]);
  });

  it("resumes an interrupted download left in <file>.partial", async () => {
    const dir = await freshDir("resume");
    await writeFile(path.join(dir, "ggml-base-q5_1.bin.partial"), FIXTURE.subarray(0, 123_456));
    ranges = [];
    const result = await relay(["pull", "base-q5_1", "--dir", dir], { RELAY_MODELS_BASE_URL: serverUrl });
    expect(result.code).toBe(0);
    expect(result.stderr).toContain("resuming ggml-base-q5_1.bin from 0.1 MiB");
    expect(ranges).toEqual(["bytes=123456-"]);
    expect((await readFile(path.join(dir, "ggml-base-q5_1.bin"))).equals(FIXTURE)).toBe(true);
  });

  it("refuses a download whose SHA-1 differs from upstream's, leaving no file", async () => {
    const dir = await freshDir("mismatch");
    const result = await relay(["pull", "tiny", "--dir", dir], { RELAY_MODELS_BASE_URL: serverUrl });
    expect(result.code).toBe(1);
    expect(errorLines(result)).toEqual([
      `relay: checksum mismatch for ggml-tiny.bin: expected SHA-1 ${findModel("tiny")!.sha1}, ` +
        `got ${FIXTURE_SHA1}; the download was deleted (${serverUrl}/ggml-tiny.bin)`,
    ]);
    expect(existsSync(path.join(dir, "ggml-tiny.bin"))).toBe(false);
    expect(existsSync(path.join(dir, "ggml-tiny.bin.partial"))).toBe(false);
  });

  it("rejects an unknown model name", async () => {
    const result = await relay(["pull", "enormous"]);
    expect(result.code).toBe(1);
    expect(errorLines(result)).toEqual([
      expect.stringMatching(/^relay: unknown model "enormous" \(known: tiny, /u),
    ]);
  });
});

describe("relay models verify", () => {
  it("fails with one error line for a damaged model or one that is not pulled", async () => {
    const dir = await freshDir("verify");
    await writeFile(path.join(dir, "ggml-base.bin"), FIXTURE);
    const damaged = await relay(["verify", "base", "--dir", dir]);
    expect(damaged.code).toBe(1);
    expect(damaged.stdout).toMatch(
      /^base {2}FAILED: size mismatch: .* is 0\.7 MiB, upstream states 142 MiB/u,
    );
    expect(errorLines(damaged)).toEqual(["relay: base failed verification"]);

    const missing = await relay(["verify", "small", "--dir", dir]);
    expect(missing.code).toBe(1);
    expect(missing.stdout).toContain("small  FAILED: not pulled: no ");
    expect(missing.stdout).toContain("(run `relay models pull small`)");

    const all = await relay(["verify", "--dir", dir]);
    expect(all.code).toBe(1);
    expect(errorLines(all)).toEqual(["relay: base failed verification"]);
  });

  it("has nothing to check in an empty directory", async () => {
    const dir = await freshDir("empty");
    const result = await relay(["verify", "--dir", dir]);
    expect(result.code).toBe(0);
    expect(result.stdout.trim()).toBe(`no models pulled in ${dir} (see \`relay models list\`)`);
  });
});
