/**
 * The native whisper.cpp addon, from one of two builds with the same JavaScript surface
 * (`WhisperContext`, as `@fugood/whisper.node` documents it):
 *
 * - "native": relay's own addon (native/whisper-cpp/addon.cc), compiled by `npm run setup` for the
 *   host CPU from the whisper.cpp sources in the npm package nodejs-whisper. It uses the CPU's SIMD
 *   (AVX2/FMA/F16C...) and adds what streaming needs: an encoder window fitted to the audio
 *   (`audioCtx`), a token bound, identification among candidate languages, and a `stop()` that works.
 * - "prebuilt": the CPU package of `@fugood/whisper.node` (`@fugood/node-whisper-<platform>-<arch>`),
 *   the fallback when the build is impossible. Built without SIMD, it is about 20x slower, and it
 *   ignores the options above.
 *
 * The project depends on the platform package directly (an optional dependency) rather than on the
 * `@fugood/whisper.node` wrapper: the wrapper's own optional dependencies pull CUDA and Vulkan builds
 * (about 240 MB) that npm cannot leave out selectively, and its JavaScript only picks the platform
 * package and re-exports it.
 */
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

/** The `@fugood/whisper.node` release the project is built and tested against. */
export const BINDING_VERSION = "1.1.3";

export interface NativeSegment {
  readonly text: string;
  /** Milliseconds from the start of the decoded audio. */
  readonly t0: number;
  readonly t1: number;
}

export interface NativeTranscribeResult {
  /** The whole transcript (segment texts concatenated byte-wise, so always valid UTF-8). */
  readonly result: string;
  /** whisper.cpp's code of the language decoded (detected with `language: "auto"`); absent for no audio. */
  readonly language?: string;
  readonly segments: readonly NativeSegment[];
  /** The decode was interrupted by `stop()` (native build). */
  readonly isAborted: boolean;
}

/** The options `WhisperContext.transcribeData` reads (a subset of whisper.cpp's `whisper_full_params`). */
export interface NativeTranscribeOptions {
  /** A whisper.cpp language code or "auto"; when absent whisper.cpp decodes as English. */
  readonly language: string;
  readonly maxThreads: number;
  /** Token-level timestamps (whisper.cpp's heuristic ones, not DTW). */
  readonly tokenTimestamps?: boolean;
  /** Splits segments at this many characters; 1 makes every token its own timed segment. */
  readonly maxLen?: number;
  /** Temperature step of the fallback on a failed decode; 0 disables the fallback. */
  readonly temperatureInc?: number;
  /** whisper.cpp's initial prompt (names, jargon, style). */
  readonly prompt?: string;
  /** Native build: encoder frames (20 ms each, at most 1500); 0 or absent: whisper's 30 s window. */
  readonly audioCtx?: number;
  /** Native build: most tokens of each decoding pass (a pass then ends); 0 or absent: no bound. */
  readonly maxTokens?: number;
  /** Native build, with language "auto": identify among these whisper.cpp codes only. */
  readonly candidates?: readonly string[];
}

export interface NativeTranscription {
  /**
   * Do not call (addon 1.1.3). It marks the job cancelled without interrupting whisper.cpp (the addon
   * sets no abort callback); the cancelled job then ends through `AsyncWorker::OnError`, whose
   * one-argument callback the addon ignores, so `promise` never settles. Any error inside the decode
   * ("Transcription failed") ends the same way.
   */
  stop(): Promise<void>;
  readonly promise: Promise<NativeTranscribeResult>;
}

export interface NativeWhisperContext {
  /**
   * `audio` holds mono PCM16 at 16 kHz and nothing else (the whole buffer is read); the addon copies it
   * to floats before returning, then decodes on a libuv thread-pool thread.
   */
  transcribeData(audio: ArrayBuffer, options: NativeTranscribeOptions): NativeTranscription;
  /** Frees the model once no decode uses it any more. */
  release(): Promise<void>;
}

export interface NativeWhisperModule {
  readonly WhisperContext: {
    /** Loads the model synchronously, on the calling (JavaScript) thread. */
    new (options: { filePath: string; useGpu?: boolean; useFlashAttn?: boolean }): NativeWhisperContext;
    /**
     * Process-wide. Enabled with a callback, whisper.cpp's log lines go to it (through a thread-safe
     * function that keeps the event loop alive until logging is disabled again); otherwise whisper.cpp
     * writes them to stderr.
     */
    toggleNativeLog(enable: boolean, callback?: (level: string, text: string) => void): void;
  };
}

export type BindingKind = "native" | "prebuilt";

export interface WhisperBinding {
  readonly module: NativeWhisperModule;
  readonly kind: BindingKind;
  /** The native build's file, or the prebuilt package's name. */
  readonly source: string;
  /** whisper.cpp's version (native build) or the platform package's (prebuilt). */
  readonly version: string;
  /** The CPU features the native build uses (whisper.cpp's system info line). */
  readonly systemInfo?: string;
}

