/**
 * Speech recognition with whisper.cpp, in process: relay's addon built for this CPU by setup, or the
 * prebuilt `@fugood/whisper.node` CPU addon as the fallback (binding.ts).
 *
 * The engine loads `maxConcurrent` native contexts up front, each a full copy of the model — the addon
 * cannot share one model between decoding states — and every decode borrows one. whisper.cpp is not a
 * streaming recognizer: a stream decodes the audio it has not committed yet, for partial results at a
 * bounded rate in the background and once more at the end, and commits words two decodes agree on
 * (stream.ts, agreement.ts). Decodes beyond the contexts queue, finals first. Each decode uses
 * `threads` CPU threads and occupies one libuv thread-pool thread throughout.
 *
 * Loading a model blocks the event loop (the addon loads synchronously), which is why all contexts
 * are created here, before the engine serves anything, rather than on demand.
 */
import { glossaryFromContext, type Glossary } from "../../core/glossary.js";
import { availableParallelism } from "node:os";
import path from "node:path";
import type {
  AsrCapabilities,
  AsrEngine,
  AsrStream,
  AsrStreamOptions,
  EngineInfo,
} from "../../core/contracts.js";
import {
  loadWhisperBinding,
  nativeLog,
  type BindingKind,
  type NativeTranscribeOptions,
  type NativeTranscribeResult,
  type NativeWhisperContext,
  type NativeWhisperModule,
  type WhisperBinding,
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
  DecodeCancelledError,
  DecodeScheduler,
  type DecodeKind,
  type DecodeStats,
  type RunningDecode,
  type ScheduledDecode,
} from "./scheduler.js";
import { WhisperCppStream, type DecodeInput, type Decoded, type StreamHost } from "./stream.js";
import { dropAnnotations, wordTimings } from "./words.js";

export type { DecodeStats } from "./scheduler.js";

const SAMPLE_RATE = 16_000;
const DEFAULT_PARTIAL_INTERVAL_MS = 1000;
/** A decode this long is treated as stuck (a tiny model decodes a 30 s window in well under this on a CPU). */
const DEFAULT_DECODE_TIMEOUT_MS = 120_000;
/** libuv's default thread-pool size (fs, dns, zlib and the addon's decodes share it). */
const DEFAULT_UV_THREADPOOL_SIZE = 4;
/** One encoder frame covers 20 ms of audio; whisper's window is 1500 frames (30 s). */
const SAMPLES_PER_ENCODER_FRAME = 320;
const FULL_ENCODER_FRAMES = 1500;
/**
 * A fitted encoder window: the audio plus a margin, and never under 20 s. whisper was trained on
 * 30 s windows only, and with little silence after the speech it changes or repeats its last words
 * (ggml-org/whisper.cpp#1951: tiny.en at `-ac 500` garbles jfk.wav's end; peteonrails/voxtype#124:
 * phrases repeated 3x in windows fitted to 3–8 s). On real tiny.en and base weights
 * (scripts/bench-whisper-window.ts) audio + 1.3 s agreed 0.900 in words with the 30 s window and
 * audio + 10 s 0.978 (tiny.en); at least 20 s agreed 0.984 and 0.987 (base) for 2/3 of its time.
 */
const ENCODER_MARGIN_FRAMES = 64;
const ENCODER_MIN_FRAMES = 1000;
/**
 * Tokens a decoding pass may produce per second of audio (plus a constant): fast speech is about 4
 * words, 6–8 tokens, a second, so this only cuts short a pass that loops (whisper's known failure;
 * whisper.cpp then starts its next pass after the last timestamp).
 */
const MAX_TOKENS_PER_SECOND = 12;
const MAX_TOKENS_BASE = 16;
/** Whisper reads at most half its 448-token text context as prompt; more characters are wasted work. */
const MAX_PROMPT_CHARS = 1_000;
/** The session context's share of the prompt; the rest is the utterance's committed text. */
const MAX_CONTEXT_PROMPT_CHARS = 600;

/**
 * The session context as prompt: the free text when it fits its share, else the glossary's terms
 * (the names whisper should spell), so a long context does not push the names out of the prompt.
 */
