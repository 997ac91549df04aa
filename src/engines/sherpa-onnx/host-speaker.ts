/** The host process's speaker embeddings (sherpa-onnx `SpeakerEmbeddingExtractor`, e.g. CAM++). */
import type { HandlerRequest, Handlers } from "../kit/model-host/serve.js";
import { sherpa } from "./host-handlers.js";
import type { EmbedParams, LoadedSpeaker, LoadSpeakerParams, SherpaMethods } from "./host-protocol.js";

interface EmbeddingStream {
  acceptWaveform(audio: { samples: Float32Array; sampleRate: number }): void;
  inputFinished(): void;
}

interface SpeakerEmbeddingExtractor {
  readonly dim: number;
  createStream(): EmbeddingStream;
  isReady(stream: EmbeddingStream): boolean;
  compute(stream: EmbeddingStream): Float32Array;
}

const { SpeakerEmbeddingExtractor } = sherpa as {
  SpeakerEmbeddingExtractor: new (config: {
    model: string;
    numThreads: number;
    provider: string;
    debug: boolean;
  }) => SpeakerEmbeddingExtractor;
};

let extractor: SpeakerEmbeddingExtractor | undefined;

function loadSpeaker({ model, threads }: LoadSpeakerParams): LoadedSpeaker {
  extractor = new SpeakerEmbeddingExtractor({ model, numThreads: threads, provider: "cpu", debug: false });
  return { dim: extractor.dim };
}

/** The embedding of one clip; null when it is too short to hold a single feature frame. */
function embed({ samples, sampleRate }: EmbedParams, request: HandlerRequest): Float32Array | null {
  if (!extractor) throw new Error("no speaker model loaded");
  // Queued behind other requests: a cancelled one is not worth the computation.
  if (request.cancelled()) throw new Error("cancelled");
  const stream = extractor.createStream();
  stream.acceptWaveform({ samples, sampleRate });
  // The whole clip is here: without this, a short clip's last frames are never ready.
  stream.inputFinished();
  // Computing a stream that is not ready returns garbage, not an error.
  if (!extractor.isReady(stream)) return null;
  // The result may be the extractor's own buffer: copied before it crosses the channel.
  return Float32Array.from(extractor.compute(stream));
}

export const speakerHandlers: Pick<Handlers<SherpaMethods>, "loadSpeaker" | "embed"> = { loadSpeaker, embed };
