/**
 * Neural speaker embeddings through sherpa-onnx's `SpeakerEmbeddingExtractor` (3D-Speaker CAM++ from
 * the catalogue, `speaker-campplus-en`), in a host process of its own (host-main.ts says why). Used
 * instead of the MFCC engine when a speaker model is pulled (src/engines/routing/registry.ts).
 *
 * A voiceprint is the stretch's embedding, normalized, weighted by its seconds of speech; pooling
 * two is their weighted mean, and the distance is 1 − cosine similarity (0: the same direction,
 * 1: unrelated, 2: opposite). The speaker tracker feeds 0.5 s blocks and pools them, so a run's
 * voiceprint is the mean of its blocks' embeddings.
 *
 * Thresholds (the tracker's `sameSpeakerBelow` / `newSpeakerAbove`), defaults for a real CAM++:
 * the same person below 0.4 (cosine ≥ 0.6, the threshold of sherpa-onnx's speaker identification
 * examples, nodejs-addon-examples/test_speaker_identification.js and
 * python-api-examples/speaker-identification.py), someone new above 0.5 (cosine < 0.5, the
 * cosine-distance threshold its speaker diarization examples cluster CAM++ embeddings with). CAM++
 * reaches 0.73 % EER on VoxCeleb1-O (arXiv 2303.00332), where same/different cosine scores of
 * utterance-length embeddings separate around 0.3–0.5; 0.5 s blocks score lower for one person, so
 * the defaults sit at the strict end of that and leave the gap between them as "not sure yet".
 * No real model was measured here (none can be downloaded on the build machine): both are options,
 * and SPEAKER_SAME_BELOW / SPEAKER_NEW_ABOVE set them (src/config.ts).
 */
import { bulkhead, BulkheadRejectedError, TaskCancelledError } from "cockatiel";
import type { SpeakerEngine, Voiceprint } from "../../core/contracts.js";
import { ModelHost } from "../kit/model-host/host.js";
import { SHERPA_HOST } from "./host-entry.js";
import type { LoadSpeakerParams, SherpaMethods } from "./host-protocol.js";
import { checkModelFile } from "./model-check.js";

export interface SherpaSpeakerOptions {
  /** The ONNX model file (the catalogue's `<modelsDir>/<entry.dir>/<entry.speaker.model>`). */
  readonly model: string;
  /** onnxruntime threads per embedding. Default 1: sessions' blocks are small and many. */
  readonly threads?: number;
  /** Embeddings waiting; beyond it a voiceprint fails at once (the tracker skips the block). Default 64. */
  readonly maxQueued?: number;
  /** Distances below this are the same person (default 0.4, see the module comment). */
  readonly sameSpeakerBelow?: number;
  /** Distances above this are someone new (default 0.5). */
  readonly newSpeakerAbove?: number;
}

export const DEFAULT_SPEAKER_THRESHOLDS = { sameSpeakerBelow: 0.4, newSpeakerAbove: 0.5 } as const;

const RATE = 16_000;
/** Loudness is measured over 10 ms pieces: the feature frames' hop. */
const PIECE = RATE / 100;
/** As the MFCC engine counts speech: pieces within 30 dB of the loudest, and above −60 dBFS. */
const RANGE_DB = 30;
const FLOOR_DB = -60;
/** Clips with less speech than this are not embedded (too few frames to say anything; they weigh 0). */
const MIN_SPEECH_SECONDS = 0.1;
/** Embeddings computed at once: one in the host, one crossing the channel. */
const CONCURRENT = 2;

interface EmbeddingVoiceprint extends Voiceprint {
  /** Unit length, or all zeros when `speechSeconds` is 0. */
  readonly embedding: Float32Array;
}

/** Seconds of `samples` loud enough to be speech (see RANGE_DB). */
function speechSecondsOf(samples: Float32Array): number {
  const levels: number[] = [];
  for (let start = 0; start + PIECE <= samples.length; start += PIECE) {
    let energy = 0;
    for (let i = start; i < start + PIECE; i++) energy += samples[i]! ** 2;
    levels.push(10 * Math.log10(energy / PIECE + 1e-12));
  }
  const floor = Math.max(FLOOR_DB, Math.max(...levels) - RANGE_DB);
  return levels.filter((level) => level >= floor).length / 100;
}

