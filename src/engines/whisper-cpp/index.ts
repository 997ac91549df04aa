/**
 * Speech recognition with whisper.cpp, in-process through the `@fugood/whisper.node` addon (its CPU
 * build; see binding.ts for why the project installs the platform package itself).
 *
 * The engine loads `maxConcurrent` native contexts up front, each a full copy of the model — the addon
 * cannot share one model between decoding states — and every decode borrows one. whisper.cpp is not a
 * streaming recogniser: a stream keeps its utterance and decodes it whole, for partial results at a
 * bounded rate in the background and once more at the end. Decodes beyond the contexts queue, finals
 * first. Each decode uses `threads` CPU threads and occupies one libuv thread-pool thread throughout.
 *
 * Loading a model blocks the event loop (the addon loads synchronously), which is why all contexts
 * are created here, before the engine serves anything, rather than on demand.
 */
import { availableParallelism } from "node:os";
import path from "node:path";
import type {
  AsrCapabilities,
  AsrEngine,
  AsrStream,
  AsrStreamOptions,
  EngineInfo,
  Hypothesis,
} from "../types.js";
import {
  loadWhisperBinding,
  nativeLog,
  type NativeTranscribeOptions,
  type NativeTranscribeResult,
  type NativeWhisperContext,
  type NativeWhisperModule,
} from "./binding.js";
import {
  isMultilingual,
  modelLanguages,
  modelSize,
  inspectModelFile,
  toIsoLanguage,
  toWhisperLanguage,
} from "./model.js";
import {
  DecodeScheduler,
  type DecodeKind,
  type DecodeStats,
  type RunningDecode,
  type ScheduledDecode,
} from "./scheduler.js";
import { WhisperCppStream, type StreamHost } from "./stream.js";
import { dropAnnotations, wordTimings } from "./words.js";

export type { DecodeStats } from "./scheduler.js";

const SAMPLE_RATE = 16_000;
const DEFAULT_PARTIAL_INTERVAL_MS = 1000;
/** A decode this long is treated as stuck (a tiny model decodes a 30 s window in well under this on a CPU). */
const DEFAULT_DECODE_TIMEOUT_MS = 120_000;
/** libuv's default thread-pool size (fs, dns, zlib and the addon's decodes share it). */
const DEFAULT_UV_THREADPOOL_SIZE = 4;

export interface WhisperCppOptions {
  /** A whisper.cpp ggml model (`ggml-*.bin`); `*.en` models are English-only. */
  readonly modelPath: string;
  /**
   * CPU threads per decode. Default: the number of CPUs, at most 4. (The prebuilt 1.1.3 addon decoded
   * no faster with 2 threads than with 1 on a 2-core machine; a native build scales.)
   */
  readonly threads?: number;
  /**
   * Decodes running at once, each on its own loaded copy of the model (memory grows accordingly).
   * Must stay below the libuv thread-pool size (`UV_THREADPOOL_SIZE`, default 4), since a decode holds
   * a pool thread. Default: CPUs ÷ threads (1 on a 2-core machine), at least 1.
   */
  readonly maxConcurrent?: number;
  /** Audio (ms) that must arrive between two partial decodes of one stream. Default 1000. */
  readonly partialIntervalMs?: number;
  /**
   * A decode running longer than this fails its utterance with an error instead of holding the
   * session, and its model copy is set aside until the native call returns. Default 120 000; raise
   * it for large models on slow CPUs.
   */
  readonly decodeTimeoutMs?: number;
  /**
   * whisper's temperature fallback on final decodes: a decode whose output looks failed (repetitive or
   * improbable) is redone at rising temperatures, which can take several times as long. Default true;
   * false bounds a final decode's time (whisper.cpp's `--no-fallback`). Partial decodes never fall back.
   */
  readonly temperatureFallback?: boolean;
  /** Restricts the languages offered to these (ISO 639-1); each must be one the model knows. */
  readonly languages?: readonly string[];
}

export interface WhisperCppModelInfo {
  readonly file: string;
  /** "tiny", "base", "small", "medium", "large". */
  readonly size: string;
  readonly multilingual: boolean;
  /** Weight tensors in the file (0 in whisper.cpp's test fixtures, which then run on zero weights). */
  readonly tensors: number;
  /** whisper.cpp's warnings while loading (e.g. a model file without weights, as in its test fixtures). */
  readonly warnings: readonly string[];
}

/**
 * Must be closed: while an engine is open, the addon's log callback keeps the event loop alive.
 * Streams opened with "auto" report the language whisper heard, which may lie outside a `languages`
 * restriction (whisper.cpp cannot limit its detection to a subset).
 */
export interface WhisperCppEngine extends AsrEngine {
  readonly model: WhisperCppModelInfo;
  /** Context use and decode counts, for metrics and tests. */
  stats(): DecodeStats;
  /** Resolves when no decode is running or queued (background partial decodes included). */
  idle(): Promise<void>;
}

