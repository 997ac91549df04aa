/**
 * Running ffmpeg and ffprobe: binary resolution, a process runner (argument arrays, never a shell;
 * time limits; abort; errors carrying the tail of stderr) and `probe`.
 */
import { spawn } from "node:child_process";
import { stat } from "node:fs/promises";
import path from "node:path";
import { z } from "zod";
import { findOnPath } from "../../os/programs.js";
import { MediaToolError, UnsupportedFormatError } from "./errors.js";

export interface MediaBinaries {
  readonly ffmpeg: string;
  readonly ffprobe: string;
}

let resolved: MediaBinaries | undefined;

/**
 * The system's ffmpeg/ffprobe from PATH (`npm run setup` installs the distribution's, which is
 * current and carries its security fixes). Resolved once per process.
 */
export function mediaBinaries(): MediaBinaries {
  if (resolved) return resolved;
  const ffmpeg = findOnPath("ffmpeg");
  const ffprobe = findOnPath("ffprobe");
  if (!ffmpeg || !ffprobe) {
    throw new Error(
      `${ffmpeg ? "ffprobe" : "ffmpeg"} not found on PATH (install ffmpeg, e.g. apt-get install ffmpeg; ` +
        "npm run setup does)",
    );
  }
  resolved = { ffmpeg, ffprobe };
  return resolved;
}

/** Overrides binary resolution (embedders with their own builds; tests). */
export function setMediaBinaries(binaries: MediaBinaries | undefined): void {
  resolved = binaries;
}

export interface RunOptions {
  /** The process is killed (SIGKILL) after this long. */
  readonly timeoutMs: number;
  readonly signal?: AbortSignal;
  /** Written to the program's stdin, which is then closed. Without it stdin is /dev/null. */
  readonly stdin?: Uint8Array;
  /**
   * ffmpeg only: receives the output position (seconds) as ffmpeg reports it with `-progress`. The
   * report goes to stdout, so the command must not write its own output there.
   */
  readonly onProgressSec?: (seconds: number) => void;
}

export interface RunResult {
  readonly stdout: Buffer;
  readonly stderr: string;
}

const STDERR_KEEP = 8_192;
const STDERR_LINES = 8;

function tail(stderr: string): string {
  return stderr.trim().split("\n").slice(-STDERR_LINES).join("\n").trim();
}

/** Runs one program with an argument array (no shell, so nothing in a file name is interpreted). */
export function runProgram(
  program: string,
  args: readonly string[],
  options: RunOptions,
): Promise<RunResult> {
  const name = path.basename(program);
  return new Promise<RunResult>((resolve, reject) => {
    options.signal?.throwIfAborted();
    const child = spawn(program, args, {
      stdio: [options.stdin ? "pipe" : "ignore", "pipe", "pipe"],
      windowsHide: true,
    });
    const stdout: Buffer[] = [];
    let stderr = "";
    let progressLine = "";
    let settled = false;
    let failure: Error | undefined;

    const kill = (error: Error): void => {
      failure ??= error;
      child.kill("SIGKILL");
    };
    const timer = setTimeout(
      () =>
        kill(new MediaToolError(`${name} timed out after ${options.timeoutMs} ms`, name, null, tail(stderr))),
      options.timeoutMs,
    );
    const onAbort = (): void => kill(abortReason(options.signal));
    options.signal?.addEventListener("abort", onAbort, { once: true });
    const finish = (error: Error | undefined, result?: RunResult): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal?.removeEventListener("abort", onAbort);
      if (error) reject(error);
      else resolve(result!);
    };

    child.stdout!.on("data", (chunk: Buffer) => {
      if (!options.onProgressSec) {
        stdout.push(chunk);
        return;
      }
      progressLine += chunk.toString("latin1");
      const lines = progressLine.split("\n");
      progressLine = lines.pop() ?? "";
      for (const line of lines) {
        // `out_time=HH:MM:SS.micro` exists in every ffmpeg version (out_time_us does not).
        const match = /^out_time=(\d+):(\d+):(\d+(?:\.\d+)?)\s*$/.exec(line);
        if (match) options.onProgressSec(Number(match[1]) * 3600 + Number(match[2]) * 60 + Number(match[3]));
      }
    });
    child.stderr!.on("data", (chunk: Buffer) => {
      stderr = (stderr + chunk.toString("utf8")).slice(-STDERR_KEEP);
    });
    if (options.stdin && child.stdin) {
      // EPIPE when the program exits without reading everything; its exit status tells why.
      child.stdin.on("error", () => undefined);
      child.stdin.end(options.stdin);
    }
    child.on("error", (error) =>
      finish(new MediaToolError(`cannot run ${program}: ${error.message}`, name, null, "")),
    );
    child.on("close", (code, signal) => {
      if (failure) return finish(failure);
      if (code !== 0) {
        const how = code === null ? `was killed by ${signal}` : `exited with status ${code}`;
        return finish(new MediaToolError(`${name} ${how}`, name, code, tail(stderr)));
      }
      finish(undefined, { stdout: Buffer.concat(stdout), stderr });
    });
  });
}

