/**
 * The sherpa-onnx host process: loads models and runs inference for the service (host.ts), which
 * talks to it over the IPC channel. sherpa-onnx runs here rather than in the service because:
 * - a model file it cannot read makes its native code end the process (`_Exit`), not throw;
 * - most of its calls block the thread that makes them;
 * - it bundles eSpeak NG (GPL-3.0) for Piper's phonemes, and this Apache-2.0 project runs GPL code
 *   only as a separate program (as src/engines/espeak-ng/ does).
 */
import { createRequire } from "node:module";
import type {
  GenerateParams,
  HostCancel,
  HostReply,
  HostRequest,
  LoadedTts,
  LoadTtsParams,
} from "./host-protocol.js";

interface GeneratedAudio {
  readonly samples: Float32Array;
  readonly sampleRate: number;
}

interface OfflineTts {
  readonly numSpeakers: number;
  readonly sampleRate: number;
  generateAsync(request: {
    text: string;
    sid: number;
    speed: number;
    onProgress?: (info: { samples: Float32Array; progress: number }) => number | boolean;
  }): Promise<GeneratedAudio>;
}

interface Sherpa {
  readonly version: string;
  readonly OfflineTts: { createAsync(config: unknown): Promise<OfflineTts> };
}

const require = createRequire(import.meta.url);
// CommonJS, with its native addon: loaded here only, never in the service.
const sherpa = require("sherpa-onnx-node") as Sherpa;

const ttsModels = new Map<string, OfflineTts>();
/** Requests being served, and whether each was asked to stop (generation ends at its next sentence). */
const running = new Map<number, { cancelled: boolean }>();

function send(reply: HostReply): void {
  process.send!(reply);
}

async function loadTts({ name, files, threads }: LoadTtsParams): Promise<LoadedTts> {
  const model = { vits: { model: files.model, tokens: files.tokens, dataDir: files.dataDir } };
  const tts = await sherpa.OfflineTts.createAsync({
    model: { ...model, numThreads: threads, provider: "cpu", debug: 0 },
    // One sentence per callback: speech goes out sentence by sentence.
    maxNumSentences: 1,
  });
  ttsModels.set(name, tts);
  return { speakers: tts.numSpeakers, sampleRate: tts.sampleRate };
}

async function generate(
  id: number,
  { name, text, speaker, speed }: GenerateParams,
): Promise<{ sampleRate: number }> {
  const tts = ttsModels.get(name);
  if (!tts) throw new Error(`no TTS model "${name}" loaded`);
  const audio = await tts.generateAsync({
    text,
    sid: speaker,
    speed,
    onProgress: ({ samples }) => {
      if (running.get(id)?.cancelled) return 0;
      // The callback's array is sherpa-onnx's own buffer: copy before it is reused.
      send({ id, chunk: Float32Array.from(samples) });
      return 1;
    },
  });
  return { sampleRate: audio.sampleRate };
}

async function handle(request: HostRequest): Promise<unknown> {
  switch (request.method) {
    case "version":
      return sherpa.version;
    case "loadTts":
      return loadTts(request.params as LoadTtsParams);
    case "generate":
      return generate(request.id, request.params as GenerateParams);
    default:
      throw new Error(`unknown method ${request.method}`);
  }
}

process.on("message", (message: HostRequest | HostCancel) => {
  if ("cancel" in message) {
    const request = running.get(message.id);
    if (request) request.cancelled = true;
    return;
  }
  running.set(message.id, { cancelled: false });
  handle(message)
    .then(
      (result) => send({ id: message.id, result }),
      (error: unknown) =>
        send({ id: message.id, error: error instanceof Error ? error.message : String(error) }),
    )
    .finally(() => running.delete(message.id));
});
// The service went away: nothing left to serve.
process.on("disconnect", () => process.exit(0));
