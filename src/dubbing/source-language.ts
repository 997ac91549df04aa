/**
 * Which source languages a dubbing request may be in: the named one if it can be recognised and
 * translated to the target, or for "auto" every recognisable language that can. Separate so it can
 * be checked before any media work and later replaced by the service's shared language rules.
 */
import type { EngineRegistry } from "../engines/registry.js";
import type { LanguageCode } from "../engines/types.js";
import { UnsupportedLanguageError } from "./errors.js";

export function sourceCandidates(
  registry: EngineRegistry,
  sourceLang: LanguageCode | "auto",
  targetLang: LanguageCode,
): LanguageCode[] {
  if (sourceLang !== "auto") {
    if (!registry.recognizer(sourceLang))
      throw new UnsupportedLanguageError(`no speech recognition for "${sourceLang}"`);
    if (!registry.translationRoute(sourceLang, targetLang)) {
      throw new UnsupportedLanguageError(`no translation from "${sourceLang}" to "${targetLang}"`);
    }
    return [sourceLang];
  }
  const recognisable = registry.recognitionLanguages();
  if (recognisable.length === 0) throw new UnsupportedLanguageError("no speech recognition is configured");
  const candidates = recognisable.filter((lang) => registry.translationRoute(lang, targetLang) !== undefined);
  if (candidates.length === 0) {
    throw new UnsupportedLanguageError(
      `none of the recognised languages (${recognisable.join(", ")}) can be translated to "${targetLang}"`,
    );
  }
  return candidates;
}