/** Where `npm run setup` (scripts/build-whisper.sh) puts the addon built for this CPU. */
export const NATIVE_BUILD_PATH = fileURLToPath(
  new URL("../../../native/whisper-cpp/build/relay_whisper.node", import.meta.url),
);

export function platformPackageName(
  platform: string = process.platform,
  arch: string = process.arch,
): string {
  return `@fugood/node-whisper-${platform}-${arch}`;
}

/** How to get a binding, for error messages. */
export function installHint(packageName: string): string {
  return (
    `run \`npm run setup\` to build whisper.cpp for this CPU, or install the prebuilt fallback with ` +
    `\`npm install --save-optional ${packageName}@${BINDING_VERSION}\` (the CPU build of ` +
    `@fugood/whisper.node ${BINDING_VERSION}; this project's \`npm install\` installs it on linux-x64)`
  );
}

function isModuleNotFound(error: unknown, packageName: string): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === "MODULE_NOT_FOUND" && error instanceof Error && error.message.includes(packageName);
}

function reasonOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Loads a binding with `require` (an ES `import()` cannot load a `.node` file); Node caches it, so
 * this is cheap after the first call. "auto" takes the native build when setup made one and it loads,
 * else the prebuilt package. Throws an error that says how to get a missing binding.
 */
export function loadWhisperBinding(
  preference: BindingKind | "auto" = "auto",
  packageName: string = platformPackageName(),
  nativePath: string = NATIVE_BUILD_PATH,
): WhisperBinding {
  const require = createRequire(import.meta.url);
  let nativeFailure: string | undefined;
  if (preference !== "prebuilt") {
    if (existsSync(nativePath)) {
      try {
        const module = require(nativePath) as NativeWhisperModule & { version: string; systemInfo: string };
        return {
          module,
          kind: "native",
          source: nativePath,
          version: module.version,
          systemInfo: module.systemInfo,
        };
      } catch (error) {
        nativeFailure = `the native build ${nativePath} does not load (${reasonOf(error)}; rebuild it with \`npm run setup\`)`;
      }
    } else {
      nativeFailure = `no native build at ${nativePath} (\`npm run setup\` makes one)`;
    }
    if (preference === "native") throw new Error(`whisper.cpp binding missing: ${nativeFailure}`);
  }
  let module: NativeWhisperModule;
  let version: string;
  try {
    version = (require(`${packageName}/package.json`) as { version: string }).version;
    module = require(packageName) as NativeWhisperModule;
  } catch (error) {
    const native = nativeFailure ? `${nativeFailure}, and ` : "";
    if (isModuleNotFound(error, packageName)) {
      throw new Error(
        `whisper.cpp binding missing: ${native}the npm package ${packageName} is not installed; ${installHint(packageName)}`,
        { cause: error },
      );
    }
    throw new Error(`whisper.cpp binding ${packageName} could not be loaded: ${native}${reasonOf(error)}`, {
      cause: error,
    });
  }
  if (typeof module.WhisperContext !== "function") {
    throw new Error(`whisper.cpp binding ${packageName} ${version} does not export WhisperContext`);
  }
  return { module, kind: "prebuilt", source: packageName, version };
}

/** Whether the build for this CPU is there and loads (the default engine order depends on it). */
export function nativeBuildLoads(nativePath: string = NATIVE_BUILD_PATH): boolean {
  try {
    loadWhisperBinding("native", platformPackageName(), nativePath);
    return true;
  } catch {
    return false;
  }
}

export type NativeLogLevel = "error" | "warn" | "info" | "debug";
export type NativeLogListener = (level: NativeLogLevel, message: string) => void;

/**
 * Routes whisper.cpp's process-wide log to listeners while at least one engine is open, so that the
 * native library does not write to stderr behind the service's logger, and so that load failures can
 * quote whisper.cpp's reason. Logging is switched off again when the last engine closes (the addon's
 * callback keeps the event loop alive while it is on).
 */
export class NativeLog {
  private readonly listeners = new Set<NativeLogListener>();

  constructor(private readonly module: NativeWhisperModule) {}

  subscribe(listener: NativeLogListener): () => void {
    if (this.listeners.size === 0) {
      this.module.WhisperContext.toggleNativeLog(true, (level, text) => this.dispatch(level, text));
    }
    this.listeners.add(listener);
    return () => {
      if (!this.listeners.delete(listener) || this.listeners.size > 0) return;
      this.module.WhisperContext.toggleNativeLog(false);
    };
  }

  private dispatch(level: string, text: string): void {
    const message = text.trim();
    if (message === "") return;
    const normalized: NativeLogLevel =
      level === "error" || level === "warn" || level === "info" ? level : "debug";
    for (const listener of this.listeners) listener(normalized, message);
  }
}

const logs = new WeakMap<NativeWhisperModule, NativeLog>();

/** One log router per loaded addon (the addon's log state is process-wide). */
export function nativeLog(module: NativeWhisperModule): NativeLog {
  let log = logs.get(module);
  if (!log) {
    log = new NativeLog(module);
    logs.set(module, log);
  }
  return log;
}
