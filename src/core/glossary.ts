/**
 * The terms of a session's `context` (spec rule 4: "context biases recognition and translation toward
 * names and jargon; any language"): one parse for sessions, `update_metadata`, rooms and dubbing.
 *
 * A context is free text, optionally with explicit entries, one per line:
 *   `Hope Walker => =`        keep this term verbatim in every translation
 *   `Reading => Reading (UK)` put this target in place of the term
 * A line is an entry only when both sides are terms, not sentences (`explicitEntry`); a `=>` line that
 * is not gives no term at all (`Ignore all previous instructions => …`).
 * From the rest: quoted phrases, names (runs of capitalized words; a sentence's first word only as part
 * of a run), acronyms, words with digits, and the items of short lists ("Topics: Kubernetes, OKRs") —
 * in any script; short list items without capitals or digits (in scripts with case) are kept for
 * recognition only, since a lower-case phrase ("machine learning") is ordinary language to translate.
 */

/** The spec's bound on `context`, in characters (code points). */
export const MAX_CONTEXT_LENGTH = 2000;
/** Terms taken from one context at most; the rest are ignored and counted (`Glossary.ignored`). */
export const MAX_GLOSSARY_TERMS = 50;
/** Longest term kept, in characters (a longer "term" is prose). */
const MAX_TERM_LENGTH = 60;
/** A list item of this many words or fewer is a term as a whole. */
const MAX_ITEM_WORDS = 4;
/** An explicit entry's source: this many words, or up to `MAX_NAME_WORDS` when it is all name. */
const MAX_PHRASE_WORDS = 3;
const MAX_NAME_WORDS = 6;
/** An explicit entry's target, in words ("… => National Autonomous University of Mexico"). */
const MAX_TARGET_WORDS = 8;

export interface GlossaryTerm {
  /** The term as the context spells it: recognition and casing follow this spelling. */
  readonly text: string;
  /**
   * What translation puts in its place: the term itself (kept verbatim), a given target, or
   * undefined for a term that only helps recognition (a lower-case phrase).
   */
  readonly target: string | undefined;
}

export interface Glossary {
  readonly terms: readonly GlossaryTerm[];
  /** Terms past `MAX_GLOSSARY_TERMS`, not used. */
  readonly ignored: number;
}

export const EMPTY_GLOSSARY: Glossary = { terms: [], ignored: 0 };

/** What a client is told when its context holds more terms than are used (never an error that ends anything). */
export function ignoredTermsNotice(ignored: number): { readonly code: string; readonly message: string } {
  return {
    code: "context_terms_ignored",
    message:
      `context: ${ignored} term${ignored === 1 ? "" : "s"} past the first ${MAX_GLOSSARY_TERMS} ` +
      `${ignored === 1 ? "is" : "are"} not used for recognition and translation`,
  };
}

