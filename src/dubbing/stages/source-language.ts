/**
 * Which source languages a dubbing request may be in: the named one if it can be recognized and
 * translated to the target, or for "auto" every dubbing language (the spec's list bounds what
 * `source_lang` can say) that can be recognized and translated. Separate so it can be checked
 * before any media work; the rules themselves are the service's (src/engines/routing/languages.ts).
 */
import type { EngineRegistry } from "../../engines/routing/registry.js";
import type { LanguageCode } from "../../core/contracts.js";
import { isDubbingLanguage, translatableSources, unservable } from "../../engines/routing/languages.js";
import { UnsupportedLanguageError } from "../media/errors.js";

export function sourceCandidates(
  registry: EngineRegistry,
  sourceLang: LanguageCode | "auto",
  targetLang: LanguageCode,
): LanguageCode[] {
  if (sourceLang !== "auto") {
    const problem = unservable(registry, [
      { kind: "recognition", language: sourceLang },
      { kind: "translation", from: sourceLang, to: targetLang },
    ]);
    if (problem?.kind === "recognition")
      throw new UnsupportedLanguageError(`no speech recognition for "${sourceLang}"`);
    if (problem) throw new UnsupportedLanguageError(`no translation from "${sourceLang}" to "${targetLang}"`);
    return [sourceLang];
  }
  const recognizable = registry.recognitionLanguages();
  if (recognizable.length === 0) throw new UnsupportedLanguageError("no speech recognition is configured");
  const candidates = translatableSources(registry, targetLang).filter(isDubbingLanguage);
  if (candidates.length === 0) {
    throw new UnsupportedLanguageError(
      `none of the recognized dubbing languages (${recognizable.filter(isDubbingLanguage).join(", ")}) ` +
        `can be translated to "${targetLang}"`,
    );
  }
  return candidates;
}
