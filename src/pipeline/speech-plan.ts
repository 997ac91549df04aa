import {
  translateAlong,
  type EngineRegistry,
  type Served,
  type TranslationRoute,
} from "../engines/routing/registry.js";
import type { AsrEngine, Hypothesis, LanguageCode, MtEngine, Voice } from "../core/contracts.js";
import type { Requirement } from "../engines/routing/languages.js";
import type { TranslationCall } from "./frames.js";
import { defaultVoice, voiceById } from "../voices/library.js";

/**
 * The one speech plan of every surface (real-time sessions, rooms, dubbing): which recognizer
 * hears a language, which translation routes carry it and with what context, and which voice
 * speaks when the request names none. Surfaces check a request with `src/engines/routing/languages.ts`, then take
 * their engines from here, so an engine gets the same context whichever surface calls it.
 */

/**
 * A library voice, or one matched to each speaker (src/speakers/voice-choice.ts): `"clone"` (rooms; a
 * gender default until the match) or `{ auto }` (`voiceId=auto`; the `auto` voice until the match,
 * and the matched voice is reported).
 */
export type VoiceChoice = Voice | "clone" | { readonly auto: Voice };

/**
 * Per surface, the voice type used when the request names none: the real-time spec's `voiceType`
 * default (male) and the rooms spec's `voice_type` default (clone). Dubbing's `voice` (beyond the
 * spec) defaults to "auto": each speaker in the voice matched to theirs.
 */
export const DEFAULT_VOICE_TYPES = { realtime: "male", rooms: "clone", dubbing: "auto" } as const;

/** A dubbing job's `voice`: "auto", a gender's default voice or a library id; undefined if none. */
export function dubbingVoice(value: string): Voice | "auto" | undefined {
  if (value === "auto") return "auto";
  if (value === "female" || value === "male") return defaultVoice(value);
  return voiceById(value);
}

/** The voice of a voice type: the library default of a gender, or clone. */
export function voiceOf(type: "male" | "female"): Voice;
export function voiceOf(type: "male" | "female" | "clone"): Voice | "clone";
export function voiceOf(type: "male" | "female" | "clone"): Voice | "clone" {
  return type === "clone" ? "clone" : defaultVoice(type);
}

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

/** The languages of a live speech session (WebSocket sessions and rooms), as the client asked. */
export interface SessionLanguages extends LanguageLabels {
  /** The spoken language, or "auto": identified per utterance. */
  readonly sourceLanguage: LanguageCode | "auto";
  readonly targetLanguage: LanguageCode;
  /** With "auto": the languages identification chooses among (`languageHints`); absent: any. */
  readonly languageHints?: readonly LanguageCode[];
  /** `sourceLanguage` and `targetLanguage` (both named) are a pair: each side into the other. */
  readonly twoWay?: boolean;
}

/** How a live session listens and what it translates each utterance into. */
export interface LanguagePlan {
  /** What the recognizer is opened with: a language, or "auto" (identified per utterance). */
  readonly listen: LanguageCode | "auto";
  /** With "auto": the languages identification is restricted to; undefined: any. */
  readonly candidates?: readonly LanguageCode[];
  /** Every language an utterance can be translated into, with the labels of that direction. */
  readonly directions: readonly { readonly to: LanguageCode; readonly labels: LanguageLabels }[];
  /** What an utterance heard in `language` is translated into; undefined: it is passed through. */
  targetFor(language: LanguageCode): LanguageCode | undefined;
}

/**
 * The one rule for which language each utterance of a live session goes into. Two-way: each side
 * of the pair into the other (the labels swap with the direction). "auto": into the target, and an
 * utterance identified as already in the target is passed through. A named source: always into the
 * target (even the same language: the line is then revoiced).
 */
export function languagePlan(session: SessionLanguages): LanguagePlan {
  const { sourceLanguage: source, targetLanguage: target } = session;
  const labels = {
    sourceLanguageLabel: session.sourceLanguageLabel,
    targetLanguageLabel: session.targetLanguageLabel,
  };
  if (session.twoWay) {
    if (source === "auto") throw new Error("a two-way session names both of its languages");
    const swapped = {
      sourceLanguageLabel: labels.targetLanguageLabel,
      targetLanguageLabel: labels.sourceLanguageLabel,
    };
    return {
      listen: "auto",
      candidates: [source, target],
      directions: [
        { to: target, labels },
        { to: source, labels: swapped },
      ],
      targetFor: (language) => (language === target ? source : target),
    };
  }
  const hints = source === "auto" && session.languageHints?.length ? session.languageHints : undefined;
  return {
    listen: source,
    ...(hints ? { candidates: hints } : {}),
    directions: [{ to: target, labels }],
    targetFor: (language) => (source === "auto" && language === target ? undefined : target),
  };
}

/**
 * What a plan needs of the engines, in the order problems are reported: recognition (identifying
 * each candidate), voice output for every direction (`speaks`), then translation of every language
 * that can be heard into its target.
 */
export function requirementsOf(plan: LanguagePlan, speaks: boolean): Requirement[] {
  const { listen, candidates } = plan;
  const heard = listen !== "auto" ? [listen] : (candidates ?? []);
  return [
    { kind: "recognition", language: listen },
    ...(listen === "auto" ? heard.map((language) => ({ kind: "identification", language }) as const) : []),
    ...(speaks ? plan.directions.map(({ to }) => ({ kind: "voice", language: to }) as const) : []),
    // "auto" without candidates: at least one language heard must reach the target.
    ...(heard.length === 0
      ? plan.directions.map(({ to }) => ({ kind: "translation", from: "auto", to }) as const)
      : []),
    ...heard.flatMap((from) => {
      const to = plan.targetFor(from);
      return to === undefined ? [] : [{ kind: "translation", from, to } as const];
    }),
  ];
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
  const streamerFor = (from: LanguageCode): MtEngine | undefined => {
    const [route] = routesFrom(from);
    const engine = route?.hops.length === 1 ? route.hops[0]!.engine : undefined;
    return engine?.capabilities.streaming && engine.translateStream ? engine : undefined;
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
      const streamer = streamerFor(call.from);
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