function positiveInteger(value: number, name: string): number {
  if (!Number.isInteger(value) || value < 1) {
    throw new Error(`whisper.cpp: ${name} must be a positive integer, got ${value}`);
  }
  return value;
}

function threadPoolSize(): number {
  const configured = Number.parseInt(process.env.UV_THREADPOOL_SIZE ?? "", 10);
  return Number.isInteger(configured) && configured > 0 ? configured : DEFAULT_UV_THREADPOOL_SIZE;
}

/** Lets log lines the addon queued from native code reach their JavaScript listener. */
async function flushNativeLog(): Promise<void> {
  for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
}

/** `whisper_model_load: invalid model data (bad magic)` → `invalid model data (bad magic)`. */
function stripFunctionName(line: string): string {
  return line.replace(/^[a-z_0-9]+:\s*/u, "");
}

function restrictLanguages(
  known: readonly string[],
  wanted: readonly string[] | undefined,
  file: string,
): string[] {
  if (wanted === undefined) return [...known];
  const unknown = wanted.filter((language) => !known.includes(language));
  if (unknown.length > 0) {
    throw new Error(
      `whisper.cpp: ${path.basename(file)} does not know language(s) ${unknown.join(", ")}` +
        (known.length === 1 ? " (it is an English-only model)" : ""),
    );
  }
  if (wanted.length === 0) throw new Error("whisper.cpp: the languages option lists no language");
  return known.filter((language) => wanted.includes(language));
}

/** Turns the addon's result into a hypothesis whose timings are relative to the stream's first sample. */
function toHypothesis(result: NativeTranscribeResult, samples: number, detect: boolean): Hypothesis {
  const durationMs = (samples * 1000) / SAMPLE_RATE;
  const words = dropAnnotations(wordTimings(result.result, result.segments, durationMs));
  const hypothesis: Hypothesis = { text: words.map((w) => w.word).join(" "), words };
  return detect && result.language ? { ...hypothesis, language: toIsoLanguage(result.language) } : hypothesis;
}

interface StreamSettings {
  /** whisper.cpp language code, or "auto". */
  readonly language: string;
  readonly prompt: string | undefined;
}

class WhisperCppAsrEngine implements WhisperCppEngine, StreamHost {
  private readonly streams = new Map<WhisperCppStream, StreamSettings>();
  private closed = false;
  private closing: Promise<void> | undefined;

  constructor(
    readonly info: EngineInfo,
    readonly capabilities: AsrCapabilities,
    readonly model: WhisperCppModelInfo,
    private readonly scheduler: DecodeScheduler<NativeWhisperContext>,
    private readonly threads: number,
    private readonly partialIntervalSamples: number,
    private readonly temperatureFallback: boolean,
    private readonly unsubscribeLog: () => void,
  ) {}

  stats(): DecodeStats {
    return this.scheduler.stats();
  }

  idle(): Promise<void> {
    return this.scheduler.whenIdle();
  }

  /** `options.context` becomes whisper's initial prompt (names and jargon steer its spelling). */
  async createStream(options: AsrStreamOptions): Promise<AsrStream> {
    if (this.closed) throw new Error("whisper.cpp engine is closed");
    if (options.language === "auto") {
      if (!this.capabilities.languageDetection) {
        throw new Error(`whisper.cpp: ${this.model.file} is English-only and cannot identify languages`);
      }
    } else if (!this.capabilities.languages.includes(options.language)) {
      throw new Error(`whisper.cpp: language "${options.language}" is not supported by ${this.model.file}`);
    }
    const stream = new WhisperCppStream(this, this.partialIntervalSamples);
    const prompt = options.context?.trim();
    this.streams.set(stream, {
      language: options.language === "auto" ? "auto" : toWhisperLanguage(options.language),
      prompt: prompt ? prompt : undefined,
    });
    return stream;
  }

  decode(
    stream: WhisperCppStream,
    kind: DecodeKind,
    snapshot: () => Int16Array,
  ): ScheduledDecode<Hypothesis> {
    const settings = this.streams.get(stream);
    if (settings === undefined) {
      return { result: Promise.reject(new Error("whisper.cpp stream is closed")), cancel: () => undefined };
    }
    return this.scheduler.schedule(stream, kind, (context) => this.run(context, snapshot(), kind, settings));
  }

  cancelAll(stream: WhisperCppStream): void {
    this.scheduler.cancelAll(stream);
  }

  forget(stream: WhisperCppStream): void {
    this.streams.delete(stream);
  }

