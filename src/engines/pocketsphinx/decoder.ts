import type { CmnState, Pointer, PocketSphinxNative } from "./native.js";
import type { Segment } from "./words.js";

export interface DecoderResult {
  readonly hyp: string | null;
  readonly segments: readonly Segment[];
}

/**
 * One `ps_decoder_t` with its own configuration. Not re-entrant: its owner (a stream) issues one call at a
 * time, and every call that decodes runs on a worker thread.
 */
export class Decoder {
  private freed = false;
  /**
   * The words added to this decoder's dictionary (a session's glossary), as one key: "" for a decoder
   * as the model made it. Words cannot be removed, so a decoder serves only streams with this key.
   */
  vocabulary = "";

  private constructor(
    private readonly native: PocketSphinxNative,
    private readonly config: Pointer,
    private readonly handle: Pointer,
    private readonly cmn: CmnState | null,
    private readonly initialCmnMean: Float32Array | null,
  ) {}

  /**
   * Each decoder parses its own config from the same arguments: ps_init writes into the config it is
   * given (expanded model paths, feat.params), so one shared config would be mutated while other
   * decoders use it on worker threads. The config is a few KB; the model memory is what matters.
   */
  static async create(native: PocketSphinxNative, args: readonly string[]): Promise<Decoder> {
    const config = native.createConfig(args);
    if (config === null) throw new Error(`PocketSphinx: invalid configuration ${args.join(" ")}`);
    let handle: Pointer | null;
    try {
      handle = await native.init(config);
    } catch (error) {
      native.freeConfig(config);
      throw error;
    }
    if (handle === null) {
      native.freeConfig(config);
      throw new Error(
        `PocketSphinx: ps_init failed for ${args.join(" ")} (not a PocketSphinx 5prealpha model, or unreadable)`,
      );
    }
    const cmn = native.cmnState(handle);
    return new Decoder(native, config, handle, cmn, cmn ? native.getCmnMean(cmn) : null);
  }

  /**
   * Starts an utterance that owes nothing to the decoder's previous ones: the live cepstral mean is reset
   * to the model's `-cmninit` (otherwise the previous session's voice would steer this one and results
   * would depend on which decoder a stream got), and a new stream restarts frame numbering at 0.
   * `cmn_live_set` also weights that mean as a full CMN window, so the mean adapts to the speaker after
   * ~3 s of speech instead of ~8 s as in a fresh decoder (better on the test clips, 0.32 vs 0.35 WER).
   */
  async start(): Promise<void> {
    this.assertLive();
    if (this.cmn && this.initialCmnMean) this.native.setCmnMean(this.cmn, this.initialCmnMean);
    if (this.native.startStream(this.handle) < 0) throw new Error("PocketSphinx: ps_start_stream failed");
    if ((await this.native.startUtterance(this.handle)) < 0)
      throw new Error("PocketSphinx: ps_start_utt failed");
  }

  /** Feeds samples; `pcm` must not change until this settles. */
  async process(pcm: Int16Array): Promise<void> {
    this.assertLive();
    if ((await this.native.processRaw(this.handle, pcm)) < 0)
      throw new Error("PocketSphinx: ps_process_raw failed");
  }

  async end(): Promise<void> {
    this.assertLive();
    if ((await this.native.endUtterance(this.handle)) < 0) throw new Error("PocketSphinx: ps_end_utt failed");
  }

  /**
   * Best hypothesis so far (or final after `end`), with its word segmentation; `posteriors` only after
   * `end` (a partial search has no lattice to compute them from).
   */
  async result(posteriors = false): Promise<DecoderResult> {
    this.assertLive();
    const hyp = await this.native.hypothesis(this.handle);
    const segments: Segment[] = [];
    let segment = await this.native.segmentIterator(this.handle);
    try {
      while (segment !== null) {
        const [startFrame, endFrame] = this.native.segmentFrames(segment);
        const word = this.native.segmentWord(segment);
        segments.push({
          word,
          startFrame,
          endFrame,
          ...(posteriors ? { posterior: this.native.segmentPosterior(this.handle, segment) } : {}),
        });
        // ps_seg_next frees the iterator when it reaches the end.
        segment = this.native.segmentNext(segment);
      }
    } finally {
      if (segment !== null) this.native.segmentFree(segment);
    }
    return { hyp, segments };
  }

  /**
   * Adds words with their CMU phones to the dictionary and the language model, then rebuilds the
   * search once; `vocabulary` becomes `key`. Words it has already are skipped.
   */
  async addWords(words: ReadonlyMap<string, string>, key: string): Promise<void> {
    this.assertLive();
    const missing = [...words].filter(([word]) => !this.native.hasWord(this.handle, word));
    for (const [i, [word, phones]] of missing.entries()) {
      if ((await this.native.addWord(this.handle, word, phones, i === missing.length - 1)) < 0)
        throw new Error(`PocketSphinx: ps_add_word failed for "${word}" (${phones})`);
    }
    this.vocabulary = key;
  }

  /** Must not be called while a call on this decoder is in flight. */
  free(): void {
    if (this.freed) return;
    this.freed = true;
    this.native.free(this.handle);
    this.native.freeConfig(this.config);
  }

  private assertLive(): void {
    if (this.freed) throw new Error("PocketSphinx: decoder already freed");
  }
}
