/**
 * Translation history, the context policy every surface shares: the last few sentences of the same
 * stream and their translations go with each request (engines that declare `usesContext` use them).
 */
export const HISTORY_SENTENCES = 3;

export class TranslationHistory {
  private readonly pairs: { source: string; translation: string }[] = [];

  record(source: string, translation: string): void {
    if (translation === "") return;
    this.pairs.push({ source, translation });
    if (this.pairs.length > HISTORY_SENTENCES) this.pairs.shift();
  }

  get recent(): readonly { readonly source: string; readonly translation: string }[] {
    return [...this.pairs];
  }
}
