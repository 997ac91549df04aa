import { concatFloat32 } from "../audio/pcm.js";
import { resample } from "../audio/resampler.js";
import { streamSynthesis } from "../engines/kit/synthesis.js";
import type {
  LanguageCode,
  SynthesizedAudio,
  ToneColor,
  ToneColorEngine,
  TtsEngine,
  Voice,
} from "../core/contracts.js";
import { Framer, OUTPUT_SAMPLE_RATE } from "./framer.js";

export interface SpeechRequest {
  readonly text: string;
  readonly language: LanguageCode;
  readonly voice: Voice;
  /** Whose session (engines shared by every session serve accounts in turn). */
  readonly account?: string;
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

/** A speaker's own voice for a clone line: the converter and the speaker's tone colour. */
export interface OwnVoice {
  readonly converter: ToneColorEngine;
  readonly toneColor: ToneColor;
}

/**
 * As `renderSpeech`, in the speaker's own voice: the sentence is synthesized whole, then converted
 * to the speaker's tone colour piece by piece, each piece framed as it comes (the caller speaks
 * sentence by sentence, so the first audio follows the first sentence's first piece). A conversion
 * that fails (the converter busy, its host down) leaves the rest in the library voice: the
 * listener always gets the speech.
 */
export async function* renderOwnVoice(
  tts: TtsEngine,
  request: SpeechRequest,
  own: OwnVoice,
  signal?: AbortSignal,
): AsyncIterable<Float32Array> {
  const chunks: SynthesizedAudio[] = [];
  for await (const audio of streamSynthesis(tts, request, signal)) chunks.push(audio);
  if (chunks.length === 0) return;
  const synthesized: SynthesizedAudio = {
    samples: concatFloat32(chunks.map((chunk) => chunk.samples)),
    sampleRate: chunks[0]!.sampleRate,
  };
  const framer = new Framer();
  /** Seconds of the sentence spoken so far (converted). */
  let spoken = 0;
  try {
    for await (const piece of own.converter.convert(synthesized, own.toneColor, {
      ...(signal ? { signal } : {}),
      ...(request.account === undefined ? {} : { account: request.account }),
    })) {
      spoken += piece.samples.length / piece.sampleRate;
      yield* framer.push(await resample(piece.samples, piece.sampleRate, OUTPUT_SAMPLE_RATE));
    }
  } catch (error) {
    if (signal?.aborted) throw error;
    const rest = synthesized.samples.subarray(Math.round(spoken * synthesized.sampleRate));
    yield* framer.push(await resample(rest, synthesized.sampleRate, OUTPUT_SAMPLE_RATE));
  }
  yield* framer.flush();
}
