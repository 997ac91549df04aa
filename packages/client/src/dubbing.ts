import { ConnectionError, fetchOrExplain, HttpError, requestJson, shownUrl } from "./errors.js";

/**
 * The dubbing interface for applications, in Node (20+) and browsers: upload through a presigned
 * URL (with progress), create a job (retried safely under one Idempotency-Key), follow it with
 * backoff until it ends, and fetch the result and subtitles.
 */

export type JobState = "pending" | "downloading" | "processing" | "uploading" | "completed" | "failed";

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
  readonly output_expires_at?: string | null;
  readonly voice?: string;
  readonly segments?: readonly {
    readonly start: number;
    readonly end: number;
    readonly speaker?: string;
    readonly text: string;
    readonly translated_text: string;
  }[];
}

export interface UploadGrant {
  readonly upload_url: string;
  readonly source_url: string;
  readonly upload_id: string;
  readonly max_file_size_bytes: number;
  readonly upload_headers: Readonly<Record<string, string>>;
}

export interface JobRequest {
  readonly sourceUrl: string;
  readonly targetLang: string;
  /** A language, or "auto" (the default). */
  readonly sourceLang?: string;
  /** "auto", "clone" (each speaker in their own voice), "female", "male" or a voice id. */
  readonly voice?: string;
  /**
   * Names and jargon to recognize and keep in the translation and subtitles, and glossary lines
   * `source => target` (`term => =` keeps it verbatim); up to 2,000 characters, as a session's.
   */
  readonly context?: string;
}

/** What an upload body can be: a browser File/Blob, bytes, or (Node) a stream with its size. */
export type UploadBody =
  | Blob
  | Uint8Array
  | { readonly stream: ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>; readonly size: number };

export const UPLOAD_CONTENT_TYPES: Readonly<Record<string, string>> = {
  mp4: "video/mp4",
  mov: "video/quicktime",
  mkv: "video/x-matroska",
  wav: "audio/wav",
  mp3: "audio/mpeg",
  flac: "audio/flac",
  ogg: "audio/ogg",
  m4a: "audio/mp4",
};

/** The upload Content-Type for a file name, by its extension; undefined when the service takes no such file. */
export function contentTypeFor(filename: string): string | undefined {
  return UPLOAD_CONTENT_TYPES[filename.split(".").pop()?.toLowerCase() ?? ""];
}

/** Network failures and gateway/availability errors: worth repeating an idempotent request. */
export function isTransient(error: unknown): boolean {
  if (error instanceof HttpError) return error.status === 502 || error.status === 503 || error.status === 504;
  return error instanceof ConnectionError;
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(signal.reason as Error);
    });
  });

export class DubbingClient {
  constructor(
    private readonly baseUrl: string,
    private readonly apiKey: string,
  ) {}

  /** `POST /api/dubbing/upload-url`. */
  uploadUrl(filename: string, contentType: string): Promise<UploadGrant> {
    return this.api("POST", "/api/dubbing/upload-url", { body: { filename, content_type: contentType } });
  }

  /**
   * Uploads `body` as `filename` and returns the `source_url` a job names. `onProgress` sees the
   * bytes sent. Content-Length is always set: S3 refuses chunked uploads to presigned URLs.
   */
  async upload(
    filename: string,
    body: UploadBody,
    options: {
      contentType?: string;
      onProgress?: (sent: number, total: number) => void;
      signal?: AbortSignal;
    } = {},
  ): Promise<{ sourceUrl: string; uploadId: string; bytes: number }> {
    const contentType = options.contentType ?? contentTypeFor(filename);
    if (!contentType) throw new RangeError(`cannot tell the media type of ${filename} from its extension`);
    const size = body instanceof Uint8Array ? body.byteLength : body.size;
    const grant = await this.uploadUrl(filename, contentType);
    if (size > grant.max_file_size_bytes) {
      throw new RangeError(
        `${filename} is ${size} bytes; the service accepts at most ${grant.max_file_size_bytes}`,
      );
    }
    const headers = new Headers(grant.upload_headers);
    if (!headers.has("content-type")) headers.set("content-type", contentType);
    const url = new URL(grant.upload_url, this.baseUrl).href;
    const XHR = (globalThis as { XMLHttpRequest?: new () => XMLHttpRequestLike }).XMLHttpRequest;
    if (XHR && typeof Blob !== "undefined" && (body instanceof Blob || body instanceof Uint8Array)) {
      // Browsers report upload progress only through XMLHttpRequest.
      await xhrPut(new XHR(), url, headers, body, size, options);
    } else {
      await streamPut(url, headers, body, size, options);
    }
    return { sourceUrl: grant.source_url, uploadId: grant.upload_id, bytes: size };
  }

