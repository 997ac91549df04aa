import { createReadStream, createWriteStream } from "node:fs";
import { rename, rm, stat } from "node:fs/promises";
import path from "node:path";
import { Readable, Transform, type TransformCallback } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ReadableStream as WebReadableStream } from "node:stream/web";
import {
  contentTypeFor,
  DubbingClient,
  HttpError,
  storageErrorBody,
  UPLOAD_CONTENT_TYPES,
  type JobStatus,
} from "@relay-translate/client";
import { parseLanguageTag } from "../core/language-tags.js";
import { describeError } from "./errors.js";
import { CliError, request } from "./network.js";
import { checkOutputPath, contextOption } from "./options.js";
import { requireKey, type Connection } from "./session.js";
import { ProgressLine } from "./progress.js";

/** `relay dub`: a local file or URL through the dubbing REST API, polled to the end, result saved to disk. */

export interface DubCommandOptions {
  readonly to: string;
  readonly from: string;
  /** "auto", "clone", "female", "male" or a voice id; the server's default ("auto") when absent. */
  readonly voice?: string;
  readonly out: string;
  readonly context?: string;
  readonly contextFile?: string;
  readonly json: boolean;
}

/** Until the worker reports progress, the status says what is happening. */
const STATUS_LABELS: Record<JobStatus["status"], string> = {
  pending: "Waiting for a worker",
  downloading: "Downloading the source",
  processing: "Processing",
  uploading: "Uploading the result",
  completed: "Completed",
  failed: "Failed",
};

export { type JobStatus } from "@relay-translate/client";

export const isUrl = (input: string): boolean => /^https?:\/\//iu.test(input);

/** The SDK's dubbing client for the command's server and key. */
export function dubbingClientOf(connection: Connection): DubbingClient {
  return new DubbingClient(connection.server, requireKey(connection));
}

/** The SDK's upload with the file streamed from disk; a failure is phrased for the user. */
export async function uploadFile(
  connection: Connection,
  file: string,
  onBytes?: (sent: number, total: number) => void,
): Promise<{ sourceUrl: string; uploadId: string; bytes: number }> {
  const { size } = await stat(file);
  try {
    return await dubbingClientOf(connection).upload(
      path.basename(file),
      { stream: createReadStream(file), size },
      onBytes ? { onProgress: onBytes } : {},
    );
  } catch (error) {
    throw new CliError(
      `upload failed: ${error instanceof RangeError ? error.message : describeError(error)}`,
    );
  }
}

export async function createJob(
  connection: Connection,
  request: { sourceUrl: string; targetLang: string; sourceLang: string; voice?: string; context?: string },
): Promise<JobStatus> {
  try {
    return await dubbingClientOf(connection).create(request);
  } catch (error) {
    throw new CliError(`job request failed: ${describeError(error)}`);
  }
}

export async function waitForJob(
  connection: Connection,
  jobId: string,
  options: { intervalMs?: number; maxIntervalMs?: number; onUpdate?: (job: JobStatus) => void } = {},
): Promise<JobStatus> {
  try {
    return await dubbingClientOf(connection).wait(jobId, options);
  } catch (error) {
    throw new CliError(`checking job ${jobId} failed: ${describeError(error)}`);
  }
}

/** Counts the bytes flowing through (upload and download progress). */
function byteCounter(onBytes: (total: number) => void): Transform {
  let total = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback) {
      total += chunk.length;
      onBytes(total);
      callback(null, chunk);
    },
  });
}

/**
 * Streams a download to `out` through `<out>.part`, renamed at the end: an interrupted download never
 * leaves a truncated file under the requested name.
 */
export async function downloadTo(
  url: string,
  out: string,
  onBytes?: (received: number, total: number | undefined) => void,
): Promise<{ bytes: number; contentType: string | undefined }> {
  let response: Response;
  try {
    response = await request(url);
  } catch (error) {
    throw new CliError(
      `download failed: ${error instanceof CliError ? error.message : describeError(error)}`,
    );
  }
  if (!response.ok || !response.body) {
    throw new CliError(
      `download failed: ${describeError(new HttpError(response.status, await storageErrorBody(response)))}`,
    );
  }
  const length = Number(response.headers.get("content-length") ?? NaN);
  const total = Number.isFinite(length) ? length : undefined;
  let received = 0;
  const partial = `${out}.part`;
  try {
    await pipeline(
      Readable.fromWeb(response.body as WebReadableStream<Uint8Array>),
      byteCounter((bytes) => {
        received = bytes;
        onBytes?.(bytes, total);
      }),
      createWriteStream(partial),
    );
    await rename(partial, out);
  } catch (error) {
    await rm(partial, { force: true });
    throw new CliError(`download failed: ${describeError(error)}`);
  }
  return { bytes: received, contentType: response.headers.get("content-type") ?? undefined };
}

