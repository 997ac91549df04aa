/**
 * Bindings to the PocketSphinx 5prealpha C API (Debian `libpocketsphinx3`, `libsphinxbase3`) through koffi.
 * Everything that decodes runs through koffi's async form on worker threads; only cheap bookkeeping
 * calls are synchronous.
 */
import koffi, { type LibraryHandle } from "koffi";

/** A native pointer (koffi 3 represents pointers as BigInt). */
export type Pointer = bigint;

type NativeFunction = ReturnType<LibraryHandle["func"]>;

export const POCKETSPHINX_LIBRARY = "libpocketsphinx.so.3";
export const SPHINXBASE_LIBRARY = "libsphinxbase.so.3";

// Anonymous structs: koffi type names are process-global and must not clash.
/** Leading fields of sphinxbase's public `feat_t` (sphinxbase/feat.h), up to the CMN state. */
const FeatHead = koffi.struct({
  refcount: "int",
  name: "void *",
  cepsize: "int32_t",
  n_stream: "int32_t",
  stream_len: "void *",
  window_size: "int32_t",
  n_sv: "int32_t",
  sv_len: "void *",
  subvecs: "void *",
  sv_buf: "void *",
  sv_dim: "int32_t",
  cmn: "int",
  varnorm: "int32_t",
  agc: "int",
  compute_feat: "void *",
  cmn_struct: "void *",
});

/** sphinxbase's public `cmn_t` (sphinxbase/cmn.h); `mfcc_t` is float in the Debian build. */
const CmnStruct = koffi.struct({
  cmn_mean: "void *",
  cmn_var: "void *",
  sum: "void *",
  nframe: "int32_t",
  veclen: "int32_t",
});

/** The live cepstral-mean-normalization state of one decoder (`cmn_t *` and its vector length). */
export interface CmnState {
  readonly pointer: Pointer;
  readonly length: number;
}

export interface PocketSphinxNative {
  /** Parses `-name value` pairs against `ps_args()`; the library copies the strings. */
  createConfig(args: readonly string[]): Pointer | null;
  freeConfig(config: Pointer): void;
  /** Loads acoustic model, dictionary and language model: slow, runs on a worker thread. */
  init(config: Pointer): Promise<Pointer | null>;
  free(decoder: Pointer): void;
  startStream(decoder: Pointer): number;
  startUtterance(decoder: Pointer): Promise<number>;
  /** `data` must stay referenced and unmodified until the promise settles (koffi passes its address). */
  processRaw(decoder: Pointer, data: Int16Array): Promise<number>;
  endUtterance(decoder: Pointer): Promise<number>;
  /** After `ps_end_utt` this runs the best-path search, hence async. */
  hypothesis(decoder: Pointer): Promise<string | null>;
  segmentIterator(decoder: Pointer): Promise<Pointer | null>;
  segmentNext(segment: Pointer): Pointer | null;
  segmentWord(segment: Pointer): string;
  segmentFrames(segment: Pointer): [number, number];
  segmentFree(segment: Pointer): void;
  /**
   * The segment's posterior probability (0-1) from the final lattice (`-bestpath yes`); 1 when the
   * search kept no lattice (partial results, `-bestpath no`), so it can only raise a mean.
   */
  segmentPosterior(decoder: Pointer, segment: Pointer): number;
  /** Null when the mirrored `feat_t` layout does not check out against the library. */
  cmnState(decoder: Pointer): CmnState | null;
  getCmnMean(state: CmnState): Float32Array;
  /** `cmn_live_set`: mean := vec, as if estimated over the library's CMN window. */
  setCmnMean(state: CmnState, mean: Float32Array): void;
  /** `ps_lookup_word`: whether the dictionary has the word. */
  hasWord(decoder: Pointer, word: string): boolean;
  /**
   * `ps_add_word`: the word with its phones into the dictionary and the language model; with
   * `update`, the search is rebuilt to use it (slow: a worker thread). Its id, or < 0 on failure.
   */
  addWord(decoder: Pointer, word: string, phones: string, update: boolean): Promise<number>;
}

