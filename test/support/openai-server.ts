/**
 * A stand-in for a server speaking the OpenAI-compatible API (transcriptions, chat completions,
 * speech) on a loopback port, for testing the remote engines. Answers are deterministic functions of
 * the request; every request is recorded; failures can be scripted per endpoint.
 */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import { readBody, responseDelays } from "./stand-in-http.js";
import busboy from "busboy";
import wavefile from "wavefile";

const { WaveFile } = wavefile;

export type Endpoint = "transcriptions" | "chat" | "speech";

const ROUTES: Readonly<Record<string, Endpoint>> = {
  "/v1/audio/transcriptions": "transcriptions",
  "/v1/chat/completions": "chat",
  "/v1/audio/speech": "speech",
};

export interface UploadedFile {
  readonly filename: string;
  readonly mimeType: string;
  readonly bytes: Buffer;
  /** When the file is a WAV. */
  readonly audio?: {
    readonly sampleRate: number;
    readonly channels: number;
    readonly bitDepth: string;
    readonly samples: number;
  };
}

export interface RecordedRequest {
  readonly endpoint: Endpoint | undefined;
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  /** JSON bodies (chat, speech). */
  readonly json?: Record<string, unknown>;
  /** Multipart fields; every value of a repeated name (`timestamp_granularities[]`) in order. */
  readonly fields?: Readonly<Record<string, readonly string[]>>;
  readonly file?: UploadedFile;
  /** The client went away before the answer was sent. */
  aborted: boolean;
}

/** One scripted misbehavior, used by the next request of its endpoint. */
export interface Fault {
  /** Answer with this status instead (after `delayMs`). */
  readonly status?: number;
  /** Error message of the status answer. */
  readonly message?: string;
  /** Error body shape: OpenAI's `{error: {message}}` (default) or FastAPI's `{detail}`. */
  readonly shape?: "openai" | "fastapi";
  /** Wait this long before answering (a normal answer unless `status` is set). */
  readonly delayMs?: number;
  /** Extra response headers (e.g. `retry-after-ms`). */
  readonly headers?: Readonly<Record<string, string>>;
  /** Send the status line and headers of a normal answer, then stall this long before the body. */
  readonly stallBodyMs?: number;
}

/** A transcription request that names no language, as `languageOf` sees it. */
export interface IdentificationRequest {
  /**
   * Which utterance the audio is, counting distinct utterances from 0 since the last reset: requests
   * whose audio is a prefix of another's (a stream's interim and final requests) are one utterance.
   */
  readonly utterance: number;
  readonly durationMs: number;
}

export interface OpenAiTestServer {
  /** "http://127.0.0.1:<port>/v1" */
  readonly baseUrl: string;
  readonly requests: RecordedRequest[];
  /** Most requests of each endpoint the server had in progress at once. */
  readonly maxInFlight: Record<Endpoint, number>;
  /** Delay before every answer. */
  delayMs: number;
  /** What `language` a transcription reports when the request names none (unless `languageOf` is set). */
  detectedLanguage: string;
  /**
   * Scripts identification: the `language` (a name, as Whisper reports it) a transcription that
   * names none reports; undefined leaves it out of the answer. Default: `detectedLanguage`.
   */
  languageOf: ((request: IdentificationRequest) => string | undefined) | undefined;
  /** Transcriptions carry `words` (false: segments only, like servers ignoring word granularity). */
  transcriptionWords: boolean;
  /** The assistant's answer to a chat request, from its last user message. */
  reply: (text: string, body: Record<string, unknown>) => string;
  /** Delay between streamed chat chunks. */
  chunkDelayMs: number;
  /** Streamed chat: after this many content chunks, stall for `stallMs` before continuing. */
  stallAfterChunks: number | undefined;
  stallMs: number;
  /** Sample rate of WAV speech answers (pcm answers are always 24 kHz). */
  wavSampleRate: number;
  /** WAV speech answers carry streaming placeholders (0xFFFFFFFF) as RIFF and data sizes. */
  streamingWavHeader: boolean;
  /** Scripts the next requests of `endpoint` (each fault is used once, in order). */
  script(endpoint: Endpoint, ...faults: Fault[]): void;
  count(endpoint: Endpoint): number;
  ofEndpoint(endpoint: Endpoint): RecordedRequest[];
  reset(): void;
  close(): Promise<void>;
}

