/**
 * Speech recognition on a remote server speaking OpenAI's `POST /v1/audio/transcriptions` (OpenAI,
 * faster-whisper / whisper.cpp servers, vLLM, …).
 *
 * Whisper-style servers transcribe whole files, not streams, so a stream buffers its utterance and
 * sends it as a 16 kHz mono PCM16 WAV:
 * - `partial()` never waits for the network (the pipeline awaits it between audio batches). When at
 *   least `partialIntervalMs` of new audio has arrived and no request of this stream is in flight,
 *   it starts one for the audio so far; it always returns the latest hypothesis it has.
 * - `finish()` transcribes the whole utterance (reusing an in-flight partial request when that one
 *   already covers all the audio, otherwise cancelling it first), so a stream never has two requests
 *   in flight.
 * - Identification among `candidates` (the transcription API cannot be told a list): one candidate
 *   is sent as the `language`; with several the server identifies freely, and an answer in another
 *   language is transcribed again in the first candidate, so the text is in the language reported.
 */
import type { TranscriptionVerbose } from "openai/resources/audio/transcriptions";
import { toFile } from "openai";
import { encodeWav } from "../../audio/wav.js";
import type {
  AsrCapabilities,
  AsrEngine,
  AsrStream,
  AsrStreamOptions,
  EngineInfo,
  Hypothesis,
  LanguageCode,
  WordTiming,
} from "../../core/contracts.js";
import { RemoteClient, type RemoteEngineOptions } from "./client.js";
import type { CircuitStatus } from "../kit/remote/guard.js";
import { configuredLanguages, languageCodeOf } from "./languages.js";

export interface OpenAiAsrOptions extends RemoteEngineOptions {
  /** Languages the server's model recognizes (and the sessions may ask for). */
  readonly languages: readonly LanguageCode[];
  /** Least new audio between two interim transcriptions of one utterance. Default 1000. */
  readonly partialIntervalMs?: number;
}

const SAMPLE_RATE = 16_000;
const SAMPLES_PER_MS = SAMPLE_RATE / 1000;
/** OpenAI rejects shorter audio ("minimum audio length is 0.1 seconds"); such an utterance is silence. */
const MIN_SAMPLES = SAMPLE_RATE / 10;
const DEFAULT_PARTIAL_INTERVAL_MS = 1_000;

function seconds(value: unknown): number | undefined {
  return typeof value === "number" && Number.isFinite(value)
    ? Math.max(0, Math.round(value * 1000))
    : undefined;
}

/** Words spread over a time span in proportion to their length (for servers with segment times only). */
function spread(text: string, startMs: number, endMs: number): WordTiming[] {
  const words = text.split(/\s+/u).filter(Boolean);
  const total = words.reduce((sum, word) => sum + word.length, 0);
  const span = Math.max(0, endMs - startMs);
  const timings: WordTiming[] = [];
  let chars = 0;
  for (const word of words) {
    const from = startMs + Math.round((span * chars) / total);
    chars += word.length;
    timings.push({ word, startMs: from, endMs: startMs + Math.round((span * chars) / total) });
  }
  return timings;
}

/**
 * Word timings from a verbose_json answer: its `words` when it has them; otherwise words spread over
 * its `segments` (servers that ignore the word granularity); otherwise none.
 */
function wordTimings(response: Partial<TranscriptionVerbose>): WordTiming[] {
  const timings: WordTiming[] = [];
  if (Array.isArray(response.words) && response.words.length > 0) {
    for (const entry of response.words) {
      const word = typeof entry?.word === "string" ? entry.word.trim() : "";
      const startMs = seconds(entry?.start);
      const endMs = seconds(entry?.end);
      if (word === "" || startMs === undefined || endMs === undefined) continue;
      timings.push({ word, startMs, endMs: Math.max(startMs, endMs) });
    }
    return timings;
  }
  if (Array.isArray(response.segments)) {
    for (const segment of response.segments) {
      const startMs = seconds(segment?.start);
      const endMs = seconds(segment?.end);
      if (typeof segment?.text !== "string" || startMs === undefined || endMs === undefined) continue;
      timings.push(...spread(segment.text, startMs, endMs));
    }
  }
  return timings;
}

