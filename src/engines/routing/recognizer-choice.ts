import type { AsrEngine, Hypothesis, LanguageCode } from "../../core/contracts.js";
import type { EngineRegistry } from "./registry.js";

/**
 * The recognizer of a language, or for "auto" the one that identifies languages; with `candidates`,
 * its identification is restricted to them (see `amongCandidates`).
 */
export function recognizerFor(
  registry: EngineRegistry,
  language: LanguageCode | "auto",
  candidates?: readonly LanguageCode[],
  served?: (engine: AsrEngine) => void,
): AsrEngine | undefined {
  if (language !== "auto") return registry.recognizer(language, served);
  const identifier = registry.languageIdentifier();
  return identifier && candidates ? amongCandidates(identifier, candidates) : identifier;
}

/**
 * Identification restricted to `candidates`: streams are opened with them, and a language outside
 * them (from an engine that ignores candidates) is taken to be the first candidate, as the engine
 * contract says, so a session never reports a language it did not ask for.
 */
function amongCandidates(engine: AsrEngine, candidates: readonly LanguageCode[]): AsrEngine {
  const among = (hypothesis: Hypothesis): Hypothesis =>
    hypothesis.language === undefined || candidates.includes(hypothesis.language)
      ? hypothesis
      : { ...hypothesis, language: candidates[0]! };
  return {
    info: engine.info,
    capabilities: engine.capabilities,
    close: () => engine.close(),
    async createStream(options) {
      const stream = await engine.createStream({ ...options, candidates });
      return {
        write: (pcm) => stream.write(pcm),
        partial: async () => among(await stream.partial()),
        finish: async () => among(await stream.finish()),
        abort: () => stream.abort(),
      };
    },
  };
}