function abortReason(signal: AbortSignal | undefined): Error {
  const reason: unknown = signal?.reason;
  if (reason instanceof Error) return reason;
  return new DOMException("the operation was aborted", "AbortError");
}

/** Runs ffmpeg quietly (errors only), never reading the terminal; `-progress` when asked. */
export function runFfmpeg(args: readonly string[], options: RunOptions): Promise<RunResult> {
  const base = ["-hide_banner", "-nostdin", "-loglevel", "error", "-y"];
  const progress = options.onProgressSec ? ["-progress", "pipe:1", "-nostats"] : [];
  // -nostdin only turns off keyboard interaction; an input read from "pipe:0" still works.
  return runProgram(mediaBinaries().ffmpeg, [...base, ...progress, ...args], options);
}

export function runFfprobe(args: readonly string[], options: RunOptions): Promise<RunResult> {
  return runProgram(mediaBinaries().ffprobe, ["-hide_banner", ...args], options);
}

/**
 * An input as ffmpeg must read untrusted files: `file:` so nothing in the name is taken for a
 * protocol, and only the file protocol allowed, so no playlist or reference inside the file can make
 * ffmpeg open a network address.
 */
export function inputArgs(file: string): string[] {
  return ["-protocol_whitelist", "file", "-i", localPath(file)];
}

/** `file:` + absolute path: ffmpeg then never reads a protocol prefix into the name. */
export function localPath(file: string): string {
  return `file:${path.resolve(file)}`;
}

/**
 * Demuxers accepted for dubbing: plain media containers. Formats that reference other files
 * (HLS and DASH playlists, concat lists, image sequences) are refused: opened by the service, they
 * could pull other local files (say, other customers' uploads) into the output.
 */
export const ACCEPTED_DEMUXERS: ReadonlySet<string> = new Set([
  "mov",
  "mp4",
  "matroska",
  "webm",
  "avi",
  "mpegts",
  "mpeg",
  "flv",
  "asf",
  "mxf",
  "dv",
  "nut",
  "rm",
  "wav",
  "w64",
  "mp3",
  "aac",
  "flac",
  "ogg",
  "aiff",
  "caf",
  "amr",
  "ac3",
  "eac3",
  "dts",
  "wv",
  "ape",
  "tta",
  "au",
]);

/** Whether ffprobe's `format_name` (a comma-separated list of names) is an accepted demuxer. */
export function isAcceptedFormat(formatName: string): boolean {
  return formatName.split(",").some((name) => ACCEPTED_DEMUXERS.has(name.trim()));
}

/** A time limit proportional to the media's length, for passes that decode or encode all of it. */
export function timeoutFor(durationSec: number, secondsPerMediaSecond: number, minimumMs = 60_000): number {
  return Math.max(minimumMs, Math.ceil(durationSec * secondsPerMediaSecond * 1000));
}

// ---------------------------------------------------------------- probe

/**
 * The largest video frame accepted: at most 4096 pixels on a side and no more pixels than 4K DCI
 * (4096×2160, 8.8 megapixels), so 4K DCI and UHD pass either way round. Decoding costs memory in
 * proportion to the frame (an 8192×8192 input made ffmpeg use 1.9 GB), so larger inputs fail as
 * `unsupported_format` before anything decodes them.
 */
export const MAX_FRAME = { side: 4096, pixels: 4096 * 2160 } as const;

export interface MediaInfo {
  readonly durationSec: number;
  readonly hasAudio: boolean;
  /** Cover art (an attached picture, as in MP3/M4A files) does not count as video. */
  readonly hasVideo: boolean;
  /** ffmpeg codec name of the video stream ("h264", "mpeg4", …), null without video. */
  readonly videoCodec: string | null;
  /** ffmpeg codec name of the first audio stream ("aac", "mp3", "pcm_s16le", …), null without audio. */
  readonly audioCodec: string | null;
  /** ffprobe's demuxer name(s), e.g. "mov,mp4,m4a,3gp,3g2,mj2". */
  readonly formatName: string;
  /** Absolute stream indices (for `-map 0:N`) of the first audio and the first real video stream. */
  readonly audioStreamIndex: number | null;
  readonly videoStreamIndex: number | null;
  readonly audioChannels: number | null;
  readonly audioSampleRate: number | null;
}

