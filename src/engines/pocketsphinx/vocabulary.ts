import { readFile } from "node:fs/promises";
import type { Hypothesis } from "../../core/contracts.js";
import type { Glossary } from "../../core/glossary.js";
import { pronounce } from "./pronunciation.js";

/** Pronunciations remembered across sessions (a word's pronunciation does not change). */
const MAX_CACHED = 4096;

/** The words a glossary adds to a decoder, and how the hypothesis spells them. */
export interface GlossaryWords {
  /** Identifies the set of added words: decoders are kept per key ("" when none is added). */
  readonly key: string;
  /** Dictionary word (lower case) → CMU phones. */
  readonly words: ReadonlyMap<string, string>;
  /** Dictionary word → the glossary's spelling ("schoeffer" → "Schoeffer"). */
  readonly spellings: ReadonlyMap<string, string>;
}

const NONE: GlossaryWords = { key: "", words: new Map(), spellings: new Map() };

/**
 * Which words of a session's glossary the dictionary lacks, with pronunciations from eSpeak NG
 * (pronunciation.ts). PocketSphinx cannot recognize a word outside its dictionary at all, so a name
 * from the context becomes recognizable only this way; its language-model probability is the one
 * `ps_add_word` gives every added word (the API has no per-word boost).
 */
export class GlossaryVocabulary {
  private readonly cache = new Map<string, string | null>();

  private constructor(
    private readonly known: ReadonlySet<string>,
    private readonly espeakBinary: string,
  ) {}

  /** Reads the dictionary's words (`word` and `word(2)` lines) once. */
  static async load(dictionary: string, espeakBinary: string): Promise<GlossaryVocabulary> {
    const known = new Set<string>();
    for (const line of (await readFile(dictionary, "utf8")).split("\n")) {
      const word = line.slice(0, line.indexOf(" ")).replace(/\(\d+\)$/u, "");
      if (word) known.add(word);
    }
    return new GlossaryVocabulary(known, espeakBinary);
  }

  async wordsFor(glossary: Glossary | undefined): Promise<GlossaryWords> {
    if (!glossary || glossary.terms.length === 0) return NONE;
    const spelled = new Map<string, string>();
    for (const term of glossary.terms) {
      for (const word of term.text.match(/[\p{L}']+/gu) ?? []) {
        const entry = word.normalize("NFD").replace(/\p{M}/gu, "").toLowerCase();
        if (/^[a-z][a-z']*$/u.test(entry) && !this.known.has(entry)) spelled.set(entry, word);
      }
    }
    if (spelled.size === 0) return NONE;
    await this.pronounceMissing([...spelled.keys()]);
    const words = new Map<string, string>();
    for (const entry of spelled.keys()) {
      const phones = this.cache.get(entry);
      if (phones) words.set(entry, phones);
    }
    if (words.size === 0) return NONE;
    const key = [...words.keys()].sort().join(" ");
    return { key, words, spellings: new Map([...words.keys()].map((entry) => [entry, spelled.get(entry)!])) };
  }

  private async pronounceMissing(entries: readonly string[]): Promise<void> {
    const missing = entries.filter((entry) => !this.cache.has(entry));
    if (missing.length === 0) return;
    const found = await pronounce(this.espeakBinary, missing);
    for (const entry of missing) {
      if (this.cache.size >= MAX_CACHED) this.cache.delete(this.cache.keys().next().value!);
      this.cache.set(entry, found.get(entry) ?? null);
    }
  }
}

/** A hypothesis with the words a glossary added spelled as the glossary spells them. */
export function spellAdded(hypothesis: Hypothesis, spellings: ReadonlyMap<string, string>): Hypothesis {
  if (spellings.size === 0) return hypothesis;
  const spell = (word: string) => spellings.get(word) ?? word;
  return {
    ...hypothesis,
    text: hypothesis.text.split(" ").map(spell).join(" "),
    words: hypothesis.words.map((word) =>
      spellings.has(word.word) ? { ...word, word: spell(word.word) } : word,
    ),
  };
}
