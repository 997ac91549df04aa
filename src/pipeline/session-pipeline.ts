import type { EngineRegistry, TranslationRoute } from "../engines/routing/registry.js";
import type { LanguageCode, TtsEngine } from "../core/contracts.js";
import type { LanguagePlan } from "./language-plan.js";
import { recognizerFor } from "../engines/routing/recognizer-choice.js";
import { translatorFor, type Translator } from "../engines/routing/translator.js";
import { type VoiceChoice } from "../voices/voice-defaults.js";
import { fixedVoice, genderDefault, MatchedVoices, type VoiceChooser } from "../speakers/voice-choice.js";
import { voiceClonerFor } from "../voices/voice-clone.js";
import { renderOwnVoice, renderSpeech } from "./speech-output.js";
import { ClonedVoices, SpeakerToneColors } from "../speakers/tone-colors.js";
import type { PaceOptions } from "./pacing.js";
import type { FinalizeMode } from "./stabilizer.js";
import { TranslationPipeline, type PipelineObserver } from "./translation-pipeline.js";

/**
 * Builds the translation pipeline of one live audio stream, for WebSocket sessions and room
 * translators: the recognizer and translator from src/engines/routing/ (recognizer-choice.ts,
 * translator.ts), translation directions from the language plan (language-plan.ts), context from
 * the translation history (src/core/translation-history.ts), speaker labels and each speaker's voice from
 * src/speakers/.
 */

/** "auto" and two-way need a recognizer that identifies languages; the caller has checked the engines. */
export interface LivePipelineOptions {
  /**
   * How the stream is listened to and where each utterance goes: `languagePlan` for a WebSocket
   * session, `roomSpeakerPlan` (src/rooms) for a room participant.
   */
  readonly plan: LanguagePlan;
  readonly finalizeMode: FinalizeMode;
  readonly context?: string;
  /**
   * Voice of the translated speech (see `VoiceChoice`), or undefined for no audio output. The
   * caller has checked that the engines serve the languages.
   */
  readonly voice: VoiceChoice | undefined;
  /** Speech keeps pace with its listeners (src/pipeline/pacing.ts); undefined: natural speed always. */
  readonly pace?: PaceOptions | undefined;
  /** Tell the speakers apart and label transcripts with them (relay-2). */
  readonly labelSpeakers?: boolean;
  /** Where the pipeline reports its timings (the service's metrics). */
  readonly observer?: PipelineObserver;
  /** Whose session: shared engines serve accounts in turn (`TranslateRequest.account`). */
  readonly account?: string;
}

/** Until a speaker's voice is measured, clone rooms speak with the library default of this gender. */
const CLONE_FALLBACK_GENDER = "male";

/**
 * Starts measuring the library voices for matching between these languages (once per engine
 * version, kept in DATA_DIR), so the first speaker is matched as soon as their voice is measured.
 */
export function prepareVoiceCloning(
  registry: EngineRegistry,
  sourceLanguage: LanguageCode,
  targetLanguage: LanguageCode,
): void {
  const tts = registry.synthesizer(targetLanguage);
  // Failure only means speakers keep their fallback voice.
  if (tts)
    voiceClonerFor(tts, sourceLanguage, targetLanguage, registry.voiceMeasurements)
      .prepare()
      .catch(() => undefined);
}

