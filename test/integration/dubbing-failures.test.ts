import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeTestVideo, probeStreams } from "../support/media.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";
import { S3_CREDENTIALS, startS3 } from "../support/s3.js";
import { sharedMissing, sharedPath } from "../support/shared.js";

/** Each failure code of the spec, audio-only input, and the whole path on S3-compatible storage. */
const SPEECH_MISSING = sharedMissing("data/speech/librivox-pocketsphinx");
const run = promisify(execFile);

let dir: string;
let files: Server;
let filesBase: string;

async function createJob(server: TestServer, sourceUrl: string, targetLang = "es"): Promise<string> {
  const response = await fetch(new URL("/api/dubbing/jobs", server.baseUrl), {
    method: "POST",
    headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" },
    body: JSON.stringify({ source_url: sourceUrl, target_lang: targetLang, source_lang: "en" }),
  });
  expect(response.status).toBe(201);
  return ((await response.json()) as { job_id: string }).job_id;
}

async function finished(server: TestServer, id: string): Promise<Record<string, unknown>> {
  for (let i = 0; i < 480; i++) {
    const response = await fetch(new URL(`/api/dubbing/jobs/${id}`, server.baseUrl), {
      headers: { authorization: `Bearer ${API_KEY}` },
    });
    const job = (await response.json()) as Record<string, unknown>;
    if (job.status === "completed" || job.status === "failed") return job;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`job ${id} did not finish`);
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "dubbing-failures-"));
  if (!SPEECH_MISSING) {
    await makeTestVideo(dir);
    // audio only: the same speech as a WAV; and a 0.5 s clip (too short to dub)
    await run("ffmpeg", [
      "-v",
      "error",
      "-y",
      "-i",
      path.join(dir, "input-h264.mp4"),
      "-vn",
      path.join(dir, "speech.wav"),
    ]);
    await run("ffmpeg", [
      "-v",
      "error",
      "-y",
      "-i",
      sharedPath("data/speech/librivox-pocketsphinx/goforward.wav"),
      "-t",
      "0.5",
      path.join(dir, "short.wav"),
    ]);
    await run("ffmpeg", [
      "-v",
      "error",
      "-y",
      "-f",
      "lavfi",
      "-i",
      "testsrc=size=160x120:rate=10:duration=3",
      "-c:v",
      "libx264",
      path.join(dir, "silent-video.mp4"),
    ]);
  }
  await writeFile(path.join(dir, "garbage.mp4"), "not media ".repeat(1000));
  files = createServer((request, response) => {
    readFile(path.join(dir, path.basename(request.url ?? ""))).then(
      (bytes) => response.writeHead(200).end(bytes),
      () => response.writeHead(404).end(),
    );
  });
  await new Promise<void>((resolve) => files.listen(0, "127.0.0.1", resolve));
  filesBase = `http://127.0.0.1:${(files.address() as { port: number }).port}`;
});
afterAll(async () => {
  await new Promise((resolve) => files?.close(resolve));
  await rm(dir, { recursive: true, force: true });
});

describe.skipIf(SPEECH_MISSING)("dubbing failures and formats", () => {
  it("fails with video_too_long, video_too_large, unsupported_format, processing_failed and download_failed; none is charged", async () => {
    const limited = await startServer({
      DUBBING_WORKERS: "1",
      SOURCE_URL_ALLOW_PRIVATE: "1",
      DUBBING_MAX_DURATION_SEC: "5",
      DUBBING_MAX_FILE_BYTES: "200000",
    });
    const strict = await startServer({ DUBBING_WORKERS: "1" }); // private sources refused (SSRF)
    try {
      const jobs = {
        long: await createJob(limited, `${filesBase}/input-h264.mp4`),
        large: await createJob(limited, `${filesBase}/speech.wav`),
        garbage: await createJob(limited, `${filesBase}/garbage.mp4`),
        silentVideo: await createJob(limited, `${filesBase}/silent-video.mp4`),
        short: await createJob(limited, `${filesBase}/short.wav`),
        missing: await createJob(limited, `${filesBase}/missing.mp4`),
        private: await createJob(strict, `${filesBase}/input-h264.mp4`),
      };
      // `error` is the spec's code alone; the reason is in `error_message`.
      const outcome = async (server: TestServer, id: string) => {
        const job = await finished(server, id);
        return `${job.error as string} | ${job.error_message as string}`;
      };
      expect(await outcome(limited, jobs.long)).toMatch(/^video_too_long \| .*limit is 5 s/);
      expect(await outcome(limited, jobs.large)).toMatch(/^video_too_large \| /);
      expect(await outcome(limited, jobs.garbage)).toMatch(/^unsupported_format \| .*not a media file/);
      expect(await outcome(limited, jobs.silentVideo)).toMatch(/^unsupported_format \| .*audio/);
      expect(await outcome(limited, jobs.short)).toMatch(/^processing_failed \| .*(short|1 s)/);
      expect(await outcome(limited, jobs.missing)).toMatch(/^download_failed \| .*HTTP 404/);
      expect(await outcome(strict, jobs.private)).toMatch(/^download_failed \| .*not a public address/);
      const codes = [
        "video_too_long",
        "video_too_large",
        "unsupported_format",
        "download_failed",
        "processing_failed",
      ];
      for (const id of Object.values(jobs)) {
        const server = id === jobs.private ? strict : limited;
        const job = await finished(server, id);
        expect(codes).toContain(job.error);
        expect(job.cost_usd ?? null).toBeNull();
        // No server paths: not the data directory, the work folders or any absolute path.
        expect(job.error_message).not.toContain(server.config.dataDir);
        expect(job.error_message).not.toMatch(/(^|[\s'"(:=,[])\/[^\s/]+\//);
      }
    } finally {
      await Promise.all([limited.close(), strict.close()]);
    }
  });

  it("dubs audio-only input to MP3, with the objects on S3-compatible storage", async () => {
    const s3 = await startS3("relay-test");
    const server = await startServer({
      DUBBING_WORKERS: "1",
      STORAGE_BACKEND: "s3",
      S3_BUCKET: "relay-test",
      S3_ENDPOINT: s3.endpoint,
      S3_ACCESS_KEY_ID: S3_CREDENTIALS.accessKeyId,
      S3_SECRET_ACCESS_KEY: S3_CREDENTIALS.secretAccessKey,
      S3_FORCE_PATH_STYLE: "true",
    });
    try {
      const upload = (await (
        await fetch(new URL("/api/dubbing/upload-url", server.baseUrl), {
          method: "POST",
          headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" },
          body: JSON.stringify({ filename: "speech.wav", content_type: "audio/wav" }),
        })
      ).json()) as { upload_url: string; source_url: string };
      expect(upload.upload_url).toContain(`${s3.endpoint}/relay-test/`);
      const put = await fetch(upload.upload_url, {
        method: "PUT",
        headers: { "content-type": "audio/wav" },
        body: await readFile(path.join(dir, "speech.wav")),
      });
      expect(put.ok).toBe(true);
      const job = await finished(server, await createJob(server, upload.source_url, "fr"));
      expect(job.error ?? null).toBeNull();
      expect(job.output_url as string).toContain(`${s3.endpoint}/relay-test/results/`);
      const output = path.join(dir, "dubbed.mp3");
      await writeFile(output, Buffer.from(await (await fetch(job.output_url as string)).arrayBuffer()));
      const streams = await probeStreams(output);
      expect(streams.map((s) => `${s.codec_type}:${s.codec_name}`)).toEqual(["audio:mp3"]);
    } finally {
      await server.close();
      await s3.close();
    }
  });
});
