import { randomUUID } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { rename, rm, stat } from "node:fs/promises";
import path from "node:path";
import { Readable, Transform, type TransformCallback } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ReadableStream as WebReadableStream } from "node:stream/web";
import { HttpError } from "../client/realtime-client.js";
import { DUBBING_LANGUAGES, isDubbingLanguage, parseLanguageTag } from "../languages.js";
import { CliError, describeError, requireKey, sleep, type Connection } from "./common.js";
import { ProgressLine } from "./progress.js";

/** `relay dub`: a local file or URL through the dubbing REST API, polled to the end, result saved to disk. */

/** Upload Content-Type by extension: the service accepts exactly these types. */
const CONTENT_TYPES: Record<string, string> = {
  ".mp4": "video/mp4",
  ".mov": "video/quicktime",
  ".mkv": "video/x-matroska",
  ".wav": "audio/wav",
  ".mp3": "audio/mpeg",
  ".flac": "audio/flac",
  ".ogg": "audio/ogg",
  ".m4a": "audio/mp4",
};

export interface DubCommandOptions {
  readonly to: string;
  readonly from: string;
  /** "auto", "female", "male" or a voice id; the server's default ("auto") when absent. */
  readonly voice?: string;
  readonly out: string;
  readonly json: boolean;
}

export type JobState = "pending" | "downloading" | "processing" | "uploading" | "completed" | "failed";

/** The job status document as this client reads it (fields it does not use are left out). */
export interface JobStatus {
  readonly job_id: string;
  readonly status: JobState;
  readonly source_lang: string;
  readonly target_lang: string;
  readonly error?: string | null;
  /** Why the job failed, in words (`error` is the spec's code alone). */
  readonly error_message?: string | null;
  readonly progress?: {
    readonly stage: string;
    readonly stage_name: string;
    readonly percent: number;
  } | null;
  readonly input_duration_sec?: number | null;
  readonly cost_usd?: number | null;
  readonly output_url?: string | null;
}

/** Until the worker reports progress, the status says what is happening. */
const STATUS_LABELS: Record<JobState, string> = {
  pending: "Waiting for a worker",
  downloading: "Downloading the source",
  processing: "Processing",
  uploading: "Uploading the result",
  completed: "Completed",
  failed: "Failed",
};

const POLL_INTERVAL_MS = 1000;
/** Transient poll failures (server restarting, network blip) are ridden out for this long. */
const POLL_GRACE_MS = 60_000;
/** Attempts at creating the job; the Idempotency-Key makes a repeat return the same job. */
const CREATE_ATTEMPTS = 3;

export const isUrl = (input: string): boolean => /^https?:\/\//iu.test(input);

export function contentTypeFor(file: string): string | undefined {
  return CONTENT_TYPES[path.extname(file).toLowerCase()];
}

/** Network failures and gateway/availability errors: worth repeating an idempotent request. */
function isTransient(error: unknown): boolean {
  if (error instanceof HttpError) return error.status === 502 || error.status === 503 || error.status === 504;
  return error instanceof TypeError && error.message === "fetch failed";
}