export function createLivePipeline(
  registry: EngineRegistry,
  options: LivePipelineOptions,
): TranslationPipeline {
  const { plan, voice, account } = options;
  // The engines that answered the latest call of each direction and language, so the metrics credit
  // a fallback engine with what it served. A stage makes one call at a time and reads the entry
  // after it; a call clears it first, so a failed call names the preferred engine (whose error is
  // the one reported).
  const translatedBy = new Map<string, string>();
  const synthesizedBy = new Map<LanguageCode, string>();
  /** The engine that opened the latest recognition stream (a fallback, when the preferred failed). */
  let recognizedBy: string | undefined;
  const asr = recognizerFor(
    registry,
    plan.listen,
    plan.candidates,
    (engine) => (recognizedBy = engine.info.id),
  )!;
  const direction = (from: LanguageCode, to: LanguageCode) => `${from}>${to}`;
  const translators = new Map<LanguageCode, Translator>(
    plan.directions.map(({ to, labels }) => [
      to,
      translatorFor(registry, to, labels, (route) =>
        translatedBy.set(direction(route.from, route.to), enginesOf(route)),
      ),
    ]),
  );
  const synthesizers = new Map<LanguageCode, TtsEngine>(
    voice === undefined ? [] : plan.directions.map(({ to }) => [to, registry.synthesizer(to)!]),
  );
  const speaking = new Map<LanguageCode, TtsEngine>(
    [...synthesizers.keys()].map((to) => [
      to,
      registry.synthesizerReporting(to, (engine) => synthesizedBy.set(to, engine.info.id))!,
    ]),
  );
  const voices =
    voice === undefined
      ? undefined
      : voiceChooser(registry, voice, plan.speakerLanguageInto, [...synthesizers], account);
  const translator = (language: LanguageCode) => translators.get(language)!;

  return new TranslationPipeline({
    vad: registry.vad,
    asr,
    sourceLanguage: plan.listen,
    routes: plan.routes,
    translate: (call, signal) => {
      translatedBy.delete(direction(call.from, call.to));
      return translator(call.to).translate({ ...call, account }, signal);
    },
    translateStream: (call, signal) => {
      translatedBy.delete(direction(call.from, call.to));
      return translator(call.to).translateStream({ ...call, account }, signal);
    },
    speak:
      voice === undefined
        ? undefined
        : (text, language, chosen, signal, toneColor) => {
            synthesizedBy.delete(language);
            const tts = speaking.get(language)!;
            const request = { text, language, voice: chosen!, ...(account === undefined ? {} : { account }) };
            return toneColor && registry.toneColor
              ? renderOwnVoice(tts, request, { converter: registry.toneColor, toneColor }, signal)
              : renderSpeech(tts, request, signal);
          },
    pace: options.pace,
    finalizeMode: options.finalizeMode,
    context: options.context,
    ...(account === undefined ? {} : { account }),
    ...(options.labelSpeakers ? { speakers: registry.speakers } : {}),
    ...(voices ? { voices } : {}),
    ...(options.observer ? { observer: options.observer } : {}),
    engineIds: {
      recognize: () => recognizedBy ?? asr.info.id,
      translate: (from, to) =>
        translatedBy.get(direction(from, to)) ?? enginesOf(registry.translationRoutes(from, to)[0]),
      synthesize: (language) => synthesizedBy.get(language) ?? synthesizers.get(language)?.info.id ?? "none",
    },
  });
}

/** A route's engines as the metrics name them: "apertium", or "openai+apertium" through the pivot. */
function enginesOf(route: TranslationRoute | undefined): string {
  return route?.hops.map((hop) => hop.engine.info.id).join("+") ?? "none";
}

/**
 * The voice of each line: fixed, or matched to its speaker by the synthesizer's own measurements of
 * the library (library measurements run in the background; matching never waits for them), and for
 * clone voices converted to the speaker's own tone colour once it is known.
 */
function voiceChooser(
  registry: EngineRegistry,
  voice: VoiceChoice,
  speakerLanguageInto: (to: LanguageCode) => LanguageCode,
  synthesizers: readonly (readonly [LanguageCode, TtsEngine])[],
  account: string | undefined,
): VoiceChooser {
  if (voice !== "clone" && !("auto" in voice)) return fixedVoice(voice);
  const cloners = new Map(
    synthesizers.map(([to, tts]) => {
      prepareVoiceCloning(registry, speakerLanguageInto(to), to);
      return [to, voiceClonerFor(tts, speakerLanguageInto(to), to, registry.voiceMeasurements)] as const;
    }),
  );
  const matched = new MatchedVoices({
    match: (speaker, to, gender) => cloners.get(to)?.match(speaker, gender),
    fallback:
      voice === "clone" ? (speaker) => genderDefault(speaker, CLONE_FALLBACK_GENDER) : () => voice.auto,
  });
  // Clone voices speak in each speaker's own voice where a converter is loaded (voiceId=auto, as the
  // spec defines it, keeps choosing library voices).
  return voice === "clone" && registry.toneColor
    ? new ClonedVoices(matched, new SpeakerToneColors(registry.toneColor, account))
    : matched;
}