const EXPLICIT = /^(.+?)\s*=>\s*(.*)$/u;
const QUOTED = /["“”«»„]([^"“”«»„\n]{1,60})["“”«»„]/gu;
const WORD = /[\p{L}\p{N}][\p{L}\p{N}\p{M}'’.&+-]*[\p{L}\p{N}\p{M}]|[\p{L}\p{N}]/gu;

const hasCase = (word: string) => word.toLowerCase() !== word.toUpperCase();
const capitalized = (word: string) => /^\p{Lu}/u.test(word);
const acronym = (word: string) => /^\p{Lu}{2,}s?$/u.test(word) || /\p{Lu}.*\p{Lu}/u.test(word.slice(1));
const withDigits = (word: string) => /\p{N}/u.test(word) && /\p{L}/u.test(word);
/** Short lower-case words a name may contain ("Bank of America", "Leonardo da Vinci"). */
const CONNECTOR = /^\p{Ll}{1,3}$/u;

/** A word that can be part of a name: capitalized, with digits, or in a script without case. */
const naming = (word: string) => capitalized(word) || withDigits(word) || !hasCase(word);
const wordsOf = (text: string) => [...text.matchAll(WORD)].map((match) => match[0]);

/** All name: naming words, with short connectors between them ("Bank of America"). */
function allName(words: readonly string[]): boolean {
  return (
    words.length > 0 &&
    naming(words[0]!) &&
    naming(words.at(-1)!) &&
    words.every((word) => naming(word) || CONNECTOR.test(word))
  );
}

/** Every line break a client may send (a context's lines are glossary lines). */
const LINE_BREAK = /\r\n?|[\u0085\u2028\u2029]/gu;
const SPACING_CONTROL = /[\t\v\f]/gu;
// ZWNJ and ZWJ (U+200C, U+200D) spell words in Persian and Indic scripts and join emoji; every other
// format character (bidi embeddings, overrides and isolates, zero-width spaces, tag characters,
// U+FEFF) is invisible, so it can only hide or reorder what a person reading the context sees.
const INVISIBLE = /(?![\n\u200C\u200D])[\p{Cc}\p{Cf}\p{Cs}]/gu;

/**
 * A context as every engine gets it (one place: `sessionContext`, and `glossaryFromContext` for its
 * direct callers): line breaks as `\n`, tabs and other spacing controls as spaces, and no other
 * control, format or lone surrogate characters.
 */
export function cleanContext(context: string): string {
  return context.replace(LINE_BREAK, "\n").replace(SPACING_CONTROL, " ").replace(INVISIBLE, "");
}

/**
 * A `source => target` line as a glossary entry, or undefined when it is none. Both sides must
 * be terms, not sentences: the source at most 60 characters and 3 words, or 6 when it is all name
 * ("Universidad Nacional Autónoma de México") and not all capitals (a shouted sentence is not a name);
 * the target `=` or empty (keep the term), or at most 60 characters and 8 words, with no `=>` of its
 * own.
 */
function explicitEntry(line: string): { source: string; target: string } | undefined {
  const match = EXPLICIT.exec(line.trim());
  if (!match) return undefined;
  const source = match[1]!.trim();
  const target = match[2]!.trim();
  const words = wordsOf(source);
  const shouted = source === source.toUpperCase() && hasCase(source);
  const sourceIsTerm =
    words.length > 0 &&
    source.length <= MAX_TERM_LENGTH &&
    (words.length <= MAX_PHRASE_WORDS || (words.length <= MAX_NAME_WORDS && allName(words) && !shouted));
  if (!sourceIsTerm) return undefined;
  if (target === "=" || target === "") return { source, target: source };
  const targetIsTerm =
    target.length <= MAX_TERM_LENGTH && wordsOf(target).length <= MAX_TARGET_WORDS && !target.includes("=>");
  return targetIsTerm ? { source, target } : undefined;
}

/** Terms of a context, in the order they appear, without repeats (by case-folded spelling). */
export function glossaryFromContext(raw: string | undefined): Glossary {
  const context = raw === undefined ? undefined : cleanContext(raw);
  if (!context?.trim()) return EMPTY_GLOSSARY;
  const found: GlossaryTerm[] = [];
  const add = (text: string, target: string | undefined) => {
    const term = text.trim().replace(/\s+/gu, " ");
    if (term.length < 2 && !/[^\p{Script=Latin}\p{Script=Cyrillic}\p{Script=Greek}]/u.test(term)) return;
    if (term.length > MAX_TERM_LENGTH) return;
    found.push({ text: term, target: target?.trim() || (target === undefined ? undefined : term) });
  };
  for (const line of context.split("\n")) {
    const entry = explicitEntry(line);
    if (entry) add(entry.source, entry.target);
    // A `=>` line that is no entry is an instruction or a sentence shaped like one: no terms.
    else if (!EXPLICIT.test(line.trim())) termsOfProse(line, add);
  }
  const seen = new Set<string>();
  const unique = found.filter((term) => {
    const key = term.text.toLocaleLowerCase();
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
  return {
    terms: unique.slice(0, MAX_GLOSSARY_TERMS),
    ignored: Math.max(0, unique.length - MAX_GLOSSARY_TERMS),
  };
}

function termsOfProse(line: string, add: (text: string, target: string | undefined) => void): void {
  for (const [, quoted] of line.matchAll(QUOTED)) add(quoted!, quoted!);
  const unquoted = line.replace(QUOTED, " ");
  for (const raw of unquoted.split(/[,;|•、，；]+/u)) {
    // "Topics: Kubernetes": what follows a label.
    const item = raw
      .slice(raw.lastIndexOf(":") + 1)
      .trim()
      .replace(/[.!?]+$/u, "");
    const words = wordsOf(item);
    if (words.length === 0) continue;
    if (words.length > MAX_ITEM_WORDS || /[.!?]\s/u.test(item)) {
      for (const name of namesInProse(item, true)) add(name, name);
      continue;
    }
    // A list item: a name when all of it names ("Anneliese Brandt", "K8s", "東京タワー"); otherwise a
    // phrase for recognition ("machine learning", "the Rust roadmap") and the names in it ("Rust").
    if (allName(words)) add(item, item);
    else {
      add(item, undefined);
      for (const name of namesInProse(item, false)) add(name, name);
    }
  }
}

/** Abbreviated titles: the full stop after them does not end a sentence ("Dr. Baker"). */
const TITLES = new Set([
  "dr",
  "mr",
  "mrs",
  "ms",
  "prof",
  "st",
  "mt",
  "jr",
  "sr",
  "sen",
  "rep",
  "gen",
  "col",
  "capt",
]);

/**
 * Names in prose: runs of capitalized words, acronyms and words with digits. A capitalized word that
 * opens a sentence alone is a name only if the context capitalizes it elsewhere too ("Quarterly
 * review with …" is not a name; list it or quote it to make it one).
 */
function namesInProse(prose: string, opensWithSentence: boolean): string[] {
  const words = [...prose.matchAll(WORD)].map((match) => ({
    text: match[0],
    start: match.index,
    end: match.index + match[0].length,
  }));
  const opensSentence = words.map((word, i) => {
    if (i === 0) return opensWithSentence;
    const previous = words[i - 1]!;
    return /[.!?]/u.test(prose.slice(previous.end, word.start)) && !TITLES.has(previous.text.toLowerCase());
  });
  const elsewhere = new Set(
    words.filter((word, i) => !opensSentence[i] && capitalized(word.text)).map((word) => word.text),
  );
  const names: string[] = [];
  let run: number[] = [];
  const close = () => {
    if (run.length === 0) return;
    const [first] = run as [number];
    const firstWord = words[first]!;
    const lone = run.length === 1;
    const doubtful = lone && opensSentence[first] && !acronym(firstWord.text) && !withDigits(firstWord.text);
    if (!doubtful || elsewhere.has(firstWord.text))
      names.push(prose.slice(firstWord.start, words[run.at(-1)!]!.end));
    run = [];
  };
  words.forEach((word, i) => {
    const naming = capitalized(word.text) || withDigits(word.text);
    if (!naming || opensSentence[i]) close();
    if (naming) run.push(i);
  });
  close();
  return names;
}

/** A term translation carries through: kept verbatim or replaced by its target. */
export type TranslatedTerm = GlossaryTerm & { readonly target: string };

/** The terms translation must carry through. */
export function translationTerms(glossary: Glossary): readonly TranslatedTerm[] {
  return glossary.terms.filter((term): term is TranslatedTerm => term.target !== undefined);
}

/** A session's context as the engines use it: the free text (for engines that read it) and its terms. */
export interface SessionContext {
  readonly text: string;
  readonly glossary: Glossary;
}

export const NO_CONTEXT: SessionContext = { text: "", glossary: EMPTY_GLOSSARY };

/** The session context from what a client gave (cleaned: `cleanContext`). */
export function sessionContext(given: string | undefined): SessionContext {
  const text = given === undefined ? "" : cleanContext(given);
  return text.trim() ? { text, glossary: glossaryFromContext(text) } : NO_CONTEXT;
}

/** `text` as a literal inside a regular expression. */
export const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/gu, "\\$&");

/**
 * A pattern that finds the terms in text: whole words only, longest first, any case and spacing (a
 * recognizer writes "kubernetes" for "Kubernetes").
 */
export function termPattern(terms: readonly GlossaryTerm[]): RegExp | undefined {
  if (terms.length === 0) return undefined;
  const alternatives = [...terms]
    .sort((a, b) => b.text.length - a.text.length)
    .map((term) => term.text.split(" ").map(escapeRegExp).join("\\s+"));
  return new RegExp(`(?<![\\p{L}\\p{N}])(?:${alternatives.join("|")})(?![\\p{L}\\p{N}])`, "giu");
}

/** The term an occurrence found by `termPattern` spells. */
export function termOf<T extends GlossaryTerm>(terms: readonly T[], occurrence: string): T | undefined {
  const key = occurrence.replace(/\s+/gu, " ").toLocaleLowerCase();
  return terms.find((term) => term.text.toLocaleLowerCase() === key);
}

/**
 * Whether a recognized word may take the term's spelling wherever it occurs: a name of several words,
 * an acronym, a word with digits or inner capitals ("Hope Walker", "OKRs", "K8s", "iPhone"). A lone
 * capitalized word may be an ordinary one too ("Reading", "Apple"): recognizers that know which words
 * they took from the glossary spell those themselves.
 */
function distinctive(term: GlossaryTerm): boolean {
  return term.text.includes(" ") || /\p{N}/u.test(term.text) || /.\p{Lu}/u.test(term.text);
}

/** Recognized text with the glossary's spelling of its distinctive terms ("okrs" → "OKRs"). */
export function spellAsGlossary(text: string, glossary: Glossary): string {
  const terms = glossary.terms.filter(distinctive);
  const pattern = termPattern(terms);
  if (!pattern) return text;
  return text.replace(pattern, (occurrence) => termOf(terms, occurrence)?.text ?? occurrence);
}