function loadLibrary(file: string, debianPackage: string): LibraryHandle {
  try {
    return koffi.load(file);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    const message = `PocketSphinx: cannot load ${file} (Debian package ${debianPackage} provides it): ${reason}`;
    throw new Error(message, { cause: error });
  }
}

function asPointer(value: unknown): Pointer | null {
  if (typeof value === "bigint") return value === 0n ? null : value;
  if (typeof value === "number") return value === 0 ? null : BigInt(value);
  return null;
}

/**
 * Arguments of async calls in flight, so the typed arrays among them stay alive: koffi passes them by
 * address without keeping a reference, and a local that is dead after an `await` may be collected.
 */
const inUse = new Set<readonly unknown[]>();

async function callAsync(fn: NativeFunction, ...args: unknown[]): Promise<unknown> {
  inUse.add(args);
  try {
    return await new Promise((resolve, reject) => {
      fn.async(...args, (error: unknown, result: unknown) => {
        if (error) reject(error instanceof Error ? error : new Error(String(error)));
        else resolve(result);
      });
    });
  } finally {
    inUse.delete(args);
  }
}

function bind(): PocketSphinxNative {
  // sphinxbase first: libpocketsphinx links against it, and its absence deserves its own message.
  const sphinxbase = loadLibrary(SPHINXBASE_LIBRARY, "libsphinxbase3");
  const pocketsphinx = loadLibrary(POCKETSPHINX_LIBRARY, "libpocketsphinx3");

  const errSetLogfp = sphinxbase.func("void err_set_logfp(void *stream)");
  const cmdLnInit = sphinxbase.func("void *cmd_ln_init(void *inout, void *defn, int strict, ...)");
  const cmdLnFree = sphinxbase.func("int cmd_ln_free_r(void *cmdln)");
  const cmnLiveGet = sphinxbase.func("void cmn_live_get(void *cmn, float *vec)");
  const cmnLiveSet = sphinxbase.func("void cmn_live_set(void *cmn, const float *vec)");
  const psArgs = pocketsphinx.func("void *ps_args(void)");
  const psInit = pocketsphinx.func("void *ps_init(void *config)");
  const psFree = pocketsphinx.func("int ps_free(void *ps)");
  const psGetFeat = pocketsphinx.func("void *ps_get_feat(void *ps)");
  const psStartStream = pocketsphinx.func("int ps_start_stream(void *ps)");
  const psStartUtt = pocketsphinx.func("int ps_start_utt(void *ps)");
  const psProcessRaw = pocketsphinx.func(
    "int ps_process_raw(void *ps, const int16_t *data, size_t n_samples, int no_search, int full_utt)",
  );
  const psEndUtt = pocketsphinx.func("int ps_end_utt(void *ps)");
  const psGetHyp = pocketsphinx.func("const char *ps_get_hyp(void *ps, int32_t *out_best_score)");
  const psSegIter = pocketsphinx.func("void *ps_seg_iter(void *ps)");
  const psSegNext = pocketsphinx.func("void *ps_seg_next(void *seg)");
  const psSegWord = pocketsphinx.func("const char *ps_seg_word(void *seg)");
  const psSegFrames = pocketsphinx.func("void ps_seg_frames(void *seg, int *out_sf, int *out_ef)");
  const psSegFree = pocketsphinx.func("void ps_seg_free(void *seg)");
  const psSegProb = pocketsphinx.func(
    "int32_t ps_seg_prob(void *seg, int32_t *out_ascr, int32_t *out_lscr, int32_t *out_lback)",
  );
  const psGetLogmath = pocketsphinx.func("void *ps_get_logmath(void *ps)");
  const psLookupWord = pocketsphinx.func("void *ps_lookup_word(void *ps, const char *word)");
  const psAddWord = pocketsphinx.func(
    "int ps_add_word(void *ps, const char *word, const char *phones, int update)",
  );
  const ckdFree = sphinxbase.func("void ckd_free(void *ptr)");
  const logmathExp = sphinxbase.func("double logmath_exp(void *lmath, int logb_p)");

  // Logging is process-global in sphinxbase. Disabling it once here replaces `-logfn /dev/null`: with
  // `-logfn`, every ps_init reopens the log file and fclose()s the previous FILE, which races with
  // decoders logging on other worker threads (ps_end_utt logs).
  errSetLogfp(null);

  const defaults = asPointer(psArgs());
  if (defaults === null) throw new Error("PocketSphinx: ps_args() returned NULL");

  return {
    createConfig(args) {
      // cmd_ln_init copies its strings; cmd_ln_parse_r would keep pointers into koffi's temporary argv.
      const variadic: unknown[] = [];
      for (const arg of args) variadic.push("str", arg);
      variadic.push("str", null);
      return asPointer(cmdLnInit(null, defaults, 1, ...variadic));
    },
    freeConfig(config) {
      cmdLnFree(config);
    },
    async init(config) {
      return asPointer(await callAsync(psInit, config));
    },
    free(decoder) {
      psFree(decoder);
    },
    startStream(decoder) {
      return Number(psStartStream(decoder));
    },
    async startUtterance(decoder) {
      return Number(await callAsync(psStartUtt, decoder));
    },
    async processRaw(decoder, data) {
      return Number(await callAsync(psProcessRaw, decoder, data, data.length, 0, 0));
    },
    async endUtterance(decoder) {
      return Number(await callAsync(psEndUtt, decoder));
    },
    async hypothesis(decoder) {
      // The library writes the path score through this pointer (it is not optional).
      const score = new Int32Array(1);
      const hyp = await callAsync(psGetHyp, decoder, score);
      return typeof hyp === "string" ? hyp : null;
    },
    async segmentIterator(decoder) {
      return asPointer(await callAsync(psSegIter, decoder));
    },
    segmentNext(segment) {
      return asPointer(psSegNext(segment));
    },
    segmentWord(segment) {
      const word: unknown = psSegWord(segment);
      return typeof word === "string" ? word : "";
    },
    segmentFrames(segment) {
      const start = new Int32Array(1);
      const end = new Int32Array(1);
      psSegFrames(segment, start, end);
      return [start[0]!, end[0]!];
    },
    segmentFree(segment) {
      psSegFree(segment);
    },
    segmentPosterior(decoder, segment) {
      // The scores are written through these pointers (they are not optional).
      const scores = [new Int32Array(1), new Int32Array(1), new Int32Array(1)];
      const logPosterior = Number(psSegProb(segment, ...scores));
      return Math.min(1, Number(logmathExp(psGetLogmath(decoder), logPosterior)));
    },
    cmnState(decoder) {
      const feat = asPointer(psGetFeat(decoder));
      if (feat === null) return null;
      const head = koffi.decode(feat, FeatHead) as { cepsize: number; cmn_struct: unknown };
      const pointer = asPointer(head.cmn_struct);
      if (pointer === null) return null;
      const cmn = koffi.decode(pointer, CmnStruct) as { cmn_mean: unknown; veclen: number };
      const mean = asPointer(cmn.cmn_mean);
      const length = cmn.veclen;
      // Cross-check the mirrored layout against the library's own accessor before relying on it.
      if (mean === null || length !== head.cepsize || length <= 0 || length > 64) return null;
      const viaLibrary = new Float32Array(length);
      cmnLiveGet(pointer, viaLibrary);
      const direct = koffi.decode(mean, "float", length) as ArrayLike<number>;
      for (let i = 0; i < length; i++) if (viaLibrary[i] !== direct[i]) return null;
      return { pointer, length };
    },
    getCmnMean(state) {
      const mean = new Float32Array(state.length);
      cmnLiveGet(state.pointer, mean);
      return mean;
    },
    setCmnMean(state, mean) {
      if (mean.length !== state.length) throw new Error("PocketSphinx: CMN vector length mismatch");
      cmnLiveSet(state.pointer, mean);
    },
    hasWord(decoder, word) {
      // The phone string is allocated for the caller.
      const phones = asPointer(psLookupWord(decoder, word));
      if (phones === null) return false;
      ckdFree(phones);
      return true;
    },
    async addWord(decoder, word, phones, update) {
      return Number(await callAsync(psAddWord, decoder, word, phones, update ? 1 : 0));
    },
  };
}

let native: PocketSphinxNative | undefined;

/** Loads the libraries once per process (a failed load is retried on the next call). */
export function loadNative(): PocketSphinxNative {
  native ??= bind();
  return native;
}