/** The hypothesis a transcription answer carries. `requested` is the stream's language option. */
export function toHypothesis(response: unknown, requested: LanguageCode | "auto"): Hypothesis {
  if (
    typeof response !== "object" ||
    response === null ||
    typeof (response as { text?: unknown }).text !== "string"
  ) {
    throw new Error("the transcription has no text");
  }
  const verbose = response as Partial<TranscriptionVerbose>;
  const text = (verbose.text ?? "").replace(/\s+/gu, " ").trim();
  const language = languageCodeOf(verbose.language) ?? (requested === "auto" ? undefined : requested);
  const words = text === "" ? [] : wordTimings(verbose);
  return language === undefined ? { text, words } : { text, words, language };
}

const EMPTY: Hypothesis = { text: "", words: [] };

type State = "open" | "finished" | "aborted";

interface PendingRequest {
  /** Samples of the utterance the request covers. */
  readonly samples: number;
  readonly controller: AbortController;
  /** Undefined when the request failed or was cancelled. */
  readonly result: Promise<Hypothesis | undefined>;
}

class OpenAiAsrStream implements AsrStream {
  private state: State = "open";
  private chunks: Int16Array[] = [];
  private samples = 0;
  /** Audio covered by the latest interim request (started, not necessarily answered). */
  private requestedSamples = 0;
  private pending: PendingRequest | undefined;
  private last: Hypothesis;
  private readonly controller = new AbortController();
  /** The `language` sent: the stream's language, or its only candidate. */
  private readonly language: LanguageCode | "auto";
  /** Identification must land among these (with "auto" and several candidates). */
  private readonly candidates: readonly LanguageCode[] | undefined;

  constructor(
    private readonly remote: RemoteClient,
    private readonly options: AsrStreamOptions,
    private readonly intervalSamples: number,
  ) {
    const { language, candidates } = options;
    const single = language === "auto" && candidates?.length === 1 ? candidates[0] : undefined;
    this.language = single ?? language;
    this.candidates = this.language === "auto" && candidates?.length ? candidates : undefined;
    this.last = this.language === "auto" ? EMPTY : { ...EMPTY, language: this.language };
  }

  async write(pcm: Int16Array): Promise<void> {
    this.assertOpen("write");
    if (pcm.length === 0) return;
    this.chunks.push(pcm.slice());
    this.samples += pcm.length;
  }

  async partial(): Promise<Hypothesis> {
    this.assertOpen("partial");
    const fresh = this.samples - this.requestedSamples;
    if (!this.pending && fresh > 0 && fresh >= this.intervalSamples) this.startInterim();
    return this.last;
  }

  async finish(): Promise<Hypothesis> {
    this.assertOpen("finish");
    this.state = "finished";
    const pending = this.pending;
    if (pending) {
      if (pending.samples === this.samples) {
        const result = await pending.result;
        if (result) return this.done(result);
      } else {
        pending.controller.abort();
        await pending.result;
      }
    }
    if (this.samples < MIN_SAMPLES) return this.done(this.last);
    try {
      return await this.transcribe(this.samples, this.controller.signal);
    } finally {
      this.chunks = [];
    }
  }

  abort(): void {
    if (this.state === "aborted") return;
    this.state = "aborted";
    this.controller.abort();
    this.chunks = [];
  }

  private done(hypothesis: Hypothesis): Hypothesis {
    this.chunks = [];
    return hypothesis;
  }

  private assertOpen(call: string): void {
    if (this.state !== "open")
      throw new Error(`remote ASR stream: ${call}() after the utterance was ${this.state}`);
  }

  private startInterim(): void {
    const samples = this.samples;
    this.requestedSamples = samples;
    const controller = new AbortController();
    const signal = AbortSignal.any([controller.signal, this.controller.signal]);
    const entry: PendingRequest = {
      samples,
      controller,
      // An interim failure is not the session's failure: finish() reports a server that keeps failing.
      result: this.transcribe(samples, signal).then(
        (hypothesis) => {
          if (this.state === "open") this.last = hypothesis;
          return hypothesis;
        },
        () => undefined,
      ),
    };
    this.pending = entry;
    void entry.result.then(() => {
      if (this.pending === entry) this.pending = undefined;
    });
  }

