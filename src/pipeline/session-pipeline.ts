import { translateAlong, type EngineRegistry } from "../engines/registry.js";
import type { LanguageCode, Voice } from "../engines/types.js";
import { defaultVoice } from "../voices/library.js";
import { voiceClonerFor } from "../voices/voice-clone.js";
import { SpeakerProfiler, type VoiceFeatures } from "../voices/voice-features.js";
import { renderSpeech } from "./speech-output.js";
import type { FinalizeMode } from "./stabilizer.js";
import { TranslationPipeline, type TranslationCall } from "./translation-pipeline.js";

/**
 * Builds the translation pipeline of one live speaker from the configured engines: the single
 * place where WebSocket sessions and room translators turn "languages + voice" into engines.
 */

export interface SpeakerPipelineOptions {
  /** The spoken language, or "auto" (a recogniser that identifies languages must be configured). */
  readonly sourceLanguage: LanguageCode | "auto";
  readonly targetLanguage: LanguageCode;
  readonly finalizeMode: FinalizeMode;
  readonly context?: string;
  /** The client's names for the languages (`sourceLanguageLabel` / `targetLanguageLabel`). */
  readonly sourceLanguageLabel?: string;
  readonly targetLanguageLabel?: string;
  /**
   * Voice of the translated speech: a library voice, `"clone"` (follow the speaker's own voice), or
   * undefined for no audio output. The caller has checked that the engines serve the languages.
   */
  readonly voice: Voice | "clone" | undefined;
}

/** Until a speaker's voice is measured, clone sessions speak with the library default of this gender. */
const CLONE_FALLBACK_GENDER = "male";
/** Median F0 (Hz) below which a measured speaker gets the male default while the matcher warms up. */
const MALE_F0_CEILING_HZ = 165;

/**
 * Starts measuring the library voices for cloning between these languages (once per process), so
 * the first speaker of a room is matched as soon as their voice is measured.
 */
export function prepareVoiceCloning(
  registry: EngineRegistry,
  sourceLanguage: LanguageCode,
  targetLanguage: LanguageCode,
): void {
  const tts = registry.synthesizer(targetLanguage);
  // Failure only means speakers keep their gender's default voice.
  if (tts)
    voiceClonerFor(tts, sourceLanguage, targetLanguage)
      .prepare()
      .catch(() => undefined);
}

export function createSpeakerPipeline(
  registry: EngineRegistry,
  options: SpeakerPipelineOptions,
): TranslationPipeline {
  const { sourceLanguage, targetLanguage, voice } = options;
  const labels = { fromLabel: options.sourceLanguageLabel, toLabel: options.targetLanguageLabel };
  const routesFrom = (from: LanguageCode) => registry.translationRoutes(from, targetLanguage);
  // Streaming applies when the preferred route is one streaming engine (an LLM, typically).
  const streamerFor = (from: LanguageCode) => {
    const [route] = routesFrom(from);
    const engine = route?.hops.length === 1 ? route.hops[0]!.engine : undefined;
    return engine?.capabilities.streaming && engine.translateStream ? engine : undefined;
  };
  const tts = voice === undefined ? undefined : registry.synthesizer(targetLanguage)!;
  let speakerProfiler: SpeakerProfiler | undefined;
  let voiceFor: (speaker: VoiceFeatures | undefined) => Voice = () => voice as Voice;
  if (tts && voice === "clone") {
    speakerProfiler = new SpeakerProfiler();
    // The speaker's language is the rate reference; with "auto" the target language stands in.
    const speakerLanguage = sourceLanguage === "auto" ? targetLanguage : sourceLanguage;
    const cloner = voiceClonerFor(tts, speakerLanguage, targetLanguage);
    // Library measurements run in the background; matching never waits for them.
    prepareVoiceCloning(registry, speakerLanguage, targetLanguage);
    voiceFor = (speaker) =>
      (speaker && cloner.match(speaker)) ??
      defaultVoice(
        speaker ? (speaker.medianF0Hz < MALE_F0_CEILING_HZ ? "male" : "female") : CLONE_FALLBACK_GENDER,
      );
  }
  /**
   * Streams from the preferred engine when it can; if it fails before producing anything, the
   * remaining routes are tried as `translateAlong` would (a remote LLM down, Apertium behind it).
   */
  async function* streamTranslation(call: TranslationCall, signal: AbortSignal): AsyncIterable<string> {
    const routes = routesFrom(call.from);
    const streamer = streamerFor(call.from);
    if (!streamer) {
      yield await translateAlong(routes, { ...call, ...labels }, signal);
      return;
    }
    let produced = false;
    try {
      const request = { ...call, ...labels, to: targetLanguage };
      for await (const partial of streamer.translateStream!(request, signal)) {
        produced = true;
        yield partial;
      }
      return;
    } catch (error) {
      if (produced || routes.length < 2 || signal.aborted) throw error;
    }
    yield await translateAlong(routes.slice(1), { ...call, ...labels }, signal);
  }

  return new TranslationPipeline({
    vad: registry.vad,
    asr: (sourceLanguage === "auto" ? registry.languageIdentifier() : registry.recognizer(sourceLanguage))!,
    sourceLanguage,
    targetLanguage,
    translate: async (call, signal) => {
      const routes = routesFrom(call.from);
      if (routes.length === 0) throw new Error(`no translation from "${call.from}" to "${targetLanguage}"`);
      return translateAlong(routes, { ...call, ...labels }, signal);
    },
    translateStream: (call, signal) => streamTranslation(call, signal),
    speak: tts
      ? (text, speaker, signal) =>
          renderSpeech(tts, { text, language: targetLanguage, voice: voiceFor(speaker) }, signal)
      : undefined,
    finalizeMode: options.finalizeMode,
    context: options.context,
    speakerProfiler,
  });
}
