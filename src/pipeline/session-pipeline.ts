import type { EngineRegistry } from "../engines/registry.js";
import type { LanguageCode, TtsEngine, Voice } from "../engines/types.js";
import {
  languagePlan,
  recognizerFor,
  translatorFor,
  type SessionLanguages,
  type Translator,
  type VoiceChoice,
} from "../speech-plan.js";
import { defaultVoice } from "../voices/library.js";
import { voiceClonerFor } from "../voices/voice-clone.js";
import { SpeakerProfiler, type VoiceFeatures } from "../voices/voice-features.js";
import { renderSpeech } from "./speech-output.js";
import type { FinalizeMode } from "./stabilizer.js";
import { TranslationPipeline } from "./translation-pipeline.js";

/**
 * Builds the translation pipeline of one live speaker, for WebSocket sessions and room translators:
 * engines, translation directions and context from the speech plan (src/speech-plan.ts), plus
 * voice matching for clone.
 */

/** "auto" and two-way need a recogniser that identifies languages; the caller has checked the engines. */
export interface SpeakerPipelineOptions extends SessionLanguages {
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
  const { voice } = options;
  const plan = languagePlan(options);
  const translators = new Map<LanguageCode, Translator>(
    plan.directions.map(({ to, labels }) => [to, translatorFor(registry, to, labels)]),
  );
  const speakerProfiler = voice === "clone" ? new SpeakerProfiler() : undefined;
  // The speaker's language is the clone matcher's rate reference: the named source, in a two-way
  // session the other side of the pair, and with "auto" (not known ahead) the target stands in.
  const speakerLanguageInto = (to: LanguageCode): LanguageCode =>
    plan.listen !== "auto"
      ? plan.listen
      : options.twoWay
        ? (plan.candidates?.find((language) => language !== to) ?? to)
        : to;
  const outputs = new Map(
    voice === undefined
      ? []
      : plan.directions.map(
          ({ to }) => [to, speechOutput(registry, speakerLanguageInto(to), to, voice)] as const,
        ),
  );
  const translator = (language: LanguageCode) => translators.get(language)!;

  return new TranslationPipeline({
    vad: registry.vad,
    asr: recognizerFor(registry, plan.listen, plan.candidates)!,
    sourceLanguage: plan.listen,
    targetFor: plan.targetFor,
    translate: (call, signal) => translator(call.to).translate(call, signal),
    translateStream: (call, signal) => translator(call.to).translateStream(call, signal),
    speak:
      voice === undefined
        ? undefined
        : (text, language, speaker, signal) => {
            const { tts, voiceFor } = outputs.get(language)!;
            return renderSpeech(tts, { text, language, voice: voiceFor(speaker) }, signal);
          },
    finalizeMode: options.finalizeMode,
    context: options.context,
    speakerProfiler,
  });
}

/**
 * Speech in `target`: its synthesiser and each line's voice (the library voice, or for clone the one
 * measured nearest the speaker).
 */
function speechOutput(
  registry: EngineRegistry,
  speakerLanguage: LanguageCode,
  target: LanguageCode,
  voice: VoiceChoice,
): { tts: TtsEngine; voiceFor: (speaker: VoiceFeatures | undefined) => Voice } {
  const tts = registry.synthesizer(target)!;
  if (voice !== "clone") return { tts, voiceFor: () => voice };
  const cloner = voiceClonerFor(tts, speakerLanguage, target);
  // Library measurements run in the background; matching never waits for them.
  prepareVoiceCloning(registry, speakerLanguage, target);
  return {
    tts,
    voiceFor: (speaker) =>
      (speaker && cloner.match(speaker)) ??
      defaultVoice(
        speaker ? (speaker.medianF0Hz < MALE_F0_CEILING_HZ ? "male" : "female") : CLONE_FALLBACK_GENDER,
      ),
  };
}