  /** Transcribes the first `samples` samples of the utterance. */
  private async transcribe(samples: number, signal: AbortSignal): Promise<Hypothesis> {
    const wav = this.wavOf(samples);
    const hypothesis = await this.request(wav, this.language, signal);
    const { candidates } = this;
    if (!candidates || hypothesis.language === undefined || candidates.includes(hypothesis.language))
      return hypothesis;
    return this.request(wav, candidates[0]!, signal);
  }

  /** The first `samples` samples of the utterance as a WAV file. */
  private wavOf(samples: number): Uint8Array {
    const pcm = new Int16Array(samples);
    let offset = 0;
    for (const chunk of this.chunks) {
      if (offset >= samples) break;
      const take = Math.min(chunk.length, samples - offset);
      pcm.set(take === chunk.length ? chunk : chunk.subarray(0, take), offset);
      offset += take;
    }
    return encodeWav(pcm, SAMPLE_RATE);
  }

  private async request(
    wav: Uint8Array,
    language: LanguageCode | "auto",
    signal: AbortSignal,
  ): Promise<Hypothesis> {
    const { context } = this.options;
    return this.remote.call(async (client, attemptSignal) => {
      const response = await client.audio.transcriptions.create(
        {
          file: await toFile(wav, "utterance.wav", { type: "audio/wav" }),
          model: this.remote.model,
          response_format: "verbose_json",
          timestamp_granularities: ["word", "segment"],
          ...(language === "auto" ? {} : { language }),
          ...(context && context.trim() !== "" ? { prompt: context } : {}),
        },
        { signal: attemptSignal },
      );
      // Inside the call, so an unusable answer counts as a failure of the server.
      return toHypothesis(response, language);
    }, signal);
  }
}

class OpenAiAsrEngine implements AsrEngine {
  get circuit(): CircuitStatus {
    return this.remote.circuit;
  }

  readonly info: EngineInfo;
  readonly capabilities: AsrCapabilities;
  private closed = false;

  constructor(
    private readonly remote: RemoteClient,
    languages: readonly LanguageCode[],
    private readonly intervalSamples: number,
  ) {
    this.info = { id: "openai-asr", version: remote.version };
    this.capabilities = {
      languages: Object.freeze([...languages]),
      sampleRate: SAMPLE_RATE,
      partialResults: true,
      wordTimings: true,
      punctuation: true,
      // Configured for one language (an English-only model), it cannot tell languages apart: the
      // registry must not pick it to identify them ahead of a multilingual engine behind it.
      languageDetection: languages.length > 1,
    };
  }

  /** Opens no connection: requests are made per utterance. `context` becomes the Whisper prompt. */
  async createStream(options: AsrStreamOptions): Promise<AsrStream> {
    if (this.closed) throw new Error("remote ASR engine is closed");
    const asked = options.language === "auto" ? (options.candidates ?? []) : [options.language];
    const unknown = asked.find((language) => !this.capabilities.languages.includes(language));
    if (unknown !== undefined) {
      throw new Error(
        `remote ASR: language "${unknown}" is not configured (configured: ${this.capabilities.languages.join(", ")})`,
      );
    }
    return new OpenAiAsrStream(this.remote, options, this.intervalSamples);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // Cancels requests in flight; streams still open fail their next call.
    this.remote.close();
  }
}

export function createOpenAiAsrEngine(options: OpenAiAsrOptions): AsrEngine {
  const remote = new RemoteClient("ASR", options);
  const languages = configuredLanguages("ASR", options.languages);
  const intervalMs = options.partialIntervalMs ?? DEFAULT_PARTIAL_INTERVAL_MS;
  if (!Number.isFinite(intervalMs) || intervalMs < 0) {
    throw new Error(`remote ASR: partialIntervalMs must be ≥ 0, got ${intervalMs}`);
  }
  return new OpenAiAsrEngine(remote, languages, Math.round(intervalMs * SAMPLES_PER_MS));
}
