import type { AsrEngine, AsrStream } from "../../src/core/contracts.js";
import {
  TranslationPipeline,
  type PipelineEvent,
  type PipelineOptions,
} from "../../src/pipeline/translation-pipeline.js";
import { energyVad } from "./vad-double.js";
import { SESSION_LANE } from "../../src/pipeline/language-plan.js";

/**
 * The one harness of the pipeline's unit tests: a pipeline over engine doubles (the energy VAD,
 * English into Spanish, stable finals without a wait), audio to feed it, and its events read back.
 * Each file passes the doubles its tests are about (`asr`, `translate`, `speak`, …).
 */

/** Loud enough for the energy VAD: speech to it. */
export const speech = (ms: number) => new Int16Array(ms * 16).fill(1000);
export const silence = (ms: number) => new Int16Array(ms * 16);

export function pipelineWith(
  options: Partial<PipelineOptions> & Pick<PipelineOptions, "asr" | "translate">,
): TranslationPipeline {
  return new TranslationPipeline({
    vad: energyVad,
    sourceLanguage: "en",
    routes: () => [{ lane: SESSION_LANE, to: "es" }],
    finalizeMode: "stable",
    finalizeWaitMs: 5,
    ...options,
  });
}

/** A recognizer double that hears "hello" in any audio. */
export const helloAsr: AsrEngine = {
  info: { id: "hello-double", version: "test" },
  capabilities: {
    languages: ["en"],
    sampleRate: 16_000,
    partialResults: true,
    wordTimings: false,
    punctuation: true,
  },
  async createStream(): Promise<AsrStream> {
    return {
      write: async () => {},
      partial: async () => ({ text: "hello", words: [] }),
      finish: async () => ({ text: "hello", words: [] }),
      abort: () => {},
    };
  },
  close: async () => {},
};

/** A speech double: one frame whose level tells how long the text was. */
export async function* toneFor(text: string): AsyncGenerator<Float32Array> {
  yield new Float32Array(1920).fill(text.length / 100);
}

/**
 * The spoken clips among `events`, each as its frames: a clip ends with its `clipEnd` frame (a
 * line's speech is one clip, however many frames its speech and its closing pause take).
 */
export function clipsOf(events: readonly PipelineEvent[]): Float32Array[][] {
  const clips: Float32Array[][] = [];
  let open: Float32Array[] = [];
  for (const event of events) {
    if (event.type !== "audio") continue;
    open.push(event.samples);
    if (event.clipEnd) {
      clips.push(open);
      open = [];
    }
  }
  return clips;
}

/** The pipeline's events until `until` says enough (by default: until the pipeline ends). */
export async function collect(
  pipeline: TranslationPipeline,
  until: (events: PipelineEvent[]) => boolean = () => false,
): Promise<PipelineEvent[]> {
  const events: PipelineEvent[] = [];
  for await (const event of pipeline.events) {
    events.push(event);
    if (until(events)) break;
  }
  return events;
}

/** The final transcripts (or translations) among `events`. */
export function finals<T extends "original" | "translated">(
  events: PipelineEvent[],
  type: T,
): Extract<PipelineEvent, { type: T }>[] {
  return events.filter((e): e is Extract<PipelineEvent, { type: T }> => e.type === type && e.isFinal);
}
