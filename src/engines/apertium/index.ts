/**
 * Machine translation with Apertium (rule-based, CPU-only, a few ms a sentence), kept warm: every
 * installed direction runs as long-lived null-flush pipelines, started on first use or by `warmUp()`
 * (the service calls it once it listens, so no user request pays the dictionaries' loading, while
 * processes that never translate — tools, tests, short-lived servers — start no programs).
 *
 * Licensing: Apertium is GPL. It is only ever run as separate programs through pipes — never linked,
 * loaded or bundled — so the service itself is not a derivative work.
 */

import { execFile } from "node:child_process";
import { accessSync, constants, existsSync } from "node:fs";
import path from "node:path";
import { findOnPath } from "../../os/programs.js";
import { promisify } from "node:util";
import type {
  EngineInfo,
  MtCapabilities,
  MtEngine,
  TranslateRequest,
  TranslationPair,
} from "../../core/contracts.js";
import { DEFAULT_MODES_DIRS, discoverModes, type DiscoveredMode } from "./modes.js";
import { ApertiumPipeline, type PipelineStatus } from "./pipeline.js";

export { discoverModes, nullFlushCommands, parseModeFileName, toIso639_1 } from "./modes.js";
export type { DiscoveredMode, Discovery } from "./modes.js";
export type { PipelineMember, PipelineStatus } from "./pipeline.js";

const execFileAsync = promisify(execFile);

export interface ApertiumOptions {
  /** Directory of `*.mode` files; defaults to the first of /usr/share and /usr/local/share that exists. */
  readonly modesDir?: string;
  /** Warm pipelines per direction (each is about ten processes); default 1. */
  readonly pipelinesPerPair?: number;
  /** A request unanswered this long fails and its pipeline restarts; default 5000 ms. */
  readonly requestTimeoutMs?: number;
  /** The bound for the first answer of a freshly started pipeline (loading dictionaries); default 30 000 ms. */
  readonly startupTimeoutMs?: number;
  /** Requests in one pipe at a time (assembly-line parallelism across its programs); default 4. */
  readonly maxInFlight?: number;
  /** Receives non-fatal problems (a direction that failed to start and was left out). */
  readonly onWarning?: (message: string) => void;
}

export interface ApertiumPairStatus extends PipelineStatus {
  readonly mode: string;
  readonly from: string;
  readonly to: string;
}

/** The `MtEngine` plus diagnostics (start-up times, process ids) for health checks and tests. */
export interface ApertiumEngine extends MtEngine {
  /**
   * Starts the pipelines of `pairs` (every direction's when omitted) now; resolves once each has
   * answered (or failed) a probe.
   */
  warmUp(pairs?: readonly TranslationPair[]): Promise<void>;
  /** One entry per warm pipeline. */
  pipelines(): ApertiumPairStatus[];
}

interface PairRuntime {
  readonly mode: DiscoveredMode;
  readonly pipelines: readonly ApertiumPipeline[];
}