function promptContext(context: string | undefined, glossary: Glossary | undefined): string | undefined {
  const text = context?.trim();
  if (!text) return undefined;
  if (text.length <= MAX_CONTEXT_PROMPT_CHARS) return text;
  const terms = (glossary ?? glossaryFromContext(text)).terms.map((term) => term.text).join(", ");
  return (terms || text).slice(0, MAX_CONTEXT_PROMPT_CHARS);
}

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
  /**
   * Which addon: "native" (built for this CPU by `npm run setup`), "prebuilt" (the no-SIMD fallback),
   * or "auto" (default): native when it was built and loads, else prebuilt; or one already loaded
   * (`loadWhisperBinding`, or an embedder's own build with the same interface).
   */
  readonly binding?: BindingKind | "auto" | WhisperBinding;
  /**
   * Native build: run the encoder over the audio's length plus a margin, at least 20 s, instead of
   * whisper's fixed 30 s window, which makes short decodes about a third faster. Default true.
   */
  readonly fitEncoderWindow?: boolean;
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

/** The addon in use, for start-up logs, /healthz and `GET /v1/languages`. */
export interface WhisperCppBindingInfo {
  readonly kind: BindingKind;
  readonly source: string;
  readonly systemInfo?: string;
}

/**
 * Must be closed: while an engine is open, the addon's log callback keeps the event loop alive.
 * Streams opened with "auto" identify among their `candidates` (else among the engine's languages).
 */
export interface WhisperCppEngine extends AsrEngine {
  readonly model: WhisperCppModelInfo;
  readonly binding: WhisperCppBindingInfo;
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

/** The addon's result as words timed from the start of the decoded audio. */
function toDecoded(result: NativeTranscribeResult, samples: number): Decoded {
  if (result.isAborted) throw new DecodeCancelledError();
  const durationMs = (samples * 1000) / SAMPLE_RATE;
  const words = dropAnnotations(wordTimings(result.result, result.segments, durationMs));
  return result.language ? { words, language: toIsoLanguage(result.language) } : { words };
}

interface StreamSettings {
  /** The session context, whisper's prompt ahead of the committed text. */
  readonly context: string | undefined;
  /** whisper.cpp codes identification chooses among ("auto" streams); empty: any. */
  readonly candidates: readonly string[];
}

class WhisperCppAsrEngine implements WhisperCppEngine, StreamHost {
  private readonly streams = new Map<WhisperCppStream, StreamSettings>();
  private closed = false;
  private closing: Promise<void> | undefined;

  constructor(
    readonly info: EngineInfo,
    readonly capabilities: AsrCapabilities,
    readonly model: WhisperCppModelInfo,
    readonly binding: WhisperCppBindingInfo,
    private readonly scheduler: DecodeScheduler<NativeWhisperContext>,
    private readonly threads: number,
    private readonly partialIntervalSamples: number,
    private readonly temperatureFallback: boolean,
    private readonly fitEncoderWindow: boolean,
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
    const candidates = options.language === "auto" ? (options.candidates ?? []) : [];
    const unknown = candidates.filter((language) => !this.capabilities.languages.includes(language));
    if (unknown.length > 0) {
      throw new Error(`whisper.cpp: ${this.model.file} cannot identify language(s) ${unknown.join(", ")}`);
    }
    const stream = new WhisperCppStream(this, this.partialIntervalSamples, options.language);
    this.streams.set(stream, {
      context: promptContext(options.context, options.glossary),
      candidates: candidates.map(toWhisperLanguage),
    });
    return stream;
  }

  decode(stream: WhisperCppStream, kind: DecodeKind, input: () => DecodeInput): ScheduledDecode<Decoded> {
    const settings = this.streams.get(stream);
    if (settings === undefined) {
      return { result: Promise.reject(new Error("whisper.cpp stream is closed")), cancel: () => undefined };
    }
    return this.scheduler.schedule(stream, kind, (context) => this.run(context, input(), kind, settings));
  }

  cancelAll(stream: WhisperCppStream): void {
    this.scheduler.cancelAll(stream);
  }

  forget(stream: WhisperCppStream): void {
    this.streams.delete(stream);
  }

