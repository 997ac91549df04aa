import type { SynthesisRequest, SynthesizedAudio, TtsEngine } from "../../core/contracts.js";

/**
 * Speech from any TTS engine as a stream of chunks: the engine's own `synthesizeStream` when it
 * produces audio progressively, otherwise its whole `synthesize` clip as one chunk. The one place
 * that adapts non-streaming engines, so no engine needs its own.
 */
export async function* streamSynthesis(
  engine: TtsEngine,
  request: SynthesisRequest,
  signal?: AbortSignal,
): AsyncIterable<SynthesizedAudio> {
  if (engine.synthesizeStream) {
    yield* engine.synthesizeStream(request, signal);
    return;
  }
  yield await engine.synthesize(request, signal);
}
