import { createReadStream, existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeTestVideo, probeStreams } from "../support/media.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";
import { sharedMissing } from "../support/shared.js";
import { runScript, type Run } from "../support/run-script.js";

/** `relay dub` as a child process against the real service (HTTP, upload, in-process worker, engines, ffmpeg). */
const SPEECH_MISSING = sharedMissing("data/speech/librivox-pocketsphinx");
/** A dubbing job on the 7.2 s test video takes a few seconds; the margin is for slow CI machines. */
const JOB_TIMEOUT_MS = 180_000;

let server: TestServer;
let tmp: string;
let video: string;
/** Serves files of `tmp` by name: the source of URL inputs (private addresses are allowed for the test). */
let fileServer: Server;
let fileBase: string;

beforeAll(async () => {
  server = await startServer({
    DUBBING_WORKERS: "1",
    SOURCE_URL_ALLOW_PRIVATE: "1",
    // Several jobs run from one key within a minute.
    RATE_LIMIT_PER_MINUTE: "1000",
  });
  tmp = await mkdtemp(path.join(os.tmpdir(), "relay-cli-dub-"));
  if (!SPEECH_MISSING) video = await makeTestVideo(tmp);
  fileServer = createServer((request, response) => {
    const file = path.join(tmp, path.basename(request.url ?? ""));
    if (!existsSync(file)) return void response.writeHead(404).end("missing");
    response.writeHead(200, { "content-type": "video/mp4" });
    createReadStream(file).pipe(response);
  });
  await new Promise<void>((resolve) => fileServer.listen(0, "127.0.0.1", resolve));
  fileBase = `http://127.0.0.1:${(fileServer.address() as { port: number }).port}`;
}, JOB_TIMEOUT_MS);
afterAll(async () => {
  await server?.close();
  await new Promise((resolve) => fileServer?.close(resolve));
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

function relay(args: string[], env: Record<string, string> = {}): Promise<Run> {
  return runScript("src/cli/main.ts", args, { RELAY_SERVER: server.baseUrl, RELAY_API_KEY: API_KEY, ...env });
}

/** The `relay:`-prefixed lines are the CLI's error messages (other stderr lines are progress). */
const errorLines = (result: Run) => result.stderr.split("\n").filter((line) => line.startsWith("relay:"));

describe.skipIf(SPEECH_MISSING)("relay dub (real service and worker)", () => {
  it(
    "uploads a local video, shows progress, saves a dubbed H.264 + AAC MP4 and prints the cost",
    async () => {
      const out = path.join(tmp, "out.mp4");
      const result = await relay(["dub", video, "--from", "en", "--to", "es", "--out", out]);
      expect(errorLines(result)).toEqual([]);
      expect(result.code).toBe(0);
      expect(existsSync(out)).toBe(true);
      expect(existsSync(`${out}.part`)).toBe(false);
      const streams = await probeStreams(out);
      expect(streams.find((s) => s.codec_type === "video")?.codec_name).toBe("h264");
      expect(streams.find((s) => s.codec_type === "audio")?.codec_name).toBe("aac");
      // 7.2 s bills 8 started seconds at 0.50 USD a minute.
      expect(result.stdout).toMatch(/cost 0\.0666\d* USD/u);
      expect(result.stdout).toContain(out);
      // Not a TTY: plain progress lines, each (stage, percent) once, ending at 100 %. Which
      // intermediate stages show depends on when the once-a-second polls land.
      const progress = result.stderr.split("\n").filter((line) => /^\[[#-]{10}\] \d+% /u.test(line));
      expect(progress.at(-1)).toBe("[##########] 100% Completed");
      expect(new Set(progress).size).toBe(progress.length);
      expect(result.stderr).not.toContain("\r");
    },
    JOB_TIMEOUT_MS,
  );

  it(
    "passes an http(s) URL to the service as source_url; --json prints the finished job",
    async () => {
      const out = path.join(tmp, "from-url.mp4");
      const result = await relay([
        "dub",
        `${fileBase}/${path.basename(video)}`,
        "--from",
        "en",
        "--to",
        "es",
        "--out",
        out,
        "--json",
      ]);
      expect(errorLines(result)).toEqual([]);
      expect(result.code).toBe(0);
      // Nothing was uploaded: the service fetched the URL itself.
      expect(result.stderr).not.toMatch(/^uploading/mu);
      const job = JSON.parse(result.stdout.trim()) as Record<string, unknown>;
      expect(job).toMatchObject({
        status: "completed",
        target_lang: "es",
        output_path: out,
        cost_usd: expect.any(Number),
      });
      expect(job.output_bytes).toBeGreaterThan(1000);
      expect((await probeStreams(out)).map((s) => s.codec_type).sort()).toEqual(["audio", "video"]);
    },
    JOB_TIMEOUT_MS,
  );

  it(
    "reports a failed job with its error and exits 1",
    async () => {
      const garbage = path.join(tmp, "not-a-video.mp4");
      await writeFile(garbage, "this is not a video at all".repeat(100));
      const out = path.join(tmp, "never.mp4");
      const result = await relay(["dub", garbage, "--from", "en", "--to", "es", "--out", out]);
      expect(result.code).toBe(1);
      expect(errorLines(result)).toEqual([
        expect.stringMatching(/^relay: job failed: unsupported_format: /u),
      ]);
      expect(existsSync(out)).toBe(false);
    },
    JOB_TIMEOUT_MS,
  );
});

describe("relay dub: refusals", () => {
  it("refuses a language outside the spec's list before uploading anything", async () => {
    const input = path.join(tmp, "clip.mp4");
    await writeFile(input, "not checked: the language is refused first");
    const result = await relay(["dub", input, "--to", "xx", "--out", path.join(tmp, "x.mp4")]);
    expect(result.code).not.toBe(0);
    expect(errorLines(result)).toEqual([
      expect.stringMatching(/^relay: unsupported_language: this server does not dub into "xx"/u),
    ]);
    expect(result.stderr).not.toMatch(/uploading/u);
  });

  it("refuses a language the server does not dub, listing those it does (from GET /v1/languages)", async () => {
    // Checked before anything is fetched or uploaded, so the URL need not exist.
    const result = await relay([
      "dub",
      `${fileBase}/absent.mp4`,
      "--to",
      "ja",
      "--out",
      path.join(tmp, "ja.mp4"),
    ]);
    expect(result.code).not.toBe(0);
    expect(errorLines(result)).toEqual([
      expect.stringMatching(
        /^relay: unsupported_language: this server does not dub into "ja" \(it dubs into .*\bes\b/u,
      ),
    ]);
  });

  it("names a missing input file", async () => {
    const missing = path.join(tmp, "does-not-exist.mp4");
    const result = await relay(["dub", missing, "--to", "es", "--out", path.join(tmp, "x.mp4")]);
    expect(result.code).not.toBe(0);
    expect(errorLines(result)).toEqual([`relay: no such file: ${missing}`]);
    expect(result.stdout).toBe("");
  });

  it("names an input whose type it cannot tell, and an --out directory that does not exist", async () => {
    const notes = path.join(tmp, "notes.txt");
    await writeFile(notes, "hello");
    const unknown = await relay(["dub", notes, "--to", "es", "--out", path.join(tmp, "x.mp4")]);
    expect(unknown.code).not.toBe(0);
    expect(errorLines(unknown)).toEqual([
      expect.stringMatching(/cannot tell the media type of .*notes\.txt/u),
    ]);

    const noDir = await relay(["dub", notes, "--to", "es", "--out", path.join(tmp, "missing-dir", "x.mp4")]);
    expect(noDir.code).not.toBe(0);
    expect(errorLines(noDir)).toEqual([
      expect.stringMatching(/^relay: --out: the directory .* does not exist/u),
    ]);
  });

  it("reports a refused API key with the service's 401 code", async () => {
    const input = path.join(tmp, "tiny.wav");
    await writeFile(input, "RIFF");
    const result = await relay(
      ["dub", input, "--from", "en", "--to", "es", "--out", path.join(tmp, "x.mp3")],
      {
        RELAY_API_KEY: "not-a-key",
      },
    );
    expect(result.code).not.toBe(0);
    expect(errorLines(result)).toEqual([
      expect.stringMatching(/^relay: upload failed: HTTP 401 unauthorized: /u),
    ]);
  });
});
