import type { EngineRegistry } from "../engines/registry.js";
import type { LanguageCode, Voice } from "../engines/types.js";
import { recognizerFor, translatorFor, type LanguageLabels, type VoiceChoice } from "../speech-plan.js";
import { defaultVoice } from "../voices/library.js";
import { voiceClonerFor } from "../voices/voice-clone.js";
import { SpeakerProfiler, type VoiceFeatures } from "../voices/voice-features.js";
import { renderSpeech } from "./speech-output.js";
import type { FinalizeMode } from "./stabilizer.js";
import { TranslationPipeline } from "./translation-pipeline.js";

/**
 * Builds the translation pipeline of one live speaker, for WebSocket sessions and room translators:
 * engines and translation context from the speech plan (src/speech-plan.ts), plus voice matching
 * for clone.
 */

export interface SpeakerPipelineOptions extends LanguageLabels {
  /** The spoken language, or "auto" (a recogniser that identifies languages must be configured). */
  readonly sourceLanguage: LanguageCode | "auto";
  readonly targetLanguage: LanguageCode;
  readonly finalizeMode: FinalizeMode;
  readonly context?: string;
  /**
   * Voice of the translated speech: a library voice, `"clone"` (follow the speaker's own voice), or
   * undefined for no audio output. The caller has checked that the engines serve the languages.
   */
  readonly voice: VoiceChoice | undefined;
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
  const translator = translatorFor(registry, targetLanguage, options);
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

  return new TranslationPipeline({
    vad: registry.vad,
    asr: recognizerFor(registry, sourceLanguage)!,
    sourceLanguage,
    targetLanguage,
    translate: (call, signal) => translator.translate(call, signal),
    translateStream: (call, signal) => translator.translateStream(call, signal),
    speak: tts
      ? (text, speaker, signal) =>
          renderSpeech(tts, { text, language: targetLanguage, voice: voiceFor(speaker) }, signal)
      : undefined,
    finalizeMode: options.finalizeMode,
    context: options.context,
    speakerProfiler,
  });
}
