/**
 * Parses `espeak-ng --voices` and maps eSpeak NG's language voices to ISO 639-1 codes.
 *
 * Default locale per code (used unless a voice's accent asks for another one):
 *   - en → en-us (largest speaker base; en-gb, en-029, Scottish, … stay available as accents);
 *   - pt → pt-br (Brazil has ~80 % of speakers; European "pt" is an accent);
 *   - es → es (Spain, matching the SVOX Pico lingware; es-419 is an accent);
 *   - fr → fr-fr; zh → cmn-latn-pinyin only (Debian 1.51's `cmn` voice reads Han characters as
 *     English letter names, and Cantonese `yue` is not Mandarin);
 *   - any other code → the voice whose language is exactly the code, else the best-priority voice
 *     listing the code among its other languages (e.g. nb also serves "no").
 * Languages whose primary subtag is not an ISO 639-1 code (yue, hak, grc, jbo, Pyash "py", …) are
 * not offered.
 */

export interface EspeakVoiceEntry {
  /** eSpeak language name, lower case (e.g. "en-gb-scotland"); this is what accent locales name. */
  readonly language: string;
  /** Voice file relative to espeak-ng-data/voices (e.g. "gmw/en-GB-scotland"); unambiguous for `-v`. */
  readonly file: string;
  readonly name: string;
  /** Lower is preferred, as in eSpeak NG itself. */
  readonly priority: number;
  /** Other languages this voice serves, with their priority (e.g. cmn-latn-pinyin → zh 5). */
  readonly otherLanguages: readonly { readonly language: string; readonly priority: number }[];
}

interface LocaleChoice {
  readonly prefer: readonly string[];
  /** When set, only the preferred locales may serve the code. */
  readonly only?: boolean;
}

const LOCALE_CHOICES: Readonly<Record<string, LocaleChoice>> = {
  en: { prefer: ["en-us", "en-gb"] },
  pt: { prefer: ["pt-br", "pt"] },
  es: { prefer: ["es", "es-419"] },
  fr: { prefer: ["fr-fr", "fr"] },
  zh: { prefer: ["cmn-latn-pinyin"], only: true },
};

const OTHER_LANGUAGE = /\(([^\s()]+)\s+(\d+)\)/g;

/** Parses the table printed by `espeak-ng --voices` (header line, then one voice per line). */
export function parseVoiceList(output: string): EspeakVoiceEntry[] {
  const entries: EspeakVoiceEntry[] = [];
  for (const line of output.split("\n")) {
    // Columns: Pty Language Age/Gender VoiceName File (other languages). Names use "_" for spaces.
    const match = /^\s*(\d+)\s+(\S+)\s+\S+\s+(\S+)\s+(\S+)\s*(.*)$/.exec(line);
    if (!match) continue;
    const [, priority, language, name, file, rest] = match;
    const otherLanguages = [...rest!.matchAll(OTHER_LANGUAGE)].map((m) => ({
      language: m[1]!.toLowerCase(),
      priority: Number(m[2]),
    }));
    entries.push({
      language: language!.toLowerCase(),
      file: file!,
      name: name!,
      priority: Number(priority),
      otherLanguages,
    });
  }
  return entries;
}

// Two letters are not enough: eSpeak NG's constructed language Pyash is "py", which ISO 639-1 lacks.
// ICU knows every ISO 639-1 code; without full ICU data any two-letter subtag is accepted.
const languageNames = new Intl.DisplayNames(["en"], { type: "language", fallback: "none" });
const icuKnowsLanguages = languageNames.of("en") !== undefined;

/** ISO 639-1 code of an eSpeak language name, or undefined when its primary subtag has none. */
export function isoCodeOf(language: string): string | undefined {
  const primary = language.split("-")[0]!.toLowerCase();
  if (primary === "cmn") return "zh";
  if (!/^[a-z]{2}$/.test(primary)) return undefined;
  return !icuKnowsLanguages || languageNames.of(primary) !== undefined ? primary : undefined;
}

/** Chooses the default voice for every ISO 639-1 code eSpeak NG can speak. */
export function defaultLocales(entries: readonly EspeakVoiceEntry[]): Map<string, EspeakVoiceEntry> {
  const candidates = new Map<string, { entry: EspeakVoiceEntry; rank: number }[]>();
  const add = (code: string | undefined, entry: EspeakVoiceEntry, rank: number): void => {
    if (!code) return;
    const list = candidates.get(code) ?? [];
    list.push({ entry, rank });
    candidates.set(code, list);
  };
  for (const entry of entries) {
    const own = isoCodeOf(entry.language);
    // A voice whose language is exactly the code outranks region variants and aliases.
    add(own, entry, entry.language === own ? 0 : 1000 + entry.priority);
    for (const other of entry.otherLanguages) {
      const code = isoCodeOf(other.language);
      if (code !== own) add(code, entry, 2000 + other.priority);
    }
  }

  const result = new Map<string, EspeakVoiceEntry>();
  for (const [code, list] of candidates) {
    const choice = LOCALE_CHOICES[code];
    const preferred = choice?.prefer
      .map((locale) => list.find((c) => c.entry.language === locale))
      .find((c) => c !== undefined);
    if (preferred) {
      result.set(code, preferred.entry);
    } else if (!choice?.only) {
      const best = [...list].sort(
        (a, b) => a.rank - b.rank || a.entry.language.localeCompare(b.entry.language),
      )[0];
      if (best) result.set(code, best.entry);
    }
  }
  return new Map([...result].sort(([a], [b]) => a.localeCompare(b)));
}
