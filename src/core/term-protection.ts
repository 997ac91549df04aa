import { escapeRegExp, termOf, termPattern, type TranslatedTerm } from "./glossary.js";

/**
 * Carrying glossary terms through a translation engine that cannot read context (Apertium, Opus-MT,
 * M2M100, LibreTranslate): each occurrence of a term becomes a placeholder the engine passes through
 * unchanged, and the term (or its given target) goes back in its place. Which placeholder survives
 * depends on the engine; each declares its form (`MtCapabilities.placeholder`), chosen by
 * measurement (`npm run bench:context`, docs/benchmarks.md).
 *
 * - `digits`: a three-digit number ("311": no thousands separator to localize); numbers are what
 *   subword vocabularies hold whole.
 * - `name`: an invented capitalized word ("Zorvax"): read as an unknown proper noun, so the grammar
 *   around it holds (Apertium: "Dr. Zorvax met" keeps its verb).
 * - `tag`: an XML-like tag ("<t1/>"): markup-aware engines pass it through as formatting.
 */
export type PlaceholderForm = "digits" | "name" | "tag";

export interface ProtectedText {
  /** The text to translate, terms replaced by placeholders. */
  readonly text: string;
  /**
   * The translation with each placeholder replaced by its term's target; undefined when a placeholder
   * did not come back exactly once (the caller then translates the plain text).
   */
  restore(translation: string): string | undefined;
}

/** Invented names: consonant clusters no language in our engines uses, so they never occur in text. */
const NAME_SYLLABLES = ["Zorv", "Quix", "Vexl", "Drub", "Klon", "Yarf", "Jupz", "Wemb"];

function placeholder(form: PlaceholderForm, index: number): string {
  switch (form) {
    case "digits":
      return String(311 + index * 13);
    case "name":
      return `${NAME_SYLLABLES[index % NAME_SYLLABLES.length]}${"aeiou"[Math.floor(index / NAME_SYLLABLES.length) % 5]}x`;
    case "tag":
      return `<t${index}/>`;
  }
}

/**
 * Replaces the occurrences of `terms` (each with a target) in `text`; undefined when none occurs or
 * when a placeholder of this form already stands in the text.
 */
export function protectTerms(
  text: string,
  terms: readonly TranslatedTerm[],
  form: PlaceholderForm,
): ProtectedText | undefined {
  const pattern = termPattern(terms);
  if (!pattern) return undefined;
  const targets: string[] = [];
  const protectedText = text.replace(pattern, (occurrence) => {
    // The glossary's spelling, whatever the case in the text ("kubernetes" → "Kubernetes").
    targets.push(termOf(terms, occurrence)?.target ?? occurrence);
    return placeholder(form, targets.length - 1);
  });
  if (targets.length === 0) return undefined;
  const marks = targets.map((_, index) => placeholder(form, index));
  if (marks.some((mark) => text.toLowerCase().includes(mark.toLowerCase()))) return undefined;
  return {
    text: protectedText,
    restore(translation) {
      let restored = translation;
      for (const [index, mark] of marks.entries()) {
        const found = new RegExp(`(?<![\\p{L}\\p{N}])${escapeRegExp(mark)}(?![\\p{L}\\p{N}])`, "giu");
        const count = restored.match(found)?.length ?? 0;
        if (count !== 1) return undefined;
        restored = restored.replace(found, () => targets[index]!);
      }
      return restored;
    },
  };
}
