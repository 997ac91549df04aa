/** The host process's speech synthesis (sherpa-onnx `OfflineTts`: Piper and Kokoro voices). */
import type { HandlerRequest, Handlers } from "../kit/model-host/serve.js";
import { sherpa } from "./host-handlers.js";
import type { GenerateParams, LoadedTts, LoadTtsParams, SherpaMethods } from "./host-protocol.js";

interface OfflineTts {
  readonly numSpeakers: number;
  readonly sampleRate: number;
  generateAsync(request: {
    text: string;
    sid?: number;
    speed?: number;
    generationConfig?: { sid: number; speed: number; extra: Record<string, string> };
    onProgress?: (info: { samples: Float32Array; progress: number }) => number | boolean;
  }): Promise<{ samples: Float32Array; sampleRate: number }>;
}

const { OfflineTts } = sherpa as { OfflineTts: { createAsync(config: unknown): Promise<OfflineTts> } };

const models = new Map<string, OfflineTts>();
/** Model passes running now, the most ever at once, and passes run (for tests and benchmarks). */
const passes = { running: 0, mostAtOnce: 0, total: 0 };

async function loadTts({ name, files, threads }: LoadTtsParams): Promise<LoadedTts> {
  const { kind, ...paths } = files;
  const tts = await OfflineTts.createAsync({
    model: {
      [kind]: paths,
      numThreads: threads,
      provider: "cpu",
      debug: 0,
    },
    // One sentence per callback: speech goes out sentence by sentence.
    maxNumSentences: 1,
  });
  models.set(name, tts);
  return { speakers: tts.numSpeakers, sampleRate: tts.sampleRate };
}

async function generate(
  { name, texts, speaker, speed, lang }: GenerateParams,
  request: HandlerRequest<Float32Array>,
): Promise<{ sampleRate: number }> {
  const tts = models.get(name);
  if (!tts) throw new Error(`no TTS model "${name}" loaded`);
  for (const text of texts) {
    // Stopped between pieces: a cancelled request never starts another pass.
    if (request.cancelled()) break;
    passes.running++;
    passes.total++;
    passes.mostAtOnce = Math.max(passes.mostAtOnce, passes.running);
    await tts
      .generateAsync({
        text,
        // Kokoro takes its language per request, in the generation config's extras.
        ...(lang ? { generationConfig: { sid: speaker, speed, extra: { lang } } } : { sid: speaker, speed }),
        onProgress: ({ samples }) => {
          if (request.cancelled()) return 0;
          // The callback's array is sherpa-onnx's own buffer: copy before it is reused.
          request.chunk(Float32Array.from(samples));
          return 1;
        },
      })
      .finally(() => passes.running--);
  }
  return { sampleRate: tts.sampleRate };
}

export const ttsHandlers: Pick<Handlers<SherpaMethods>, "loadTts" | "generate" | "ttsStats"> = {
  loadTts,
  generate,
  ttsStats: () => ({ ...passes, rss: process.memoryUsage.rss() }),
};