/** Speech length per input character. */
export const SPEECH_MS_PER_CHAR = 50;
export const TONE_HZ = 220;

function tone(sampleRate: number, ms: number): Int16Array {
  const samples = new Int16Array(Math.round((sampleRate * ms) / 1000));
  for (let i = 0; i < samples.length; i++) {
    samples[i] = Math.round(0.5 * 32767 * Math.sin((2 * Math.PI * TONE_HZ * i) / sampleRate));
  }
  return samples;
}

function describeWav(bytes: Buffer): UploadedFile["audio"] {
  try {
    const wav = new WaveFile(bytes);
    const fmt = wav.fmt as { sampleRate: number; numChannels: number; bitsPerSample: number };
    const data = wav.data as { chunkSize: number };
    return {
      sampleRate: fmt.sampleRate,
      channels: fmt.numChannels,
      bitDepth: wav.bitDepth,
      samples: data.chunkSize / (fmt.numChannels * (fmt.bitsPerSample / 8)),
    };
  } catch {
    return undefined;
  }
}

/** The samples of a mono 16-bit WAV. */
function pcmOf(bytes: Buffer): Int16Array {
  return new WaveFile(bytes).getSamples(false, Int16Array) as unknown as Int16Array;
}

function parseMultipart(
  req: IncomingMessage,
): Promise<{ fields: Record<string, string[]>; file: UploadedFile | undefined }> {
  return new Promise((resolve, reject) => {
    const fields: Record<string, string[]> = {};
    let file: UploadedFile | undefined;
    const parser = busboy({ headers: req.headers });
    parser.on("field", (name, value) => (fields[name] ??= []).push(value));
    parser.on("file", (_name, stream, info) => {
      const chunks: Buffer[] = [];
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.on("end", () => {
        const bytes = Buffer.concat(chunks);
        const audio = describeWav(bytes);
        file = { filename: info.filename ?? "", mimeType: info.mimeType, bytes, ...(audio ? { audio } : {}) };
      });
    });
    parser.on("close", () => resolve({ fields, file }));
    parser.on("error", reject);
    req.pipe(parser);
  });
}

const LANGUAGE_NAMES = new Intl.DisplayNames(["en"], { type: "language" });

/**
 * An `ENGINES_FILE` entry (any kind) for the stand-in: a short timeout and one retry, so tests of
 * failures stay quick.
 */
export function standInEntry(
  remote: OpenAiTestServer,
  model: string,
  languages: readonly string[],
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    engine: "openai",
    baseUrl: remote.baseUrl,
    model,
    languages,
    timeoutMs: 5000,
    maxRetries: 1,
    ...extra,
  };
}

