import { AsrStreamBase } from "../kit/asr-stream.js";
import type { Hypothesis } from "../../core/contracts.js";
import type { Decoder } from "./decoder.js";
import { spellAdded } from "./vocabulary.js";
import { toHypothesis } from "./words.js";

/** What a stream needs from its engine to give its decoder back. */
export interface StreamOwner {
  /** The utterance is ended: the decoder can serve the next stream. */
  release(decoder: Decoder, stream: PocketSphinxStream): void;
  /** A native call failed: the decoder's state is unknown and it must be freed. */
  discard(decoder: Decoder, stream: PocketSphinxStream): void;
}

/** One utterance on a leased decoder (the shared state machine is in ../asr-stream.ts). */
export class PocketSphinxStream extends AsrStreamBase {
  private returned = false;

  constructor(
    private readonly decoder: Decoder,
    private readonly owner: StreamOwner,
    private readonly sampleRate: number,
    /** Words the session's glossary added, in its spelling. */
    private readonly spellings: ReadonlyMap<string, string> = new Map(),
  ) {
    super("PocketSphinx");
  }

  protected async accept(pcm: Int16Array): Promise<void> {
    // The worker thread reads the array in place: a private copy cannot be reused, resized or
    // transferred by the caller meanwhile.
    await this.decoder.process(pcm.slice());
  }

  protected async currentHypothesis(): Promise<Hypothesis> {
    const { hyp, segments } = await this.decoder.result();
    return spellAdded(toHypothesis(hyp, segments, this.durationMs()), this.spellings);
  }

  protected async conclude(): Promise<Hypothesis> {
    try {
      await this.decoder.end();
      const { hyp, segments } = await this.decoder.result(true);
      this.giveBack(true);
      return spellAdded(toHypothesis(hyp, segments, this.durationMs()), this.spellings);
    } catch (error) {
      this.giveBack(false);
      throw error;
    }
  }

  /** With a call in flight, the decoder is returned once that call has settled (`idle`). */
  protected aborted(): void {
    if (!this.busy) this.endAndGiveBack();
  }

  protected override idle(): void {
    if (this.isAborted) this.endAndGiveBack();
  }

  private durationMs(): number {
    return (this.samples * 1000) / this.sampleRate;
  }

  /** Ends the abandoned utterance off the event loop so the decoder is clean for its next stream. */
  private endAndGiveBack(): void {
    if (this.returned) return;
    this.decoder.end().then(
      () => this.giveBack(true),
      () => this.giveBack(false),
    );
  }

  private giveBack(healthy: boolean): void {
    if (this.returned) return;
    this.returned = true;
    if (healthy) this.owner.release(this.decoder, this);
    else this.owner.discard(this.decoder, this);
  }
}
