import { resample } from "../audio/resampler.js";
import { streamSynthesis } from "../engines/kit/synthesis.js";
import type { LanguageCode, TtsEngine, Voice } from "../core/contracts.js";
import { Framer, OUTPUT_SAMPLE_RATE } from "./framer.js";

export interface SpeechRequest {
  readonly text: string;
  readonly language: LanguageCode;
  readonly voice: Voice;
}

/**
 * Synthesizes one text as standalone 24 kHz output frames (src/pipeline/framer.ts), yielded as soon
 * as the engine has produced the audio for them: the whole clip at once from engines that do not
 * stream. `signal` cancels the synthesis.
 */
export async function* renderSpeech(
  tts: TtsEngine,
  request: SpeechRequest,
  signal?: AbortSignal,
): AsyncIterable<Float32Array> {
  const framer = new Framer();
  for await (const audio of streamSynthesis(tts, request, signal)) {
    yield* framer.push(await resample(audio.samples, audio.sampleRate, OUTPUT_SAMPLE_RATE));
  }
  yield* framer.flush();
}
