/**
 * Compile-time tests of the SDK's session parameters: `npm run typecheck` (tsconfig.check.json
 * covers test/) fails if a known key or value stops being accepted, or if an unknown key or value
 * stops being an error (each `@ts-expect-error` must then meet one). Nothing here runs.
 */
import { createSession, RealtimeSession, type SessionParams } from "@relay-translate/client";

declare const session: RealtimeSession;
const options = { baseUrl: "http://localhost:8080", apiKey: "key" };

export const everyKey: SessionParams = {
  sourceLanguage: "auto",
  languageHints: ["en", "fr"],
  targetLanguage: "es",
  audioOutputEnabled: false,
  voiceId: "auto",
  voiceType: "female",
  modelName: "relay-2",
  finalizeMode: "sentence",
  twoWay: false,
  context: "Dr. Okafor, the Lagos office",
  sourceLanguageLabel: "Nigerian English",
  targetLanguageLabel: "formal Spanish",
  mode: "s2tt",
};
export const voices: SessionParams[] = [{ voiceId: 12 }, { voiceId: "12" }, { languageHints: "en,fr" }];

export async function misspelled(): Promise<void> {
  // @ts-expect-error an unknown key (the spec's is targetLanguage)
  await RealtimeSession.open(options, { targetLang: "es" });
  // @ts-expect-error an unknown key, in createSession too
  await createSession(options, { language: "es" });
  // @ts-expect-error modelName is relay-1 or relay-2
  await RealtimeSession.open(options, { modelName: "relay-3" });
  // @ts-expect-error mode is s2tt or tts
  await RealtimeSession.open(options, { mode: "speech" });
  // @ts-expect-error voiceType is male or female
  await RealtimeSession.open(options, { voiceType: "child" });
  // @ts-expect-error finalizeMode is stable or sentence
  await RealtimeSession.open(options, { finalizeMode: "word" });
  // @ts-expect-error voiceId is a number or "auto"
  await RealtimeSession.open(options, { voiceId: "Maria" });
  // @ts-expect-error booleans are booleans, not strings
  await RealtimeSession.open(options, { audioOutputEnabled: "false" });
  // @ts-expect-error updates take the same keys
  session.updateMetadata({ contxt: "directions" });
}
