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
  private wakeReader: (() => void) | undefined;

  /**
   * `synthesize` renders one sentence as output frames; `ends()` says, once it is called, whether the
   * line has nothing more to say after that sentence.
   */
  constructor(
    private readonly synthesize: (sentence: string, ends: () => boolean) => AsyncIterable<Float32Array>,
  ) {}

  /** Characters of text taken and not being spoken yet (white space not counted). */
  get waitingCharacters(): number {
    const visible = (text: string) => text.replace(/\s/gu, "").length;
    return this.sentences.reduce((sum, sentence) => sum + visible(sentence), visible(this.splitter.pending));
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

  /** Drops the text not being spoken yet; `frames` ends after the sentence in progress. */
  cancel(): void {
    this.sentences.length = 0;
    this.splitter.flush();
    this.flushed = true;
    this.wake();
  }

  /** The line's speech, sentence after sentence. A failed synthesis ends it with its error. */
  async *frames(): AsyncIterable<Float32Array> {
    for (;;) {
      while (this.sentences.length === 0 && !this.flushed)
        await new Promise<void>((resolve) => (this.wakeReader = resolve));
      const sentence = this.sentences.shift();
      if (sentence === undefined) return;
      yield* this.synthesize(sentence, () => this.flushed && this.sentences.length === 0);
    }
  }

  private wake(): void {
    const wake = this.wakeReader;
    this.wakeReader = undefined;
    wake?.();
  }
}
