import type { LanguageCode, MtEngine, TranslationCall } from "../../core/contracts.js";
import { termPattern, translationTerms } from "../../core/glossary.js";
import { translateAlong, type EngineRegistry, type Served, type TranslationRoute } from "./registry.js";

/** The client's names for the languages (`sourceLanguageLabel` / `targetLanguageLabel`). */
export interface LanguageLabels {
  readonly sourceLanguageLabel?: string;
  readonly targetLanguageLabel?: string;
}

export interface Translator {
  /** One translation along the preferred route, falling back to the others. */
  translate(call: TranslationCall, signal?: AbortSignal): Promise<string>;
  /** The same, as it grows, from the preferred engine when it streams (an LLM, typically). */
  translateStream(call: TranslationCall, signal: AbortSignal): AsyncIterable<string>;
}

/**
 * Translation into `targetLanguage` from whatever language each call names; `served` is told the
 * route that translated each call (the one that streamed: at its first partial).
 */
export function translatorFor(
  registry: EngineRegistry,
  targetLanguage: LanguageCode,
  labels: LanguageLabels = {},
  served?: Served<TranslationRoute>,
): Translator {
  const names = { fromLabel: labels.sourceLanguageLabel, toLabel: labels.targetLanguageLabel };
  const routesFrom = (from: LanguageCode) => registry.translationRoutes(from, targetLanguage);
  // Streaming applies when the preferred route is one streaming engine.
  // Not when the engine cannot read context and the text holds glossary terms: translate() carries
  // them through as placeholders, which a partial translation could show.
  const streamerFor = (call: TranslationCall): MtEngine | undefined => {
    const [route] = routesFrom(call.from);
    const engine = route?.hops.length === 1 ? route.hops[0]!.engine : undefined;
    if (!engine?.capabilities.streaming || !engine.translateStream) return undefined;
    return engine.capabilities.usesContext || !holdsTerms(call) ? engine : undefined;
  };
  const translate = async (call: TranslationCall, signal?: AbortSignal): Promise<string> => {
    const routes = routesFrom(call.from);
    if (routes.length === 0) throw new Error(`no translation from "${call.from}" to "${targetLanguage}"`);
    return translateAlong(routes, { ...call, ...names }, signal, served);
  };
  return {
    translate,
    /**
     * Streams from the preferred engine when it can; if it fails before producing anything, the
     * remaining routes are tried as `translateAlong` would (a remote LLM down, Apertium behind it).
     */
    async *translateStream(call, signal) {
      const routes = routesFrom(call.from);
      const streamer = streamerFor(call);
      if (!streamer) {
        yield await translate(call, signal);
        return;
      }
      let produced = false;
      try {
        const request = { ...call, ...names, to: targetLanguage };
        for await (const partial of streamer.translateStream!(request, signal)) {
          if (!produced) served?.(routes[0]!);
          produced = true;
          yield partial;
        }
        return;
      } catch (error) {
        if (produced || routes.length < 2 || signal.aborted) throw error;
      }
      yield await translateAlong(routes.slice(1), { ...call, ...names }, signal, served);
    },
  };
}

/** Whether the text of a call holds a term of its glossary that translation must carry through. */
function holdsTerms(call: TranslationCall): boolean {
  const pattern = call.glossary && termPattern(translationTerms(call.glossary));
  return pattern ? pattern.test(call.text) : false;
}
