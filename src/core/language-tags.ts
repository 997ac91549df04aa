import type { LanguageCode } from "./contracts.js";

/**
 * Language tags: one parser for every surface (real-time sessions, rooms, dubbing, the CLI) and
 * for the engines. Apart from src/engines/routing/languages.ts (what the configured engines serve), which depends
 * on the engine registry: engines parse tags too.
 */

/** Why a tag is not a language code (there is one reason today; the union leaves room for more). */
export interface TagRejection {
  readonly kind: "malformed";
  readonly tag: string;
}

export type ParsedTag =
  | { readonly ok: true; readonly language: LanguageCode }
  | { readonly ok: false; readonly rejection: TagRejection };

/**
 * A BCP 47 tag ("en", "en-US", "es-MX", "zh-Hant-TW"; `_` is read as `-`, so "pt_BR" works too) →
 * its primary language subtag, lower-case and canonical (ISO 639-1 where one exists: "eng" → "en",
 * "iw" → "he"). Only 2- or 3-letter primary subtags are language codes: "english" is not.
 */
export function parseLanguageTag(tag: string): ParsedTag {
  const rejected: ParsedTag = { ok: false, rejection: { kind: "malformed", tag } };
  if (!/^[A-Za-z]{2,3}(?:[-_]|$)/u.test(tag)) return rejected;
  let locale: Intl.Locale;
  try {
    locale = new Intl.Locale(tag.replaceAll("_", "-"));
  } catch {
    return rejected;
  }
  const language = locale.language;
  if (!/^[a-z]{2,3}$/u.test(language)) return rejected;
  return { ok: true, language };
}

/** Whether `value` is already a canonical primary language code ("en", not "EN", "en-US" or "eng"). */
export function isLanguageCode(value: string): boolean {
  const parsed = parseLanguageTag(value);
  return parsed.ok && parsed.language === value;
}

const ENGLISH_NAMES = new Intl.DisplayNames(["en"], { type: "language", fallback: "code" });

/**
 * The English name of `code` ("de" → "German"): what people read (listings, the recognition tier)
 * and what LLM prompts name; the code itself when ICU does not know it or it is not a tag.
 */
export function languageName(code: string): string {
  try {
    return ENGLISH_NAMES.of(code) ?? code;
  } catch {
    return code;
  }
}