  private run(
    context: NativeWhisperContext,
    input: DecodeInput,
    kind: DecodeKind,
    settings: StreamSettings,
  ): RunningDecode<Decoded> {
    const { audio } = input;
    const native = this.binding.kind === "native";
    const committed = input.promptText.slice(-(MAX_PROMPT_CHARS - (settings.context?.length ?? 0) - 1));
    const prompt = [settings.context, committed].filter(Boolean).join(" ");
    const options: NativeTranscribeOptions = {
      language: input.language === "auto" ? "auto" : toWhisperLanguage(input.language),
      maxThreads: this.threads,
      // One segment per token, each with whisper.cpp's token timestamps: word timings (words.ts).
      tokenTimestamps: true,
      maxLen: 1,
      // No temperature fallback for partial results, which are disposable: it can multiply the time.
      ...(kind === "partial" || !this.temperatureFallback ? { temperatureInc: 0 } : {}),
      ...(prompt ? { prompt } : {}),
      ...(native
        ? this.nativeOptions(audio.length, input.language === "auto" ? settings.candidates : [])
        : {}),
    };
    const transcription = context.transcribeData(audio.buffer as ArrayBuffer, options);
    let result = transcription.promise.then((answer) => toDecoded(answer, audio.length));
    // The prebuilt addon cannot restrict identification: a language outside the candidates is
    // decoded again in the first candidate (the session's first hint, or a two-way pair's source).
    const [first] = settings.candidates;
    if (!native && input.language === "auto" && first !== undefined) {
      result = result.then((decoded) =>
        decoded.language !== undefined && !settings.candidates.includes(toWhisperLanguage(decoded.language))
          ? context
              .transcribeData(audio.buffer as ArrayBuffer, { ...options, language: first })
              .promise.then((answer) => ({
                ...toDecoded(answer, audio.length),
                language: toIsoLanguage(first),
              }))
          : decoded,
      );
    }
    return {
      result,
      // The prebuilt addon (1.1.3) cannot interrupt whisper.cpp, and its cancelled job never settles
      // its promise (it would hold the context for ever): there a cancelled decode runs to its end and
      // its result is ignored.
      cancel: native ? () => void transcription.stop() : () => undefined,
    };
  }

  /** The native build's bounds for one decode of `samples`. */
  private nativeOptions(samples: number, candidates: readonly string[]): Partial<NativeTranscribeOptions> {
    const frames = Math.max(
      ENCODER_MIN_FRAMES,
      Math.ceil(samples / SAMPLES_PER_ENCODER_FRAME) + ENCODER_MARGIN_FRAMES,
    );
    return {
      ...(this.fitEncoderWindow ? { audioCtx: Math.min(FULL_ENCODER_FRAMES, frames) } : {}),
      maxTokens: Math.ceil((samples / SAMPLE_RATE) * MAX_TOKENS_PER_SECOND) + MAX_TOKENS_BASE,
      ...(candidates.length > 0 ? { candidates } : {}),
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

/** "built for this CPU (AVX2 FMA F16C)", or why it is slow. */
function bindingDetail(binding: WhisperBinding): string {
  if (binding.kind === "prebuilt") {
    return `prebuilt ${binding.source} without SIMD (about 20x slower; \`npm run setup\` builds whisper.cpp for this CPU)`;
  }
  const features = [...(binding.systemInfo ?? "").matchAll(/\b([A-Z0-9_]+) = 1\b/gu)]
    .map((match) => match[1]!)
    .filter((name) => /^(AVX|AVX2|AVX512|FMA|F16C|NEON|ARM_FMA|SVE)$/u.test(name));
  return `built for this CPU (${features.length > 0 ? features.join(" ") : "no SIMD found"})`;
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
  const binding: WhisperBinding =
    typeof options.binding === "object" ? options.binding : loadWhisperBinding(options.binding ?? "auto");

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
  const info: EngineInfo = {
    id: "whisper-cpp",
    version: `${binding.version}-${binding.kind}+${path.basename(file)}`,
    detail: bindingDetail(binding),
  };
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
    { kind: binding.kind, source: binding.source, systemInfo: binding.systemInfo },
    new DecodeScheduler(contexts, { decodeTimeoutMs }),
    threads,
    Math.round((partialIntervalMs * SAMPLE_RATE) / 1000),
    options.temperatureFallback ?? true,
    options.fitEncoderWindow ?? true,
    unsubscribeLog,
  );
}
