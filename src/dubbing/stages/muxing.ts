/**
 * The "muxing" stage: the mixed soundtrack becomes the output file, muxed with the input's video
 * into an MP4 (H.264 copied, anything else encoded) or, for audio-only inputs, taken as the MP3.
 * Separate because it is the one stage whose cost depends on the video, not the speech.
 */
import { rename } from "node:fs/promises";
import path from "node:path";
import { inputArgs, localPath, runFfmpeg, timeoutFor, type MediaInfo } from "../media/ffmpeg.js";

/** Moves the result into `outputDir` as `<outputName>.mp4` or `.mp3`; returns its path. */
export async function writeOutput(job: {
  inputPath: string;
  mixedPath: string;
  info: MediaInfo;
  outputKind: "video" | "audio";
  workDir: string;
  outputDir: string;
  outputName: string;
  onProgress: (fraction: number) => void;
  signal?: AbortSignal;
}): Promise<string> {
  const fileName = `${job.outputName}.${job.outputKind === "video" ? "mp4" : "mp3"}`;
  const outputPath = path.join(job.outputDir, fileName);
  if (job.outputKind === "video") {
    const muxedPath = path.join(job.workDir, fileName);
    await muxVideo({
      inputPath: job.inputPath,
      audioPath: job.mixedPath,
      info: job.info,
      outputPath: muxedPath,
      onProgress: job.onProgress,
      ...(job.signal ? { signal: job.signal } : {}),
    });
    await rename(muxedPath, outputPath);
  } else {
    await rename(job.mixedPath, outputPath);
  }
  return outputPath;
}

/** The final MP4: the mixed soundtrack copied in; H.264 video copied bit for bit, anything else encoded. */
async function muxVideo(job: {
  inputPath: string;
  audioPath: string;
  info: MediaInfo;
  outputPath: string;
  onProgress: (fraction: number) => void;
  signal?: AbortSignal;
}): Promise<void> {
  const { info } = job;
  const copy = info.videoCodec === "h264";
  const video = copy
    ? ["-c:v", "copy"]
    : // yuv420p and even dimensions: what every H.264 player accepts.
      [
        "-c:v",
        "libx264",
        "-preset",
        "veryfast",
        "-crf",
        "23",
        "-pix_fmt",
        "yuv420p",
        "-vf",
        "scale=trunc(iw/2)*2:trunc(ih/2)*2",
      ];
  await runFfmpeg(
    [
      ...inputArgs(job.inputPath),
      ...inputArgs(job.audioPath),
      "-map",
      `0:${info.videoStreamIndex}`,
      "-map",
      "1:a:0",
      ...video,
      "-c:a",
      "copy",
      "-movflags",
      "+faststart",
      "-max_muxing_queue_size",
      "4096",
      "-f",
      "mp4",
      localPath(job.outputPath),
    ],
    {
      timeoutMs: timeoutFor(info.durationSec, copy ? 1 : 10, 120_000),
      onProgressSec: (sec) => job.onProgress(sec / info.durationSec),
      ...(job.signal ? { signal: job.signal } : {}),
    },
  );
}
