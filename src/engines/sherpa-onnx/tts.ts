/**
 * Neural speech through sherpa-onnx's `OfflineTts` (Kokoro and Piper VITS voices), run in a host
 * process (host-main.ts). Speech comes sentence by sentence: the host sends each sentence's audio as
 * soon as the model has made it, so a long answer starts playing after its first sentence.
 *
 * The library's 70 voices are timbres, not recordings: each is rendered here by one of the installed
 * neural speakers of the request's language (speakers.ts maps them, by gender, spreading the voices
 * over as many distinct speakers as the models have). The voice's rate becomes the model's speed;
 * its pitch settings have no neural counterpart and are left out.
 */
import { stat } from "node:fs/promises";
import type {
  EngineInfo,
  LanguageCode,
  SynthesisRequest,
  SynthesizedAudio,
  TtsEngine,
} from "../../core/contracts.js";
import { Channel } from "../../core/channel.js";
import { levelSpeech } from "../../audio/loudness.js";
import type { VoiceMeasurementStore } from "../../voices/measurement-store.js";
import { FairQueue, NO_ACCOUNT } from "../kit/model-host/fair-queue.js";
import { ModelHost } from "../kit/model-host/host.js";
import { boundedChunks } from "../kit/text-chunks.js";
import { SHERPA_HOST } from "./host-entry.js";
import type {
  GenerateParams,
  LoadedTts,
  LoadTtsParams,
  SherpaMethods,
  SherpaTtsPasses,
  TtsModelFiles,
} from "./host-protocol.js";

export type { SherpaTtsPasses };
import { checkKokoroVoices, checkModelFile } from "./model-check.js";
import {
  kokoroSpeakers,
  speakerMap,
  type NamedSpeaker,
  type NeuralSpeaker,
  type SpeakerMap,
} from "./voice-speakers.js";

export interface NeuralVoiceModel {
  /** The catalogue name (`relay models list`). */
  readonly name: string;
  readonly languages: readonly LanguageCode[];
  readonly files: TtsModelFiles;
  /** Genders of the model's speakers by speaker id, when known (single-speaker voices); else measured. */
  readonly genders?: readonly NeuralSpeaker["gender"][];
  /** Why its files must not be loaded (src/engines/kit/models/model-dir.ts): the voice is left out, the others serve. */
  readonly problem?: string;
}

export interface SherpaTtsOptions {
  readonly models: readonly NeuralVoiceModel[];
  /** onnxruntime threads per synthesis. Default 1: sessions run side by side on the other cores. */
  readonly threads?: number;
  /** Syntheses at once; more wait in line. Default 2. */
  readonly maxConcurrent?: number;
  /** Syntheses waiting; beyond it a request fails at once (the pipeline drops or reports it). Default 32. */
  readonly maxQueued?: number;
  /** Syntheses one account may have waiting (default 8); the queue serves accounts in turn. */
  readonly maxQueuedPerAccount?: number;
  /** No audio from the host for this long fails the synthesis (the next engine speaks; default 10 s). */
  readonly timeoutMs?: number;
  /** The host is replaced once its resident memory passes this (MiB; default 2048). */
  readonly maxHostMiB?: number;
  /** Where measured speaker genders are kept between processes (default: measured per process). */
  readonly measurements?: VoiceMeasurementStore;
}

/** Control characters would reach the phonemizer as text; they are spaces to a listener anyway. */
const CONTROL_CHARACTERS = /(?![\t\n])\p{Cc}/gu;
/** The model's speed is clamped like eSpeak NG's rate: faster is unintelligible. */
const SPEED_RANGE = { min: 0.5, max: 2.5 };
/**
 * The longest piece of text one model pass speaks (Latin letters; see text-chunks.ts): a pass
 * cannot be stopped once started, and its time and memory grow with its length (on a real-size
 * Piper medium stand-in about 13 ms and 3 MiB a letter: docs/benchmarks.md), so this bounds what an
 * abandoned request costs everyone else (about 1 s) while a usual sentence stays whole. About 8 s
 * of speech.
 */
const MAX_PASS_WEIGHT = 80;

export interface SherpaTtsEngine extends TtsEngine {
  passes(): Promise<SherpaTtsPasses>;
}