  /** `POST /api/dubbing/jobs`, repeated on transient failures (3 attempts) under one Idempotency-Key. */
  async create(request: JobRequest): Promise<JobStatus> {
    const idempotencyKey = crypto.randomUUID();
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.api("POST", "/api/dubbing/jobs", {
          body: {
            source_url: request.sourceUrl,
            target_lang: request.targetLang,
            source_lang: request.sourceLang ?? "auto",
            ...(request.voice !== undefined ? { voice: request.voice } : {}),
            ...(request.context !== undefined ? { context: request.context } : {}),
          },
          headers: { "idempotency-key": idempotencyKey },
        });
      } catch (error) {
        if (!isTransient(error) || attempt >= 3) throw error;
        await sleep(1000 * 2 ** (attempt - 1));
      }
    }
  }

  /** `GET /api/dubbing/jobs/{id}`. */
  job(jobId: string, signal?: AbortSignal): Promise<JobStatus> {
    return this.api("GET", `/api/dubbing/jobs/${encodeURIComponent(jobId)}`, signal ? { signal } : {});
  }

  /**
   * Polls until the job is completed or failed, every 0.5 s at first, backing off to every 5 s.
   * `onUpdate` sees each status; transient failures are ridden out for a minute.
   */
  async wait(
    jobId: string,
    options: {
      onUpdate?: (job: JobStatus) => void;
      signal?: AbortSignal;
      /** First interval (default 500 ms) and the one it backs off to (default 5 s). */
      intervalMs?: number;
      maxIntervalMs?: number;
    } = {},
  ): Promise<JobStatus> {
    let interval = options.intervalMs ?? 500;
    let failingSince: number | undefined;
    for (;;) {
      try {
        const job = await this.job(jobId, options.signal);
        failingSince = undefined;
        options.onUpdate?.(job);
        if (job.status === "completed" || job.status === "failed") return job;
      } catch (error) {
        failingSince ??= Date.now();
        if (!isTransient(error) || Date.now() - failingSince > 60_000) throw error;
      }
      await sleep(interval, options.signal);
      interval = Math.min(options.maxIntervalMs ?? 5000, interval * 1.5);
    }
  }

  /** The dubbed file's response (a 48-hour URL); read its body as a stream or all at once. */
  async download(job: JobStatus, signal?: AbortSignal): Promise<Response> {
    if (!job.output_url) throw new RangeError(`job ${job.job_id} has no result (status ${job.status})`);
    const response = await fetchOrExplain(new URL(job.output_url, this.baseUrl), signal ? { signal } : {});
    if (!response.ok) throw new HttpError(response.status, await storageErrorBody(response));
    return response;
  }

  /** Subtitles of a finished job: the original or translated track, SubRip or WebVTT. */
  async subtitles(
    jobId: string,
    track: "original" | "translated",
    format: "srt" | "vtt",
    options: { speakers?: boolean } = {},
  ): Promise<string> {
    const query = new URLSearchParams({ track, format, speakers: String(options.speakers ?? false) });
    const response = await fetchOrExplain(
      new URL(`/api/dubbing/jobs/${encodeURIComponent(jobId)}/subtitles?${query}`, this.baseUrl),
      { headers: { authorization: `Bearer ${this.apiKey}` } },
    );
    if (!response.ok) throw new HttpError(response.status, await response.json().catch(() => undefined));
    return response.text();
  }

  private api<T>(method: string, route: string, options: Parameters<typeof requestJson>[4] = {}): Promise<T> {
    return requestJson<T>(this.baseUrl, this.apiKey, method, route, options);
  }
}

