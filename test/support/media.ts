import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";
import { sharedPath } from "./shared.js";

const run = promisify(execFile);

/**
 * Builds a short test video from real speech: "go forward ten meters" and a LibriVox sentence
 * separated by silence, over a quiet 220 Hz tone (the "music" that must survive dubbing), with a
 * `testsrc` picture. `videoCodec` "h264" (copied by the dubber) or "mpeg4" (re-encoded).
 */
export async function makeTestVideo(dir: string, videoCodec: "h264" | "mpeg4" = "h264"): Promise<string> {
  const output = path.join(dir, `input-${videoCodec}.mp4`);
  const speechA = sharedPath("data/speech/librivox-pocketsphinx/goforward.wav");
  const speechB = sharedPath(
    "data/speech/librivox-pocketsphinx/sense_and_sensibility_01_austen_64kb-0880.wav",
  );
  await run("ffmpeg", [
    "-v",
    "error",
    "-y",
    "-i",
    speechA,
    "-i",
    speechB,
    "-f",
    "lavfi",
    "-i",
    "sine=frequency=220:sample_rate=48000",
    "-f",
    "lavfi",
    "-i",
    "testsrc=size=320x240:rate=25",
    "-filter_complex",
    "[0:a]aresample=48000,apad=pad_dur=1[a0];[1:a]aresample=48000[a1];[a0][a1]concat=n=2:v=0:a=1,apad=pad_dur=0.5[speech];" +
      "[2:a]volume=0.05[tone];[speech][tone]amix=inputs=2:duration=first:normalize=0[aout]",
    "-map",
    "3:v",
    "-map",
    "[aout]",
    "-t",
    "7.2",
    "-c:v",
    videoCodec === "h264" ? "libx264" : "mpeg4",
    "-pix_fmt",
    "yuv420p",
    "-c:a",
    "aac",
    "-b:a",
    "128k",
    output,
  ]);
  return output;
}

export async function probeStreams(file: string): Promise<{ codec_type: string; codec_name: string }[]> {
  const { stdout } = await run("ffprobe", ["-v", "error", "-print_format", "json", "-show_streams", file]);
  return (JSON.parse(stdout) as { streams: { codec_type: string; codec_name: string }[] }).streams;
}

export async function durationOf(file: string): Promise<number> {
  const { stdout } = await run("ffprobe", [
    "-v",
    "error",
    "-show_entries",
    "format=duration",
    "-of",
    "csv=p=0",
    file,
  ]);
  return Number(stdout.trim());
}
