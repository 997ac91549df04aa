import { resample } from "../audio/resampler.js";
import type { LanguageCode, TtsEngine, Voice } from "../engines/types.js";
import { frameAudio, OUTPUT_SAMPLE_RATE } from "./framer.js";

export interface SpeechRequest {
  readonly text: string;
  readonly language: LanguageCode;
  readonly voice: Voice;
}

/** Synthesises one line and returns it as standalone 24 kHz output frames. */
export async function renderSpeech(tts: TtsEngine, request: SpeechRequest): Promise<Float32Array[]> {
  const audio = await tts.synthesize(request);
  return frameAudio(await resample(audio.samples, audio.sampleRate, OUTPUT_SAMPLE_RATE));
}