/**
 * A failed object-storage answer in the service's error shape: the embedded store answers JSON,
 * S3 answers XML (`<Code>`, `<Message>`).
 */
export async function storageErrorBody(response: Response): Promise<unknown> {
  const text = await response.text().catch(() => "");
  try {
    return JSON.parse(text) as unknown;
  } catch {
    const code = /<Code>([^<]*)<\/Code>/u.exec(text)?.[1];
    const message = /<Message>([^<]*)<\/Message>/u.exec(text)?.[1];
    return code || message ? { error: { code, message } } : undefined;
  }
}

interface XMLHttpRequestLike {
  open(method: string, url: string): void;
  setRequestHeader(name: string, value: string): void;
  send(body: unknown): void;
  abort(): void;
  readonly status: number;
  readonly responseText: string;
  readonly upload: { onprogress: ((event: { loaded: number }) => void) | null };
  onload: (() => void) | null;
  onerror: (() => void) | null;
}

function xhrPut(
  xhr: XMLHttpRequestLike,
  url: string,
  headers: Headers,
  body: Blob | Uint8Array,
  size: number,
  options: { onProgress?: (sent: number, total: number) => void; signal?: AbortSignal },
): Promise<void> {
  return new Promise((resolve, reject) => {
    xhr.open("PUT", url);
    // Browsers set Content-Length themselves (and refuse to be told).
    headers.forEach((value, name) => {
      if (name !== "content-length") xhr.setRequestHeader(name, value);
    });
    xhr.upload.onprogress = (event) => options.onProgress?.(event.loaded, size);
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) resolve();
      else reject(new HttpError(xhr.status, parseOrUndefined(xhr.responseText)));
    };
    // Browsers give no reason (the server down, CORS, or the page's Content-Security-Policy).
    xhr.onerror = () =>
      reject(new ConnectionError(`cannot reach ${shownUrl(url)}: network error`, shownUrl(url)));
    options.signal?.addEventListener("abort", () => xhr.abort());
    xhr.send(body);
  });
}

async function streamPut(
  url: string,
  headers: Headers,
  body: UploadBody,
  size: number,
  options: { onProgress?: (sent: number, total: number) => void; signal?: AbortSignal },
): Promise<void> {
  headers.set("content-length", String(size));
  const chunks: AsyncIterable<Uint8Array> =
    body instanceof Uint8Array
      ? (async function* () {
          for (let offset = 0; offset < body.byteLength; offset += 1 << 16)
            yield body.subarray(offset, offset + (1 << 16));
        })()
      : typeof Blob !== "undefined" && body instanceof Blob
        ? (body.stream() as unknown as AsyncIterable<Uint8Array>)
        : (body.stream as AsyncIterable<Uint8Array>);
  const iterator = chunks[Symbol.asyncIterator]();
  let sent = 0;
  // Pulled as fetch sends, so a large file is never read ahead into memory and the progress
  // follows what went out.
  const counted = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        const { value, done } = await iterator.next();
        if (done) {
          controller.close();
          return;
        }
        controller.enqueue(value);
        sent += value.byteLength;
        options.onProgress?.(sent, size);
      },
      async cancel(reason) {
        await iterator.return?.(reason);
      },
    },
    { highWaterMark: 0 },
  );
  const response = await fetchOrExplain(url, {
    method: "PUT",
    headers,
    body: counted,
    // Streamed request bodies need half duplex (Node's fetch requires saying so).
    duplex: "half",
    ...(options.signal ? { signal: options.signal } : {}),
  } as RequestInit);
  if (!response.ok) throw new HttpError(response.status, await storageErrorBody(response));
  await response.body?.cancel();
}

function parseOrUndefined(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text === "" ? undefined : { error: { code: "storage_error", message: text.slice(0, 200) } };
  }
}