const probeSchema = z.object({
  format: z
    .object({
      format_name: z.string().optional(),
      duration: z.string().optional(),
    })
    .optional(),
  streams: z
    .array(
      z.object({
        index: z.number(),
        codec_type: z.string().optional(),
        codec_name: z.string().optional(),
        width: z.number().optional(),
        height: z.number().optional(),
        channels: z.number().optional(),
        sample_rate: z.string().optional(),
        duration: z.string().optional(),
        disposition: z.object({ attached_pic: z.number().optional() }).optional(),
      }),
    )
    .optional(),
});

export async function probe(
  file: string,
  options: { signal?: AbortSignal; timeoutMs?: number } = {},
): Promise<MediaInfo> {
  // A missing file is the caller's mistake, not an unsupported format.
  const info = await stat(file);
  const name = path.basename(file);
  if (!info.isFile()) throw new Error(`${name} is not a file`);
  let output: RunResult;
  try {
    output = await runFfprobe(
      [
        "-v",
        "error",
        "-print_format",
        "json",
        "-show_format",
        "-show_streams",
        "-protocol_whitelist",
        "file",
        localPath(file),
      ],
      { timeoutMs: options.timeoutMs ?? 30_000, ...(options.signal ? { signal: options.signal } : {}) },
    );
  } catch (error) {
    if (error instanceof MediaToolError && error.exitCode !== null) {
      // ffprobe names the input by its full path, which stays on the server.
      const reason = lastLine(error.stderrTail)
        .split(localPath(file))
        .join(name)
        .split(path.resolve(file))
        .join(name);
      throw new UnsupportedFormatError(
        `${name} is not a media file ffmpeg can read${reason ? ` (${reason})` : ""}`,
        { cause: error },
      );
    }
    throw error;
  }
  let parsed: z.infer<typeof probeSchema>;
  try {
    parsed = probeSchema.parse(JSON.parse(output.stdout.toString("utf8")));
  } catch (error) {
    throw new Error(`unexpected ffprobe output for ${name}: ${(error as Error).message}`, { cause: error });
  }
  const streams = parsed.streams ?? [];
  const audio = streams.find((s) => s.codec_type === "audio");
  const video = streams.find((s) => s.codec_type === "video" && s.disposition?.attached_pic !== 1);
  if (!audio && !video) {
    throw new UnsupportedFormatError(`${name} has no audio or video stream`);
  }
  // Cover art is never decoded for dubbing, so only real video streams are bounded.
  for (const stream of streams) {
    if (stream.codec_type !== "video" || stream.disposition?.attached_pic === 1) continue;
    const { width = 0, height = 0 } = stream;
    if (Math.max(width, height) > MAX_FRAME.side || width * height > MAX_FRAME.pixels) {
      throw new UnsupportedFormatError(
        `${name} has ${width}×${height} video; the limit is ${MAX_FRAME.side} pixels on a side ` +
          `and ${MAX_FRAME.pixels} in all (4096×2160)`,
      );
    }
  }
  const formatDuration = Number(parsed.format?.duration);
  const streamDurations = streams.map((s) => Number(s.duration)).filter(Number.isFinite);
  const durationSec = Number.isFinite(formatDuration)
    ? formatDuration
    : streamDurations.length > 0
      ? Math.max(...streamDurations)
      : NaN;
  if (!Number.isFinite(durationSec)) {
    throw new UnsupportedFormatError(`${name}: ffprobe cannot tell the media's duration`);
  }
  const sampleRate = Number(audio?.sample_rate);
  return {
    durationSec,
    hasAudio: audio !== undefined,
    hasVideo: video !== undefined,
    videoCodec: video?.codec_name ?? null,
    audioCodec: audio?.codec_name ?? null,
    formatName: parsed.format?.format_name ?? "unknown",
    audioStreamIndex: audio?.index ?? null,
    videoStreamIndex: video?.index ?? null,
    audioChannels: audio?.channels ?? null,
    audioSampleRate: Number.isFinite(sampleRate) ? sampleRate : null,
  };
}

function lastLine(text: string): string {
  return text.trim().split("\n").at(-1)?.trim() ?? "";
}