export async function createSherpaTtsEngine(options: SherpaTtsOptions): Promise<SherpaTtsEngine> {
  if (options.models.length === 0) throw new Error("sherpa-onnx TTS: no voice model given");
  const threads = options.threads ?? 1;
  const host = new ModelHost<SherpaMethods>("sherpa-onnx TTS", SHERPA_HOST, {
    timeoutMs: options.timeoutMs ?? 10_000,
    maxRssMiB: options.maxHostMiB ?? 2048,
  });
  try {
    const version = await host.request("version", null);
    // Each voice loads on its own: one that cannot (a file sherpa-onnx cannot read, refused here
    // with a clear message before it could end the process) leaves the others serving.
    const models: NeuralVoiceModel[] = [];
    const unavailableParts: { id: string; reason: string }[] = [];
    const named = new Map<string, readonly NamedSpeaker[]>();
    /** Each model's build, as far as its speakers' measurements go: a new file is measured again. */
    const versions = new Map<string, string>();
    const loaded = new Map<string, LoadedTts>();
    for (const model of options.models) {
      try {
        if (model.problem) throw new Error(model.problem);
        const metadata = await checkModelFile(model.files.model, model.files.kind);
        if (model.files.kind === "kokoro") {
          await checkKokoroVoices(model.files.voices, metadata);
          named.set(model.name, kokoroSpeakers(metadata.get("speaker_names")!));
        }
        versions.set(model.name, `${(await stat(model.files.model)).size} bytes`);
        const params: LoadTtsParams = { name: model.name, files: model.files, threads };
        loaded.set(model.name, await host.setUp("loadTts", params));
        models.push(model);
      } catch (error) {
        unavailableParts.push({ id: `sherpa-onnx-voice ${model.name}`, reason: (error as Error).message });
      }
    }
    if (models.length === 0) {
      throw new Error(`no voice model could be loaded: ${unavailableParts.map((p) => p.reason).join("; ")}`);
    }
    const queue = new FairQueue("sherpa-onnx TTS", {
      concurrency: options.maxConcurrent ?? 2,
      maxQueued: options.maxQueued ?? 32,
      maxQueuedPerAccount: options.maxQueuedPerAccount ?? 8,
    });

    const generate = (
      params: GenerateParams,
      onChunk: (samples: Float32Array) => void,
      account: string,
      signal?: AbortSignal,
    ): Promise<number> =>
      // The slot is held until the host has stopped the work, cancelled or not (host.ts).
      queue.run(
        account,
        async () => {
          const result = (await host.request("generate", params, {
            ...(signal ? { signal } : {}),
            onChunk: (chunk) => onChunk(chunk as Float32Array),
          })) as { sampleRate: number };
          return result.sampleRate;
        },
        signal,
      );

    const speakers: SpeakerMap = await speakerMap({
      models: models.map((model) => {
        const speakers = named.get(model.name);
        return {
          ...model,
          ...loaded.get(model.name)!,
          version: versions.get(model.name)!,
          ...(speakers ? { named: speakers } : {}),
        };
      }),
      store: options.measurements,
      onFailed: (model, error) => {
        unavailableParts.push({ id: `sherpa-onnx-voice ${model}`, reason: error.message });
        const at = models.findIndex((m) => m.name === model);
        if (at >= 0) models.splice(at, 1);
      },
      sample: async (model, speaker, text) => {
        const parts: Float32Array[] = [];
        const sampleRate = await generate(
          { name: model, texts: [text], speaker, speed: 1 },
          (c) => parts.push(c),
          NO_ACCOUNT,
        );
        return { samples: concat(parts), sampleRate };
      },
    });

    const info: EngineInfo = {
      id: "sherpa-onnx",
      version: `${version}+${models.map((model) => model.name).join("+")}`,
      detail: models.map((model) => `${model.name} (${model.languages.join(", ")})`).join("; "),
    };

    async function* synthesizeStream(
      request: SynthesisRequest,
      signal?: AbortSignal,
    ): AsyncIterable<SynthesizedAudio> {
      const speaker = speakers.speakerFor(request.language, request.voice);
      const text = request.text.replace(CONTROL_CHARACTERS, " ");
      const { sampleRate } = loaded.get(speaker.model)!;
      if (text.trim() === "") return;
      const speed = Math.min(SPEED_RANGE.max, Math.max(SPEED_RANGE.min, request.voice.timbre.rate));
      // Sentences arrive while the model works and are handed on as they come; a consumer that
      // stops listening stops the model too.
      const sentences = new Channel<Float32Array>();
      const stopped = new AbortController();
      let failure: unknown;
      const generating = generate(
        {
          name: speaker.model,
          texts: boundedChunks(text, MAX_PASS_WEIGHT),
          speaker: speaker.id,
          speed,
          ...(speaker.lang ? { lang: speaker.lang } : {}),
        },
        (chunk) => sentences.push(chunk),
        request.account ?? NO_ACCOUNT,
        signal ? AbortSignal.any([signal, stopped.signal]) : stopped.signal,
      )
        .catch((error: unknown) => (failure = error))
        .finally(() => sentences.close());
      try {
        for await (const chunk of sentences) yield { samples: levelSpeech(chunk), sampleRate };
      } finally {
        stopped.abort(new Error("synthesis no longer wanted"));
      }
      await generating;
      if (failure !== undefined) throw failure;
    }

    return {
      info,
      capabilities: { languages: Object.freeze(speakers.languages()) },
      passes: async () => await host.request("ttsStats", null),
      unavailableParts,
      hosts: () => [host.status()],
      synthesizeStream,
      async synthesize(request, signal) {
        const parts: Float32Array[] = [];
        let sampleRate = loaded.get(speakers.speakerFor(request.language, request.voice).model)!.sampleRate;
        for await (const part of synthesizeStream(request, signal)) {
          parts.push(part.samples);
          sampleRate = part.sampleRate;
        }
        return { samples: concat(parts), sampleRate };
      },
      close: () => host.close(),
    };
  } catch (error) {
    await host.close();
    throw error;
  }
}

function concat(parts: readonly Float32Array[]): Float32Array {
  const out = new Float32Array(parts.reduce((sum, part) => sum + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}
