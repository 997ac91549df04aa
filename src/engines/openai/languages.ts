/**
 * Language names ↔ ISO 639-1 codes for the remote engines: MT prompts name languages in English, and
 * transcription servers report the language they heard either as a code ("en") or, like Whisper's
 * `verbose_json`, as a lower-case English name ("english").
 */
import type { LanguageCode } from "../../core/contracts.js";

const NAMES = new Intl.DisplayNames(["en"], { type: "language", fallback: "none" });

/**
 * Names Whisper (and servers built on it) use that differ from ICU's English names, and languages
 * without an ISO 639-1 code of their own mapped to their macrolanguage.
 */
const ALIASES: Readonly<Record<string, LanguageCode>> = {
  bengali: "bn",
  burmese: "my",
  cantonese: "zh",
  castilian: "es",
  flemish: "nl",
  haitian: "ht",
  letzeburgesch: "lb",
  mandarin: "zh",
  moldavian: "ro",
  moldovan: "ro",
  nynorsk: "nn",
  oriya: "or",
  panjabi: "pa",
  pushto: "ps",
  sinhalese: "si",
  slovene: "sl",
  tagalog: "tl",
  valencian: "ca",
  yue: "zh",
  fil: "tl",
};

function normalize(name: string): string {
  return name
    .normalize("NFD")
    .replace(/\p{M}/gu, "")
    .toLowerCase()
    .replace(/[\s_]+/gu, " ")
    .trim();
}

let byName: Map<string, LanguageCode> | undefined;

/** English name → code for every two-letter code ICU can name (built once, on first use). */
function nameTable(): Map<string, LanguageCode> {
  if (byName) return byName;
  const table = new Map<string, LanguageCode>();
  for (let a = 97; a <= 122; a++) {
    for (let b = 97; b <= 122; b++) {
      const code = String.fromCharCode(a, b);
      const canonical = Intl.getCanonicalLocales(code)[0] ?? code;
      const name = NAMES.of(canonical);
      if (!name) continue;
      // Deprecated codes (iw, in, jw) canonicalise to their successors; "tl" canonicalises to "fil".
      const key = normalize(name);
      if (!table.has(key)) table.set(key, /^[a-z]{2}$/u.test(canonical) ? canonical : code);
    }
  }
  for (const [alias, code] of Object.entries(ALIASES)) if (!table.has(alias)) table.set(alias, code);
  byName = table;
  return table;
}

/**
 * The ISO 639-1 code of a language as a server reported it: a name ("english", "Castilian") or a tag
 * ("en", "EN-us", "eng", "iw"). Undefined when it names no language with a two-letter code.
 */
export function languageCodeOf(reported: string | null | undefined): LanguageCode | undefined {
  if (typeof reported !== "string") return undefined;
  const text = reported.trim();
  if (text === "") return undefined;
  if (/^[a-z]{2,3}(?:[-_][a-z0-9]{2,8})*$/iu.test(text)) {
    let primary: string | undefined;
    try {
      primary = Intl.getCanonicalLocales(text.replace(/_/gu, "-"))[0]?.split("-")[0];
    } catch {
      primary = undefined;
    }
    if (primary && /^[a-z]{2}$/u.test(primary)) return primary;
    if (primary && ALIASES[primary]) return ALIASES[primary];
    // A three-letter word may still be a name ("ewe"); fall through to the name table.
  }
  return nameTable().get(normalize(text));
}

/** A configured language list, lower-cased and de-duplicated; it must not be empty. */
export function configuredLanguages(kind: string, languages: readonly LanguageCode[]): LanguageCode[] {
  const list = [...new Set((languages ?? []).map((code) => code.trim().toLowerCase()).filter(Boolean))];
  if (list.length === 0) throw new Error(`remote ${kind}: at least one language must be configured`);
  return list;
}