export async function createApertiumEngine(options: ApertiumOptions = {}): Promise<ApertiumEngine> {
  const modesDir = options.modesDir ?? DEFAULT_MODES_DIRS.find((dir) => existsSync(dir));
  if (!modesDir) throw new Error(`no Apertium modes directory (looked in ${DEFAULT_MODES_DIRS.join(", ")})`);
  const warn = options.onWarning ?? ((message: string) => process.emitWarning(message, "ApertiumWarning"));
  const { modes, skipped } = await discoverModes(modesDir);
  for (const { name, reason } of skipped) warn(`apertium ${name} left out: ${reason}`);
  if (modes.length === 0) throw new Error(`no Apertium translation modes in ${modesDir}`);
  const pipelinesPerPair = Math.max(1, Math.floor(options.pipelinesPerPair ?? 1));

  const candidates: PairRuntime[] = modes.map((mode) => ({
    mode,
    pipelines: Array.from(
      { length: pipelinesPerPair },
      () =>
        new ApertiumPipeline({
          name: mode.name,
          commands: mode.commands,
          requestTimeoutMs: options.requestTimeoutMs ?? 5000,
          startupTimeoutMs: options.startupTimeoutMs ?? 30_000,
          maxInFlight: Math.max(1, Math.floor(options.maxInFlight ?? 4)),
        }),
    ),
  }));
  // A direction whose programs or data files are missing is left out of the capabilities rather
  // than failing the engine; one that still cannot start fails its requests (and restarts on the next).
  const version = await describeVersion(modes);
  const pairs = new Map<string, PairRuntime>();
  for (const pair of candidates) {
    const missing = missingFileOf(pair.mode);
    if (missing === undefined) pairs.set(pairKey(pair.mode), pair);
    else warn(`apertium ${pair.mode.name} left out: ${missing} not found`);
  }
  if (pairs.size === 0)
    throw new Error(
      `no Apertium pipeline in ${modesDir} could be started (their programs or data files are missing)`,
    );

  const info: EngineInfo = { id: "apertium", version };
  const capabilities: MtCapabilities = {
    pairs: [...pairs.values()].map(({ mode }): TranslationPair => ({ from: mode.from, to: mode.to })),
    usesContext: false,
    placeholder: "name",
  };
  let closed = false;

  return {
    info,
    capabilities,

    async translate(request: TranslateRequest, signal?: AbortSignal): Promise<string> {
      if (closed) throw new Error("apertium engine is closed");
      const pair = pairs.get(pairKey(request));
      if (!pair) throw new Error(`apertium cannot translate ${request.from}→${request.to}`);
      // Keep the caller's surrounding whitespace; translate only the core (the pipeline trims).
      const match = /^(\s*)([\s\S]*?)(\s*)$/.exec(request.text)!;
      const core = match[2]!;
      if (core === "") return "";
      const pipeline = pair.pipelines.reduce((best, p) => (p.pending < best.pending ? p : best));
      const translated = await pipeline.translate(core, signal);
      return `${match[1]}${translated}${match[3]}`;
    },

    async warmUp(only?: readonly TranslationPair[]): Promise<void> {
      const wanted = only
        ? only.map((pair) => pairs.get(pairKey(pair))).filter((p) => p !== undefined)
        : [...pairs.values()];
      const outcomes = await Promise.allSettled(
        wanted.flatMap(({ pipelines }) => pipelines.map((p) => p.warmUp())),
      );
      // A warm-up cut short by the engine closing (the service stopping as it starts) is no fault.
      if (closed) return;
      for (const outcome of outcomes)
        if (outcome.status === "rejected") warn(`apertium warm-up: ${errorMessage(outcome.reason)}`);
    },

    pipelines(): ApertiumPairStatus[] {
      return [...pairs.values()].flatMap(({ mode, pipelines }) =>
        pipelines.map((p) => ({ mode: mode.name, from: mode.from, to: mode.to, ...p.status() })),
      );
    },

    async close(): Promise<void> {
      closed = true;
      await Promise.all([...pairs.values()].flatMap(({ pipelines }) => pipelines.map((p) => p.close())));
    },
  };
}

/**
 * The first program or absolute file argument of a mode's commands that is not there (a removed
 * package, a broken mode file), found without starting anything.
 */
function missingFileOf(mode: DiscoveredMode): string | undefined {
  for (const [program, ...args] of mode.commands) {
    if (program === undefined) continue;
    if (!isExecutable(program)) return program;
    const missing = args.find((arg) => path.isAbsolute(arg) && !existsSync(arg));
    if (missing) return missing;
  }
  return undefined;
}

function isExecutable(program: string): boolean {
  if (!program.includes("/")) return findOnPath(program) !== undefined;
  try {
    accessSync(program, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function pairKey(pair: TranslationPair): string {
  return `${pair.from}>${pair.to}`;
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * "3.8.3-1+b2 (apertium-eng-spa 0.8.1-2, apertium-fr-es 0.9.4-1, ...)": the package versions pin the
 * linguistic data, which changes translations far more than the engine does. Falls back to the data
 * directory names when dpkg is not available (source installs).
 */
async function describeVersion(modes: readonly DiscoveredMode[]): Promise<string> {
  const packages = [...new Set(modes.map((m) => m.dataPackage ?? m.name))].sort();
  const versions = new Map<string, string>();
  try {
    const result = await execFileAsync(
      "dpkg-query",
      ["-W", "-f", "${Package}\\t${Version}\\n", "apertium", ...packages],
      { timeout: 3000 },
    );
    parseDpkg(result.stdout, versions);
  } catch (error) {
    // dpkg-query exits 1 when one name is unknown but still prints the others.
    const stdout = (error as { stdout?: unknown }).stdout;
    if (typeof stdout === "string") parseDpkg(stdout, versions);
  }
  const data = packages.map((name) => (versions.get(name) ? `${name} ${versions.get(name)}` : name));
  return `${versions.get("apertium") ?? "unknown"} (${data.join(", ")})`;
}

function parseDpkg(stdout: string, into: Map<string, string>): void {
  for (const line of stdout.split("\n")) {
    const [name, version] = line.split("\t");
    if (name && version) into.set(name, version);
  }
}