function normalized(vector: Float32Array): Float32Array {
  let norm = 0;
  for (const value of vector) norm += value * value;
  norm = Math.sqrt(norm);
  return norm > 0 ? vector.map((value) => value / norm) : new Float32Array(vector.length);
}

function asEmbedding(print: Voiceprint): EmbeddingVoiceprint {
  if (!("embedding" in print)) throw new Error("the voiceprint was made by another speaker engine");
  return print as EmbeddingVoiceprint;
}

export async function createSherpaSpeakerEngine(options: SherpaSpeakerOptions): Promise<SpeakerEngine> {
  const thresholds = {
    sameSpeakerBelow: options.sameSpeakerBelow ?? DEFAULT_SPEAKER_THRESHOLDS.sameSpeakerBelow,
    newSpeakerAbove: options.newSpeakerAbove ?? DEFAULT_SPEAKER_THRESHOLDS.newSpeakerAbove,
  };
  if (!(thresholds.sameSpeakerBelow <= thresholds.newSpeakerAbove))
    throw new Error(
      `sherpa-onnx speakers: sameSpeakerBelow (${thresholds.sameSpeakerBelow}) must not exceed newSpeakerAbove (${thresholds.newSpeakerAbove})`,
    );
  // Refused here with a clear message, before sherpa-onnx could end its process over the file.
  const metadata = await checkModelFile(options.model, "speaker-embedding");
  const maxQueued = options.maxQueued ?? 64;

  const host = new ModelHost<SherpaMethods>("sherpa-onnx speakers", SHERPA_HOST);
  try {
    const version = await host.request("version", null);
    const params: LoadSpeakerParams = { model: options.model, threads: options.threads ?? 1 };
    const { dim } = await host.setUp("loadSpeaker", params);
    const limiter = bulkhead(CONCURRENT, maxQueued);
    const silent: EmbeddingVoiceprint = { embedding: new Float32Array(dim), speechSeconds: 0 };

    const embed = async (samples: Float32Array, signal?: AbortSignal): Promise<Float32Array | null> => {
      try {
        return await limiter.execute(
          async ({ signal: slot }) =>
            await host.request("embed", { samples, sampleRate: RATE }, { signal: slot }),
          signal,
        );
      } catch (error) {
        if (error instanceof BulkheadRejectedError)
          throw new Error(`sherpa-onnx speakers is busy (${maxQueued} embeddings waiting)`, { cause: error });
        if (error instanceof TaskCancelledError && signal?.aborted) throw signal.reason;
        throw error;
      }
    };

    const modelName = metadata.get("model_type") ?? metadata.get("framework")!;
    return {
      info: {
        id: "sherpa-onnx-speaker",
        version: `${version}+${modelName}`,
        detail: `${options.model.split(/[\\/]/u).at(-1)} (${dim}-dimensional embeddings)`,
      },
      capabilities: { sampleRate: RATE, ...thresholds },
      async voiceprint(samples, signal) {
        const speechSeconds = speechSecondsOf(samples);
        if (speechSeconds < MIN_SPEECH_SECONDS) return silent;
        const embedding = await embed(samples, signal);
        return embedding ? { embedding: normalized(embedding), speechSeconds } : silent;
      },
      merge(a, b) {
        const [x, y] = [asEmbedding(a), asEmbedding(b)];
        const speechSeconds = x.speechSeconds + y.speechSeconds;
        if (speechSeconds === 0) return silent;
        const [wx, wy] = [x.speechSeconds / speechSeconds, y.speechSeconds / speechSeconds];
        return {
          embedding: normalized(x.embedding.map((value, i) => wx * value + wy * y.embedding[i]!)),
          speechSeconds,
        };
      },
      distance(a, b) {
        const [x, y] = [asEmbedding(a), asEmbedding(b)];
        if (x.speechSeconds === 0 || y.speechSeconds === 0) return Infinity;
        let dot = 0;
        for (let i = 0; i < x.embedding.length; i++) dot += x.embedding[i]! * y.embedding[i]!;
        return 1 - dot;
      },
      hosts: () => [host.status()],
      close: () => host.close(),
    };
  } catch (error) {
    await host.close();
    throw error;
  }
}
