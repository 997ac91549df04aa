/**
 * Embedded streaming speech recognition on CMU PocketSphinx 5prealpha, called in-process through koffi.
 *
 * The engine keeps a bounded pool of decoders created lazily; a stream leases one decoder for one
 * utterance. Decoders are created with `-mmap yes`, so the model files PocketSphinx can map (mdef and
 * sendump, ~5 MB) are shared through the page cache. The rest of a decoder's ~90 MB (language model,
 * dictionary, search lexicon) is private: the C API cannot share a dictionary, and a shared language
 * model is not thread-safe (its trie keeps per-lookup history caches). The pool bound is the memory bound.
 */
import { existsSync, statSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { availableParallelism } from "node:os";
import path from "node:path";
import type {
  AsrCapabilities,
  AsrEngine,
  AsrStream,
  AsrStreamOptions,
  EngineInfo,
} from "../../core/contracts.js";
import { Decoder } from "./decoder.js";
import { loadNative, type PocketSphinxNative } from "./native.js";
import { ResourcePool, type PoolStats } from "./pool.js";
import { PocketSphinxStream, type StreamOwner } from "./stream.js";
import { GlossaryVocabulary } from "./vocabulary.js";

export type { PoolStats } from "./pool.js";

export const DEFAULT_MODEL_DIR = "/usr/share/pocketsphinx/model/en-us";
const MODEL_PACKAGE = "pocketsphinx-en-us";
const SAMPLE_RATE = 16_000;

export interface PocketSphinxOptions {
  /**
   * Directory laid out like Debian's `pocketsphinx-en-us`: `<name>/` (acoustic model),
   * `<name>.lm.bin` and `cmudict-<name>.dict`, where `<name>` is the directory's own name.
   */
  readonly modelDir?: string;
  /** Overrides `<modelDir>/<name>`. */
  readonly acousticModel?: string;
  /** Overrides `<modelDir>/<name>.lm.bin`. */
  readonly languageModel?: string;
  /** Overrides `<modelDir>/cmudict-<name>.dict`. */
  readonly dictionary?: string;
  /**
   * Most decoders alive at once (each costs roughly 90 MB and ~0.35 s to create). A stream holds one for
   * a whole utterance, so this bounds concurrent utterances; further `createStream` calls wait.
   * Default: the number of CPUs.
   */
  readonly maxDecoders?: number;
  /** eSpeak NG, for the pronunciations of glossary words the dictionary lacks. Default `espeak-ng`. */
  readonly espeakBinary?: string;
  /** Further decoder settings as PocketSphinx command-line pairs (e.g. `{ "-maxhmmpf": "3000" }`); they win over the defaults. */
  readonly decoderSettings?: Readonly<Record<string, string>>;
}

export interface PocketSphinxEngine extends AsrEngine {
  /** Pool occupancy, for metrics and tests. */
  stats(): PoolStats;
}

interface ModelFiles {
  readonly acousticModel: string;
  readonly languageModel: string;
  readonly dictionary: string;
}

function missing(file: string, what: string): Error {
  return new Error(
    `PocketSphinx ${what} missing: ${file} (the Debian package ${MODEL_PACKAGE} provides the en-us model ` +
      `in ${DEFAULT_MODEL_DIR})`,
  );
}

function resolveModel(options: PocketSphinxOptions): ModelFiles {
  const modelDir = path.resolve(options.modelDir ?? DEFAULT_MODEL_DIR);
  const name = path.basename(modelDir);
  return {
    acousticModel: path.resolve(options.acousticModel ?? path.join(modelDir, name)),
    languageModel: path.resolve(options.languageModel ?? path.join(modelDir, `${name}.lm.bin`)),
    dictionary: path.resolve(options.dictionary ?? path.join(modelDir, `cmudict-${name}.dict`)),
  };
}

/** Checked up front because PocketSphinx's own error (logging is silenced) is just a NULL decoder. */
function checkModel(files: ModelFiles): void {
  const isDir = (p: string): boolean => existsSync(p) && statSync(p).isDirectory();
  const isFile = (p: string): boolean => existsSync(p) && statSync(p).isFile();
  if (!isDir(files.acousticModel)) throw missing(files.acousticModel, "acoustic model directory");
  for (const file of ["mdef", "means", "variances", "transition_matrices", "noisedict"]) {
    const full = path.join(files.acousticModel, file);
    if (!isFile(full)) throw missing(full, "acoustic model file");
  }
  const weights = ["sendump", "mixture_weights"].map((f) => path.join(files.acousticModel, f));
  if (!weights.some(isFile)) throw missing(weights.join(" or "), "acoustic model mixture weights");
  if (!isFile(files.languageModel)) throw missing(files.languageModel, "language model");
  if (!isFile(files.dictionary)) throw missing(files.dictionary, "pronunciation dictionary");
}

/** The C library has no version call; Debian's package database knows the exact build. */
async function libraryVersion(): Promise<string> {
  try {
    const status = await readFile("/var/lib/dpkg/status", "utf8");
    for (const block of status.split(/\n\n+/)) {
      if (!/^Package: libpocketsphinx3$/m.test(block)) continue;
      const version = /^Version: (\S+)$/m.exec(block)?.[1];
      if (version) return version;
    }
  } catch {
    // Not a Debian system: fall through to the API level these bindings target.
  }
  return "5prealpha";
}

function modelName(files: ModelFiles): string {
  const acoustic = path.basename(files.acousticModel);
  const lm = path.basename(files.languageModel).replace(/(\.lm)?(\.bin|\.arpa|\.DMP)?$/i, "");
  return lm === acoustic ? acoustic : `${acoustic}+${lm}`;
}

function decoderArgs(files: ModelFiles, settings: Readonly<Record<string, string>>): string[] {
  for (const key of Object.keys(settings)) {
    if (!/^-[a-z_]+$/u.test(key)) throw new Error(`PocketSphinx: "${key}" is not a decoder setting name`);
  }
  return [
    "-hmm",
    files.acousticModel,
    "-lm",
    files.languageModel,
    "-dict",
    files.dictionary,
    "-samprate",
    String(SAMPLE_RATE),
    // Map model files where PocketSphinx can, so decoders share those pages.
    "-mmap",
    "yes",
    // Dithering would draw from sphinxbase's process-global random generator from several threads.
    "-dither",
    "no",
    // The decoder's own silence removal drops frames inside an utterance and then misnumbers the
    // words' frames (seconds late, clamped to the end), so a cut at a change of speaker lost the
    // words before it; the service's VAD delimits utterances, and accuracy is the same without it.
    ...Object.entries({ "-remove_silence": "no", ...settings }).flat(),
  ];
}

class PocketSphinxAsrEngine implements PocketSphinxEngine, StreamOwner {
  readonly capabilities: AsrCapabilities = {
    languages: ["en"],
    sampleRate: SAMPLE_RATE,
    partialResults: true,
    wordTimings: true,
    punctuation: false,
  };
  private readonly streams = new Set<PocketSphinxStream>();
  private closed = false;

  constructor(
    readonly info: EngineInfo,
    private readonly pool: ResourcePool<Decoder>,
    private readonly vocabulary: GlossaryVocabulary,
  ) {}

  stats(): PoolStats {
    return this.pool.stats();
  }

  /**
   * The glossary's words the dictionary lacks are added to the stream's decoder (vocabulary.ts);
   * decoders are kept per set of added words, so a session's names reach no other session and a
   * decoder is rebuilt only when its words change. Free-text `context` is not read otherwise.
   */
  async createStream(options: AsrStreamOptions): Promise<AsrStream> {
    if (this.closed) throw new Error("PocketSphinx engine is closed");
    if (!this.capabilities.languages.includes(options.language)) {
      throw new Error(`PocketSphinx: language "${options.language}" is not supported (only en)`);
    }
    const added = await this.vocabulary.wordsFor(options.glossary);
    const decoder = await this.pool.acquire(added.key);
    try {
      if (decoder.vocabulary !== added.key) await decoder.addWords(added.words, added.key);
      await decoder.start();
    } catch (error) {
      this.pool.discard(decoder);
      throw error;
    }
    const stream = new PocketSphinxStream(decoder, this, SAMPLE_RATE, added.spellings);
    this.streams.add(stream);
    if (this.closed) {
      // close() ran while the utterance was starting and could not abort this stream.
      stream.abort();
      throw new Error("PocketSphinx engine is closed");
    }
    return stream;
  }

  /**
   * Adds a session's glossary words to a decoder as soon as the session has them (start, or a new
   * context), so its first utterance does not wait for them (a few hundred ms per decoder).
   */
  async prepare(options: AsrStreamOptions): Promise<void> {
    const added = await this.vocabulary.wordsFor(options.glossary);
    if (this.closed || added.key === "" || this.pool.hasIdle(added.key)) return;
    const decoder = await this.pool.acquire(added.key);
    try {
      if (decoder.vocabulary !== added.key) await decoder.addWords(added.words, added.key);
    } catch (error) {
      this.pool.discard(decoder);
      throw error;
    }
    this.pool.release(decoder);
  }

  release(decoder: Decoder, stream: PocketSphinxStream): void {
    this.streams.delete(stream);
    this.pool.release(decoder);
  }

  discard(decoder: Decoder, stream: PocketSphinxStream): void {
    this.streams.delete(stream);
    this.pool.discard(decoder);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const stream of this.streams) stream.abort();
    await this.pool.close();
  }
}