function formatBytes(bytes: number): string {
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

/** Usage problems are reported before anything is uploaded or a job is created. */
async function checkUsage(connection: Connection, input: string, options: DubCommandOptions): Promise<void> {
  await checkOutputPath(options.out);
  if (!isUrl(input)) await checkInputFile(input);
  await checkLanguages(connection, options);
}

async function checkInputFile(input: string): Promise<void> {
  const info = await stat(input).catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT") throw new CliError(`no such file: ${input}`);
    throw new CliError(`cannot read ${input}: ${error.message}`);
  });
  if (!info.isFile()) throw new CliError(`not a file: ${input}`);
  if (!contentTypeFor(input)) {
    throw new CliError(
      `cannot tell the media type of ${input} from its extension (supported: ${Object.keys(
        UPLOAD_CONTENT_TYPES,
      )
        .map((e) => `.${e}`)
        .join(" ")})`,
    );
  }
}

/** The languages are the server's (GET /v1/languages), not a list of this client's. */
async function checkLanguages(connection: Connection, options: DubCommandOptions): Promise<void> {
  const served = await fetch(new URL("/v1/languages", connection.server))
    .then((response) => response.json() as Promise<{ dubbing?: { sources: string[]; targets: string[] } }>)
    .then((report) => report.dubbing)
    .catch(() => undefined);
  // Unreachable (or an older server): the job request reports what is wrong instead.
  if (!served) return;
  const primary = (tag: string) => {
    const parsed = parseLanguageTag(tag);
    return parsed.ok ? parsed.language : tag;
  };
  if (!served.targets.includes(primary(options.to))) {
    throw new CliError(
      `unsupported_language: this server does not dub into "${options.to}" (it dubs into ${served.targets.join(", ")})`,
    );
  }
  if (!served.sources.includes(options.from === "auto" ? "auto" : primary(options.from))) {
    throw new CliError(
      `unsupported_language: this server does not dub from "${options.from}" (it dubs from ${served.sources.join(", ")})`,
    );
  }
}

export async function dub(
  connection: Connection,
  input: string,
  options: DubCommandOptions,
): Promise<number> {
  await checkUsage(connection, input, options);
  requireKey(connection);
  const context = await contextOption(options);
  const view = new ProgressLine(process.stderr);

  let sourceUrl = input;
  if (!isUrl(input)) {
    const { size } = await stat(input);
    view.note(`uploading ${input} (${formatBytes(size)})`);
    try {
      ({ sourceUrl } = await uploadFile(connection, input, (sent, total) => {
        if (view.tty) view.update({ percent: (100 * sent) / Math.max(1, total), stage: "Uploading" });
      }));
    } finally {
      view.end();
    }
  }

  const created = await createJob(connection, {
    sourceUrl,
    targetLang: options.to,
    sourceLang: options.from,
    ...(options.voice !== undefined ? { voice: options.voice } : {}),
    ...(context !== undefined ? { context } : {}),
  });
  const jobId = created.job_id;
  view.note(`job ${jobId} created`);
  // The job runs on the server whatever happens here: say where to find it rather than losing it.
  const onInterrupt = () => {
    view.end();
    process.stderr.write(
      `relay: interrupted; job ${jobId} continues on the server (GET /api/dubbing/jobs/${jobId})\n`,
    );
    process.exit(130);
  };
  process.once("SIGINT", onInterrupt);
  let job: JobStatus;
  try {
    job = await waitForJob(connection, jobId, {
      onUpdate: (update) =>
        view.update({
          percent: update.progress?.percent ?? 0,
          stage: update.progress?.stage_name ?? STATUS_LABELS[update.status],
        }),
    });
  } finally {
    process.off("SIGINT", onInterrupt);
    view.end();
  }

  if (job.status === "failed") {
    if (options.json) console.log(JSON.stringify(job));
    const reason = job.error_message ? `: ${job.error_message}` : "";
    throw new CliError(`job failed: ${job.error ?? "no reason given"}${reason}`);
  }
  if (!job.output_url) throw new CliError(`job ${jobId} completed without an output_url`);

  let download: { bytes: number; contentType: string | undefined };
  try {
    download = await downloadTo(
      new URL(job.output_url, connection.server).href,
      options.out,
      (got, total) => {
        if (view.tty && total) view.update({ percent: (100 * got) / total, stage: "Downloading the result" });
      },
    );
  } finally {
    view.end();
  }
  const outputPath = path.resolve(options.out);
  const audioOnly = download.contentType?.startsWith("audio/") === true;
  if (options.json) {
    console.log(JSON.stringify({ ...job, output_path: outputPath, output_bytes: download.bytes }));
    return 0;
  }
  const seconds = job.input_duration_sec != null ? `${job.input_duration_sec.toFixed(1)} s of input, ` : "";
  const from = job.source_lang === "auto" ? "" : ` from ${job.source_lang}`;
  console.log(`dubbed into ${job.target_lang}${from}: ${seconds}cost ${job.cost_usd ?? 0} USD`);
  console.log(`saved ${outputPath} (${formatBytes(download.bytes)}${audioOnly ? ", MP3 audio" : ""})`);
  if (audioOnly && path.extname(outputPath).toLowerCase() !== ".mp3") {
    process.stderr.write("note: the input has no video, so the result is MP3 audio despite the file name\n");
  }
  return 0;
}
