import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { UnsupportedFormatError } from "../../src/dubbing/media/errors.js";
import { MAX_FRAME, probe } from "../../src/dubbing/media/ffmpeg.js";
import { API_KEY, startServer } from "../support/server.js";
import { dubbingClient } from "../support/dubbing-client.js";

/** Video frames beyond `MAX_FRAME` fail as unsupported_format at probing, before anything decodes them. */
const run = promisify(execFile);
let dir: string;

/** A 0.2 s Matroska file with one solid `width`×`height` frame (1-bit PNG: a few KB) and a tone. */
async function makeVideo(width: number, height: number): Promise<string> {
  const output = path.join(dir, `frame-${width}x${height}.mkv`);
  await run("ffmpeg", [
    "-v",
    "error",
    "-y",
    "-f",
    "lavfi",
    "-i",
    `color=size=${width}x${height}:rate=5:duration=0.2`,
    "-f",
    "lavfi",
    "-i",
    "sine=frequency=220:duration=0.2",
    "-pix_fmt",
    "monob",
    "-c:v",
    "png",
    "-c:a",
    "aac",
    output,
  ]);
  return output;
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "dubbing-frame-size-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("video frame size bound", () => {
  it("is 4096 pixels on a side and 4K DCI's pixel count", () => {
    expect(MAX_FRAME).toEqual({ side: 4096, pixels: 4096 * 2160 });
  });

  it("probe accepts frames up to 4K DCI either way round", async () => {
    for (const [width, height] of [
      [4096, 2160],
      [2160, 4096],
      [3840, 2160],
    ] as const) {
      const info = await probe(await makeVideo(width, height));
      expect(info.hasVideo, `${width}×${height}`).toBe(true);
    }
  });

  it("probe refuses a larger frame with UnsupportedFormatError naming no server path", async () => {
    for (const [width, height] of [
      [8192, 8192],
      [4096, 4096], // within the side bound, over the pixel count
      [4160, 64], // under the pixel count, over the side bound
    ] as const) {
      const file = await makeVideo(width, height);
      const refused = probe(file);
      await expect(refused, `${width}×${height}`).rejects.toBeInstanceOf(UnsupportedFormatError);
      await expect(refused).rejects.toThrow(`${width}×${height}`);
      await expect(refused).rejects.not.toThrow(dir);
    }
  });

  it("probe names an unreadable input by its file name only", async () => {
    const garbage = path.join(dir, "garbage.mp4");
    await writeFile(garbage, "not media ".repeat(1000));
    const refused = probe(garbage);
    await expect(refused).rejects.toBeInstanceOf(UnsupportedFormatError);
    await expect(refused).rejects.toThrow(/^garbage\.mp4 is not a media file/);
    await expect(refused).rejects.not.toThrow(dir);
  });

  it("an uploaded 8192×8192 video fails the job with unsupported_format", async () => {
    const video = await makeVideo(8192, 8192);
    const relay = await startServer({ DUBBING_WORKERS: "1" });
    try {
      const client = dubbingClient(relay.baseUrl, API_KEY);
      const created = await client.request("POST", "/api/dubbing/jobs", {
        source_url: await client.upload(video, "video/x-matroska"),
        target_lang: "es",
        source_lang: "en",
      });
      expect(created.status).toBe(201);
      const job = await client.finished(created.body.job_id as string);
      expect(job.status).toBe("failed");
      expect(job.error).toBe("unsupported_format");
      expect(`${String(job.error)} ${String(job.error_message ?? "")}`).toContain("8192×8192");
      expect(JSON.stringify(job)).not.toContain(relay.config.dataDir);
      expect(job.cost_usd ?? null).toBeNull();
    } finally {
      await relay.close();
    }
  });
});