export async function createPocketSphinxEngine(
  options: PocketSphinxOptions = {},
): Promise<PocketSphinxEngine> {
  const maxDecoders = options.maxDecoders ?? availableParallelism();
  if (!Number.isInteger(maxDecoders) || maxDecoders < 1) {
    throw new Error(`PocketSphinx: maxDecoders must be a positive integer, got ${maxDecoders}`);
  }
  const files = resolveModel(options);
  checkModel(files);
  const native: PocketSphinxNative = loadNative();
  const args = decoderArgs(files, options.decoderSettings ?? {});
  const pool = new ResourcePool<Decoder>({
    name: "PocketSphinx decoder pool",
    max: maxDecoders,
    create: () => Decoder.create(native, args),
    destroy: (decoder) => decoder.free(),
    keyOf: (decoder) => decoder.vocabulary,
  });
  // Create the first decoder now: a model PocketSphinx rejects fails here rather than on the first
  // session, and that session does not pay the load time.
  try {
    pool.release(await pool.acquire());
  } catch (error) {
    await pool.close();
    throw error;
  }
  const info: EngineInfo = { id: "pocketsphinx", version: `${await libraryVersion()}+${modelName(files)}` };
  const vocabulary = await GlossaryVocabulary.load(files.dictionary, options.espeakBinary ?? "espeak-ng");
  return new PocketSphinxAsrEngine(info, pool, vocabulary);
}