/** A JSON request to the service with the API key; non-2xx responses throw `HttpError` with the error body. */
async function api(
  connection: Connection,
  method: string,
  route: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<unknown> {
  const response = await fetch(new URL(route, connection.server), {
    method,
    headers: {
      authorization: `Bearer ${requireKey(connection)}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
      ...headers,
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const parsed: unknown = await response.json().catch(() => undefined);
  if (!response.ok) throw new HttpError(response.status, parsed);
  return parsed;
}

/**
 * The body of a failed object-storage request in the service's `{error:{code,message}}` shape, so
 * `describeError` can print it: the embedded store answers JSON, S3 answers XML (`<Code>`, `<Message>`).
 */
async function storageErrorBody(response: Response): Promise<unknown> {
  const text = await response.text().catch(() => "");
  try {
    return JSON.parse(text) as unknown;
  } catch {
    const code = /<Code>([^<]*)<\/Code>/u.exec(text)?.[1];
    const message = /<Message>([^<]*)<\/Message>/u.exec(text)?.[1];
    return code || message ? { error: { code, message } } : undefined;
  }
}

function parseJob(body: unknown): JobStatus {
  const job = body as Partial<JobStatus> | undefined;
  if (typeof job?.job_id !== "string" || typeof job.status !== "string" || !(job.status in STATUS_LABELS)) {
    throw new CliError(`unexpected job status from the server: ${JSON.stringify(body)}`);
  }
  return job as JobStatus;
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

export interface UploadResult {
  readonly sourceUrl: string;
  readonly uploadId: string;
  readonly bytes: number;
}

/**
 * `POST /api/dubbing/upload-url`, then the file streamed from disk in a PUT with the returned headers.
 * Content-Length is set explicitly: S3 refuses chunked uploads to presigned URLs.
 */
export async function uploadFile(
  connection: Connection,
  file: string,
  onBytes?: (sent: number, total: number) => void,
): Promise<UploadResult> {
  const contentType = contentTypeFor(file);
  if (!contentType) throw new CliError(`cannot tell the media type of ${file} from its extension`);
  const { size } = await stat(file);
  let grant: {
    upload_url: string;
    source_url: string;
    upload_id: string;
    max_file_size_bytes?: number;
    upload_headers?: Record<string, string>;
  };
  try {
    grant = (await api(connection, "POST", "/api/dubbing/upload-url", {
      filename: path.basename(file),
      content_type: contentType,
    })) as typeof grant;
  } catch (error) {
    throw new CliError(`upload URL request failed: ${describeError(error)}`);
  }
  // Checked here rather than after sending the whole file to be refused.
  if (grant.max_file_size_bytes !== undefined && size > grant.max_file_size_bytes) {
    throw new CliError(
      `${file} is ${formatBytes(size)}; the service accepts at most ${formatBytes(grant.max_file_size_bytes)}`,
    );
  }
  // The grant's headers are authoritative; a Headers object also merges keys differing only in case.
  const headers = new Headers(grant.upload_headers);
  if (!headers.has("content-type")) headers.set("content-type", contentType);
  headers.set("content-length", String(size));
  const body = byteCounter((sent) => onBytes?.(sent, size));
  // pipe() does not pass on a read error: without this a failing read would leave the PUT waiting.
  createReadStream(file)
    .on("error", (error) => body.destroy(error))
    .pipe(body);
  let response: Response;
  try {
    response = await fetch(new URL(grant.upload_url, connection.server), {
      method: "PUT",
      headers,
      // A Node stream body: undici needs `duplex: "half"` for streamed request bodies.
      body,
      duplex: "half",
    });
  } catch (error) {
    body.destroy();
    throw new CliError(`upload failed: ${describeError(error)}`);
  }
  if (!response.ok) {
    throw new CliError(
      `upload failed: ${describeError(new HttpError(response.status, await storageErrorBody(response)))}`,
    );
  }
  await response.body?.cancel();
  return { sourceUrl: grant.source_url, uploadId: grant.upload_id, bytes: size };
}

/** `POST /api/dubbing/jobs`, repeated on transient failures under one Idempotency-Key. */
export async function createJob(
  connection: Connection,
  request: { sourceUrl: string; targetLang: string; sourceLang: string; voice?: string },
): Promise<JobStatus> {
  const idempotencyKey = randomUUID();
  for (let attempt = 1; ; attempt++) {
    try {
      const body = await api(
        connection,
        "POST",
        "/api/dubbing/jobs",
        {
          source_url: request.sourceUrl,
          target_lang: request.targetLang,
          source_lang: request.sourceLang,
          ...(request.voice !== undefined ? { voice: request.voice } : {}),
        },
        { "idempotency-key": idempotencyKey },
      );
      return parseJob(body);
    } catch (error) {
      if (error instanceof CliError) throw error;
      if (!isTransient(error) || attempt >= CREATE_ATTEMPTS) {
        throw new CliError(`job request failed: ${describeError(error)}`);
      }
      await sleep(1000 * 2 ** (attempt - 1));
    }
  }
}

/** Polls `GET /api/dubbing/jobs/{id}` until the job completes or fails; `onUpdate` sees every poll. */
export async function waitForJob(
  connection: Connection,
  jobId: string,
  options: { intervalMs?: number; onUpdate?: (job: JobStatus) => void } = {},
): Promise<JobStatus> {
  let failingSince: number | undefined;
  for (;;) {
    try {
      const job = parseJob(await api(connection, "GET", `/api/dubbing/jobs/${encodeURIComponent(jobId)}`));
      failingSince = undefined;
      options.onUpdate?.(job);
      if (job.status === "completed" || job.status === "failed") return job;
    } catch (error) {
      if (error instanceof CliError) throw error;
      failingSince ??= Date.now();
      if (!isTransient(error) || Date.now() - failingSince > POLL_GRACE_MS) {
        throw new CliError(`checking job ${jobId} failed: ${describeError(error)}`);
      }
    }
    await sleep(options.intervalMs ?? POLL_INTERVAL_MS);
  }
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
    response = await fetch(url);
  } catch (error) {
    throw new CliError(`download failed: ${describeError(error)}`);
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

/** A tag the service reads as one of the dubbing languages ("es", "es-MX"), by the service's own parser. */
function isDubbingTag(tag: string): boolean {
  const parsed = parseLanguageTag(tag);
  return parsed.ok && isDubbingLanguage(parsed.language);
}

/** Usage problems are reported before anything is uploaded or a job is created. */
async function checkUsage(input: string, options: DubCommandOptions): Promise<void> {
  const languages = DUBBING_LANGUAGES.join(", ");
  if (!isDubbingTag(options.to)) {
    throw new CliError(`unsupported_language: --to "${options.to}" is not a dubbing language (${languages})`);
  }
  if (options.from !== "auto" && !isDubbingTag(options.from)) {
    throw new CliError(
      `unsupported_language: --from "${options.from}" is not a dubbing language (auto, ${languages})`,
    );
  }
  const outDir = path.dirname(path.resolve(options.out));
  if (!(await stat(outDir).catch(() => undefined))?.isDirectory()) {
    throw new CliError(`--out: the directory ${outDir} does not exist`);
  }
  if (isUrl(input)) return;
  const info = await stat(input).catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT") throw new CliError(`no such file: ${input}`);
    throw new CliError(`cannot read ${input}: ${error.message}`);
  });
  if (!info.isFile()) throw new CliError(`not a file: ${input}`);
  if (!contentTypeFor(input)) {
    throw new CliError(
      `cannot tell the media type of ${input} from its extension (supported: ${Object.keys(CONTENT_TYPES).join(" ")})`,
    );
  }
}

export async function dub(
  connection: Connection,
  input: string,
  options: DubCommandOptions,
): Promise<number> {
  await checkUsage(input, options);
  requireKey(connection);
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