export async function startOpenAiServer(): Promise<OpenAiTestServer> {
  const requests: RecordedRequest[] = [];
  const scripts = new Map<Endpoint, Fault[]>();
  const inFlight: Record<Endpoint, number> = { transcriptions: 0, chat: 0, speech: 0 };
  const maxInFlight: Record<Endpoint, number> = { transcriptions: 0, chat: 0, speech: 0 };
  /** The longest audio heard of each utterance (see `IdentificationRequest.utterance`). */
  const utterances: Int16Array[] = [];

  /** The index of the utterance `pcm` belongs to, recording it when it is new or longer. */
  const utteranceOf = (pcm: Int16Array): number => {
    const prefix = (short: Int16Array, long: Int16Array) => short.every((sample, i) => sample === long[i]);
    const known = utterances.findIndex((heard) =>
      heard.length <= pcm.length ? prefix(heard, pcm) : prefix(pcm, heard),
    );
    if (known === -1) return utterances.push(pcm) - 1;
    if (pcm.length > utterances[known]!.length) utterances[known] = pcm;
    return known;
  };

  const { wait, clear: clearDelays } = responseDelays();

  const state: Omit<OpenAiTestServer, "baseUrl" | "close"> = {
    requests,
    maxInFlight,
    delayMs: 0,
    detectedLanguage: "english",
    languageOf: undefined,
    transcriptionWords: true,
    reply: (text) => `[translated] ${text}`,
    chunkDelayMs: 2,
    stallAfterChunks: undefined,
    stallMs: 0,
    wavSampleRate: 22_050,
    streamingWavHeader: false,
    script(endpoint, ...faults) {
      scripts.set(endpoint, [...(scripts.get(endpoint) ?? []), ...faults]);
    },
    count: (endpoint) => requests.filter((r) => r.endpoint === endpoint).length,
    ofEndpoint: (endpoint) => requests.filter((r) => r.endpoint === endpoint),
    reset() {
      requests.length = 0;
      scripts.clear();
      for (const key of Object.keys(maxInFlight) as Endpoint[]) maxInFlight[key] = 0;
      state.delayMs = 0;
      state.detectedLanguage = "english";
      state.languageOf = undefined;
      utterances.length = 0;
      state.transcriptionWords = true;
      state.reply = (text) => `[translated] ${text}`;
      state.chunkDelayMs = 2;
      state.stallAfterChunks = undefined;
      state.stallMs = 0;
      state.wavSampleRate = 22_050;
      state.streamingWavHeader = false;
    },
  };

  const sendJson = (
    res: ServerResponse,
    status: number,
    body: unknown,
    headers: Record<string, string> = {},
  ) => {
    res.writeHead(status, { "content-type": "application/json", ...headers });
    res.end(JSON.stringify(body));
  };

  async function transcription(record: RecordedRequest, res: ServerResponse): Promise<void> {
    const audio = record.file?.audio;
    if (!audio) {
      sendJson(res, 400, { error: { message: "file is not a WAV", type: "invalid_request_error" } });
      return;
    }
    const durationS = audio.samples / audio.sampleRate;
    const durationMs = Math.round(durationS * 1000);
    const words = ["speech", "of", String(durationMs), "ms"];
    const text = ` ${words.join(" ")}.`;
    const requested = record.fields?.["language"]?.[0];
    const identify = () =>
      state.languageOf
        ? state.languageOf({ utterance: utteranceOf(pcmOf(record.file!.bytes)), durationMs })
        : state.detectedLanguage;
    const language = requested ? LANGUAGE_NAMES.of(requested)!.toLowerCase() : identify();
    if (record.fields?.["response_format"]?.[0] !== "verbose_json") {
      sendJson(res, 200, { text });
      return;
    }
    sendJson(res, 200, {
      task: "transcribe",
      ...(language === undefined ? {} : { language }),
      duration: durationS,
      text,
      segments: [{ id: 0, seek: 0, start: 0, end: durationS, text, tokens: [], temperature: 0 }],
      ...(state.transcriptionWords
        ? {
            words: words.map((word, i) => ({
              word: ` ${word}`,
              start: (durationS * i) / words.length,
              end: (durationS * (i + 1)) / words.length,
            })),
          }
        : {}),
    });
  }

  async function chat(record: RecordedRequest, res: ServerResponse): Promise<void> {
    const body = record.json ?? {};
    const messages = (body["messages"] ?? []) as { role: string; content: string }[];
    const user = [...messages].reverse().find((m) => m.role === "user")?.content ?? "";
    const answer = state.reply(user, body);
    const base = { id: "chatcmpl-test", created: 1_700_000_000, model: String(body["model"]) };
    if (body["stream"] !== true) {
      sendJson(res, 200, {
        ...base,
        object: "chat.completion",
        choices: [
          {
            index: 0,
            message: { role: "assistant", content: answer },
            finish_reason: "stop",
            logprobs: null,
          },
        ],
        usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
      });
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    const send = (delta: Record<string, unknown>, finish: string | null): void => {
      const chunk = {
        ...base,
        object: "chat.completion.chunk",
        choices: [{ index: 0, delta, finish_reason: finish }],
      };
      res.write(`data: ${JSON.stringify(chunk)}\n\n`);
    };
    send({ role: "assistant", content: "" }, null);
    const pieces = answer.match(/\S+\s*|\s+/gu) ?? [];
    for (const [index, piece] of pieces.entries()) {
      if (state.stallAfterChunks !== undefined && index === state.stallAfterChunks) {
        if (!(await wait(state.stallMs, res))) return;
      }
      if (!(await wait(state.chunkDelayMs, res))) return;
      send({ content: piece }, null);
    }
    send({}, "stop");
    res.end("data: [DONE]\n\n");
  }

  async function speech(record: RecordedRequest, res: ServerResponse): Promise<void> {
    const body = record.json ?? {};
    const input = typeof body["input"] === "string" ? body["input"] : "";
    if (input === "") {
      sendJson(res, 400, { error: { message: "input is required" } });
      return;
    }
    const ms = input.length * SPEECH_MS_PER_CHAR;
    if (body["response_format"] === "pcm") {
      const pcm = tone(24_000, ms);
      res.writeHead(200, { "content-type": "audio/pcm" });
      res.end(Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength));
      return;
    }
    const wav = new WaveFile();
    wav.fromScratch(1, state.wavSampleRate, "16", tone(state.wavSampleRate, ms));
    const bytes = Buffer.from(wav.toBuffer());
    if (state.streamingWavHeader) {
      bytes.writeUInt32LE(0xffffffff, 4);
      bytes.writeUInt32LE(0xffffffff, bytes.indexOf("data", 12, "ascii") + 4);
    }
    res.writeHead(200, { "content-type": "audio/wav" });
    res.end(bytes);
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? "/").split("?")[0]!;
    const endpoint = ROUTES[path];
    const record: RecordedRequest = {
      endpoint,
      method: req.method ?? "GET",
      path,
      headers: req.headers,
      aborted: false,
    };
    if (endpoint === "transcriptions") {
      Object.assign(record, await parseMultipart(req));
    } else {
      const raw = await readBody(req);
      if (raw.length > 0)
        Object.assign(record, { json: JSON.parse(raw.toString("utf8")) as Record<string, unknown> });
    }
    requests.push(record);
    res.once("close", () => {
      if (!res.writableFinished) record.aborted = true;
    });
    if (!endpoint || req.method !== "POST") {
      sendJson(res, 404, { error: { message: `no route ${req.method} ${path}` } });
      return;
    }
    inFlight[endpoint]++;
    maxInFlight[endpoint] = Math.max(maxInFlight[endpoint], inFlight[endpoint]);
    res.once("close", () => inFlight[endpoint]--);

    const fault = scripts.get(endpoint)?.shift();
    if (!(await wait((fault?.delayMs ?? 0) + state.delayMs, res))) return;
    if (fault?.status) {
      const message = fault.message ?? `scripted failure ${fault.status}`;
      const body =
        fault.shape === "fastapi" ? { detail: message } : { error: { message, type: "test_error" } };
      sendJson(res, fault.status, body, { ...fault.headers });
      return;
    }
    if (fault?.stallBodyMs) {
      res.writeHead(200, { "content-type": "application/json" });
      res.write("{");
      if (!(await wait(fault.stallBodyMs, res))) return;
      res.end("}");
      return;
    }
    if (endpoint === "transcriptions") await transcription(record, res);
    else if (endpoint === "chat") await chat(record, res);
    else await speech(record, res);
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) sendJson(res, 500, { error: { message: String(error) } });
      else res.destroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };

  return Object.assign(state, {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    async close() {
      clearDelays();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  });
}
