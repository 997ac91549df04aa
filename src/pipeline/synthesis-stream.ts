import { SentenceSplitter } from "../core/sentence-splitter.js";

/**
 * One line of speech whose text arrives in pieces: `pushText` as a translation grows, `flush` when
 * it is complete. Each sentence is synthesized as soon as it is complete, so a streamed translation
 * starts speaking at its first sentence instead of when it ends; sentences are synthesized one at a
 * time, in order, while `frames` is being read.
 */
export class SynthesisStream {
  private readonly splitter = new SentenceSplitter();
  private readonly sentences: string[] = [];
  private flushed = false;
  /** A sentence has been taken to be spoken (the carried text with it, since it comes first). */
  private begun = false;
  private wakeReader: (() => void) | undefined;

  /**
   * `synthesize` renders one sentence as output frames; `ends()` says, once it is called, whether the
   * line has nothing more to say after that sentence. `carried`: an unfinished phrase of an earlier
   * line of the same utterance (`takeUnfinished`), spoken ahead of this line's text and with it.
   */
  constructor(
    private readonly synthesize: (sentence: string, ends: () => boolean) => AsyncIterable<Float32Array>,
    private readonly carried = "",
  ) {
    if (carried) this.pushText(`${carried} `);
  }

  /** Characters of text taken and not being spoken yet (white space not counted). */
  get waitingCharacters(): number {
    const visible = (text: string) => text.replace(/\s/gu, "").length;
    return this.sentences.reduce((sum, sentence) => sum + visible(sentence), visible(this.splitter.pending));
  }

  /** The text taken after its last complete sentence. */
  get unfinished(): string {
    return this.splitter.pending;
  }

  /** More of the line's text (appended to what came before). Ignored after `flush` or `cancel`. */
  pushText(text: string): void {
    if (this.flushed) return;
    this.sentences.push(...this.splitter.push(text));
    this.wake();
  }

  /** The text is complete: the rest is spoken, then `frames` ends. */
  flush(): void {
    if (this.flushed) return;
    this.sentences.push(...this.splitter.flush());
    this.flushed = true;
    this.wake();
  }

  /**
   * Drops the text not being spoken yet; `frames` ends after the sentence in progress. Carried text
   * belongs to a line that was not cancelled: it is still spoken unless it already is.
   */
  cancel(): void {
    this.sentences.length = 0;
    this.splitter.flush();
    if (this.carried && !this.begun) this.sentences.push(this.carried);
    this.flushed = true;
    this.wake();
  }

  /**
   * Ends the text like `flush`, except for its last, unfinished sentence (text after the last
   * sentence end), which is returned to be carried into another line instead of spoken here.
   */
  takeUnfinished(): string {
    const unfinished = this.splitter.flush()[0] ?? "";
    this.flush();
    return unfinished;
  }

  /** The line's speech, sentence after sentence. A failed synthesis ends it with its error. */
  async *frames(): AsyncIterable<Float32Array> {
    for (;;) {
      while (this.sentences.length === 0 && !this.flushed)
        await new Promise<void>((resolve) => (this.wakeReader = resolve));
      const sentence = this.sentences.shift();
      if (sentence === undefined) return;
      this.begun = true;
      yield* this.synthesize(sentence, () => this.flushed && this.sentences.length === 0);
    }
  }

  private wake(): void {
    const wake = this.wakeReader;
    this.wakeReader = undefined;
    wake?.();
  }
}
