/**
 * relay as a LiveKit Agents provider: `import * as relay from "@relay-translate/livekit-agents"`,
 * then `new relay.STT()`, `new relay.TTS()` in an AgentSession, or `new relay.Translator()` for a room.
 */
export type { RelayOptions } from "./connection.js";
export { STT, SpeechStream, type STTOptions } from "./stt.js";
export { ChunkedStream, SynthesizeStream, TTS, type TTSOptions } from "./tts.js";
export {
  translatedTrackName,
  Translator,
  type RoomTranscript,
  type TranslatorEvents,
  type TranslatorOptions,
} from "./translator.js";
