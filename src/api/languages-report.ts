import type { EngineRegistry } from "../engines/routing/registry.js";
import { recognitionTier, servedDubbingLanguages } from "../engines/routing/languages.js";

/**
 * `GET /v1/languages` as the wire has it (snake_case): what the configured engines serve, from the
 * registry's answers. Beyond the spec's engines report: the dubbing languages served and the
 * recognition tier.
 */
export function languagesReport(registry: EngineRegistry) {
  return {
    recognition: registry.recognitionLanguages().map((language) => {
      const engine = registry.recognizer(language)!;
      return {
        language,
        engine: engine.info.id,
        partial_results: engine.capabilities.partialResults,
        word_timings: engine.capabilities.wordTimings,
      };
    }),
    translation: registry.translationPairs(),
    voice_output: registry.voiceLanguages().map((language) => ({
      language,
      engine: registry.synthesizer(language)!.info.id,
    })),
    /** The recognizer that identifies languages (`sourceLanguage=auto`, two-way), if any. */
    language_identification: registry.languageIdentifier()?.info.id ?? null,
    engines: registry.engines(),
    dubbing: servedDubbingLanguages(registry),
    recognition_tier: recognitionTier(registry),
    voice_clone: voiceCloneReport(registry),
  };
}

/**
 * What clone voices speak with (rooms' `voice_type=clone`, sessions' `voiceType=clone`, dubbing's
 * `voice=clone`): `tone-color` (each speaker's own voice, with the converter engine), `library`
 * (the nearest library voice: no tone colour model) or `off` (VOICE_CLONE=off).
 */
export function voiceCloneReport(registry: EngineRegistry) {
  return { mode: registry.voiceClone, engine: registry.toneColor?.info.id ?? null };
}
