import { translateAlong, type EngineRegistry } from "./engines/registry.js";
import type { AsrEngine, LanguageCode, MtEngine, Voice } from "./engines/types.js";
import type { TranslationCall } from "./pipeline/translation-pipeline.js";
import { defaultVoice } from "./voices/library.js";

/**
 * The one speech plan of every surface (real-time sessions, rooms, dubbing): which recognizer
 * hears a language, which translation routes carry it and with what context, and which voice
 * speaks when the request names none. Surfaces check a request with `src/languages.ts`, then take
 * their engines from here, so an engine gets the same context whichever surface calls it.
 */

/** A library voice, or `"clone"`: each speaker gets the library voice measured nearest to them. */
export type VoiceChoice = Voice | "clone";

/**
 * Per surface, the voice type used when the request names none: the real-time spec's `voiceType`
 * default (male) and the rooms spec's `voice_type` default (clone). Dubbing has no voice
 * parameter; until its speakers are matched voice by voice it speaks the female default.
 */
export const DEFAULT_VOICE_TYPES = { realtime: "male", rooms: "clone", dubbing: "female" } as const;

/** The voice of a voice type: the library default of a gender, or clone. */
export function voiceOf(type: "male" | "female"): Voice;
export function voiceOf(type: "male" | "female" | "clone"): VoiceChoice;
export function voiceOf(type: "male" | "female" | "clone"): VoiceChoice {
  return type === "clone" ? "clone" : defaultVoice(type);
}

/** The recognizer of a language, or for "auto" the one that identifies languages. */
export function recognizerFor(
  registry: EngineRegistry,
  language: LanguageCode | "auto",
): AsrEngine | undefined {
  return language === "auto" ? registry.languageIdentifier() : registry.recognizer(language);
}

/**
 * Translation history, the context policy every surface shares: the last few sentences of the same
 * stream and their translations go with each request (engines that declare `usesContext` use them).
 */
export const HISTORY_SENTENCES = 3;

export class TranslationHistory {
  private readonly pairs: { source: string; translation: string }[] = [];

  record(source: string, translation: string): void {
    if (translation === "") return;
    this.pairs.push({ source, translation });
    if (this.pairs.length > HISTORY_SENTENCES) this.pairs.shift();
  }

  get recent(): readonly { readonly source: string; readonly translation: string }[] {
    return [...this.pairs];
  }
}

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

/** Translation into `targetLanguage` from whatever language each call names. */
export function translatorFor(
  registry: EngineRegistry,
  targetLanguage: LanguageCode,
  labels: LanguageLabels = {},
): Translator {
  const names = { fromLabel: labels.sourceLanguageLabel, toLabel: labels.targetLanguageLabel };
  const routesFrom = (from: LanguageCode) => registry.translationRoutes(from, targetLanguage);
  // Streaming applies when the preferred route is one streaming engine.
  const streamerFor = (from: LanguageCode): MtEngine | undefined => {
    const [route] = routesFrom(from);
    const engine = route?.hops.length === 1 ? route.hops[0]!.engine : undefined;
    return engine?.capabilities.streaming && engine.translateStream ? engine : undefined;
  };
  const translate = async (call: TranslationCall, signal?: AbortSignal): Promise<string> => {
    const routes = routesFrom(call.from);
    if (routes.length === 0) throw new Error(`no translation from "${call.from}" to "${targetLanguage}"`);
    return translateAlong(routes, { ...call, ...names }, signal);
  };
  return {
    translate,
    /**
     * Streams from the preferred engine when it can; if it fails before producing anything, the
     * remaining routes are tried as `translateAlong` would (a remote LLM down, Apertium behind it).
     */
    async *translateStream(call, signal) {
      const routes = routesFrom(call.from);
      const streamer = streamerFor(call.from);
      if (!streamer) {
        yield await translate(call, signal);
        return;
      }
      let produced = false;
      try {
        const request = { ...call, ...names, to: targetLanguage };
        for await (const partial of streamer.translateStream!(request, signal)) {
          produced = true;
          yield partial;
        }
        return;
      } catch (error) {
        if (produced || routes.length < 2 || signal.aborted) throw error;
      }
      yield await translateAlong(routes.slice(1), { ...call, ...names }, signal);
    },
  };
}
