import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { UnsupportedFormatError } from "../../src/dubbing/errors.js";
import { MAX_FRAME, probe } from "../../src/dubbing/ffmpeg.js";
import { API_KEY, startServer } from "../support/server.js";

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
      const auth = { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" };
      const upload = (await (
        await fetch(new URL("/api/dubbing/upload-url", relay.baseUrl), {
          method: "POST",
          headers: auth,
          body: JSON.stringify({ filename: "huge.mkv", content_type: "video/x-matroska" }),
        })
      ).json()) as { upload_url: string; source_url: string; upload_headers: Record<string, string> };
      const put = await fetch(upload.upload_url, {
        method: "PUT",
        headers: upload.upload_headers,
        body: await readFile(video),
      });
      expect(put.ok).toBe(true);
      const created = await fetch(new URL("/api/dubbing/jobs", relay.baseUrl), {
        method: "POST",
        headers: auth,
        body: JSON.stringify({ source_url: upload.source_url, target_lang: "es", source_lang: "en" }),
      });
      expect(created.status).toBe(201);
      const { job_id: id } = (await created.json()) as { job_id: string };
      let job: Record<string, unknown> = {};
      for (let i = 0; i < 240 && job.status !== "failed" && job.status !== "completed"; i++) {
        await new Promise((resolve) => setTimeout(resolve, 250));
        const response = await fetch(new URL(`/api/dubbing/jobs/${id}`, relay.baseUrl), {
          headers: { authorization: `Bearer ${API_KEY}` },
        });
        job = (await response.json()) as Record<string, unknown>;
      }
      expect(job.status).toBe("failed");
      expect(job.error).toMatch(/^unsupported_format/);
      expect(`${String(job.error)} ${String(job.error_message ?? "")}`).toContain("8192×8192");
      expect(JSON.stringify(job)).not.toContain(relay.config.dataDir);
      expect(job.cost_usd ?? null).toBeNull();
    } finally {
      await relay.close();
    }
  });
});