  private run(
    context: NativeWhisperContext,
    audio: Int16Array,
    kind: DecodeKind,
    settings: StreamSettings,
  ): RunningDecode<Hypothesis> {
    const options: NativeTranscribeOptions = {
      language: settings.language,
      maxThreads: this.threads,
      // One segment per token, each with whisper.cpp's token timestamps: word timings (words.ts).
      tokenTimestamps: true,
      maxLen: 1,
      // No temperature fallback for partial results, which are disposable: it can multiply the time.
      ...(kind === "partial" || !this.temperatureFallback ? { temperatureInc: 0 } : {}),
      ...(settings.prompt ? { prompt: settings.prompt } : {}),
    };
    const transcription = context.transcribeData(audio.buffer as ArrayBuffer, options);
    return {
      result: transcription.promise.then((result) =>
        toHypothesis(result, audio.length, settings.language === "auto"),
      ),
      // Never `transcription.stop()`: the addon (1.1.3) cannot interrupt whisper.cpp anyway, and a
      // cancelled job ends through AsyncWorker::OnError, which passes one argument to a completion
      // callback that settles the promise only when given two: the promise would stay pending for
      // ever and hold its context. A cancelled decode runs to its end and its result is ignored.
      cancel: () => undefined,
    };
  }

  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    this.closed = true;
    for (const stream of [...this.streams.keys()]) stream.abort();
    const contexts = await this.scheduler.close();
    await Promise.all(contexts.map((context) => context.release()));
    this.unsubscribeLog();
  }
}

/** Creates a native context, quoting whisper.cpp's own reason when it refuses the file. */
async function loadContext(
  module: NativeWhisperModule,
  file: string,
  errors: string[],
): Promise<NativeWhisperContext> {
  errors.length = 0;
  try {
    return new module.WhisperContext({ filePath: file, useGpu: false, useFlashAttn: false });
  } catch (error) {
    await flushNativeLog();
    const reasons = errors.map(stripFunctionName).filter((line) => !/^failed to load model$/u.test(line));
    const reason = reasons.length > 0 ? reasons.join("; ") : (error as Error).message;
    throw new Error(`whisper.cpp could not load the model ${file}: ${reason} (corrupt or incomplete file?)`, {
      cause: error,
    });
  }
}

export async function createWhisperCppEngine(options: WhisperCppOptions): Promise<WhisperCppEngine> {
  const cpus = availableParallelism();
  const threads = positiveInteger(options.threads ?? Math.min(4, cpus), "threads");
  const poolSize = threadPoolSize();
  const maxConcurrent = positiveInteger(
    options.maxConcurrent ?? Math.max(1, Math.min(Math.floor(cpus / threads), poolSize - 1)),
    "maxConcurrent",
  );
  if (maxConcurrent >= poolSize) {
    throw new Error(
      `whisper.cpp: maxConcurrent ${maxConcurrent} would occupy all ${poolSize} libuv thread-pool threads ` +
        `(file system and DNS work would stall during decodes); lower it or set UV_THREADPOOL_SIZE above it`,
    );
  }
  const decodeTimeoutMs = positiveInteger(
    options.decodeTimeoutMs ?? DEFAULT_DECODE_TIMEOUT_MS,
    "decodeTimeoutMs",
  );
  const partialIntervalMs = options.partialIntervalMs ?? DEFAULT_PARTIAL_INTERVAL_MS;
  if (!Number.isFinite(partialIntervalMs) || partialIntervalMs < 0) {
    throw new Error(`whisper.cpp: partialIntervalMs must be a non-negative number, got ${partialIntervalMs}`);
  }

  const file = path.resolve(options.modelPath);
  const { header, tensors } = await inspectModelFile(file);
  const multilingual = isMultilingual(header);
  const languages = restrictLanguages(modelLanguages(header), options.languages, file);
  const binding = loadWhisperBinding();

  // whisper.cpp's errors and warnings are collected while the model loads, to explain a failure and
  // to report warnings such as a model file without weights.
  let loading = true;
  const errors: string[] = [];
  const warnings: string[] = [];
  const unsubscribeLog = nativeLog(binding.module).subscribe((level, message) => {
    if (loading && level === "error") errors.push(message);
    if (loading && level === "warn") warnings.push(stripFunctionName(message));
  });
  const contexts: NativeWhisperContext[] = [];
  try {
    for (let i = 0; i < maxConcurrent; i++) contexts.push(await loadContext(binding.module, file, errors));
  } catch (error) {
    await Promise.all(contexts.map((context) => context.release()));
    unsubscribeLog();
    throw error;
  }
  await flushNativeLog();
  loading = false;

  const capabilities: AsrCapabilities = {
    languages,
    sampleRate: SAMPLE_RATE,
    partialResults: true,
    wordTimings: true,
    punctuation: true,
    languageDetection: multilingual,
  };
  const info: EngineInfo = { id: "whisper-cpp", version: `${binding.version}+${path.basename(file)}` };
  const model: WhisperCppModelInfo = {
    file: path.basename(file),
    size: modelSize(header),
    multilingual,
    tensors,
    warnings: [...new Set(warnings)],
  };
  return new WhisperCppAsrEngine(
    info,
    capabilities,
    model,
    new DecodeScheduler(contexts, { decodeTimeoutMs }),
    threads,
    Math.round((partialIntervalMs * SAMPLE_RATE) / 1000),
    options.temperatureFallback ?? true,
    unsubscribeLog,
  );
}
