/**
 * Tone colour conversion with OpenVoice V2 (voice_type=clone): the extractor measures a speaker's
 * tone colour from their own speech, the converter moves synthesized speech to it. Both run in a
 * host process (host-main.ts says why) behind the kit's deadlines, restarts and memory ceiling.
 *
 * Load, not abuse, is what a host must survive. Passes run one at a time (each uses the configured
 * threads), accounts in turn (the kit's fair queue), at most `maxQueued` waiting and 4 per account;
 * beyond that a request fails at once with `EngineBusyError`. A live sentence is converted only
 * when the converter is free, and is otherwise refused at once (the caller speaks it in the library
 * voice): waiting behind others' sentences would make it late, and a converter that runs at about
 * 0.7–0.9 of real time on 2 cores (docs/benchmarks.md) cannot keep up with several speakers. A dubbing job waits its turn
 * (`mayWait`). A sentence is converted in pieces (chunks.ts), its next piece queued before the
 * current one is spoken so that it keeps its turn. Each request is bounded in length
 * (`MAX_SECONDS`): a sentence, or a speaker's reference speech (cut to it).
 */
import { availableParallelism } from "node:os";
import path from "node:path";
import { resample } from "../../audio/resampler.js";
import { EngineBusyError } from "../../core/busy.js";
import type { SynthesizedAudio, ToneColor, ToneColorEngine, ToneColorRequest } from "../../core/contracts.js";
import { FairQueue, NO_ACCOUNT } from "../kit/model-host/fair-queue.js";
import { ModelHost } from "../kit/model-host/host.js";
import type { ToneColorModelEntry } from "./catalogue.js";
import { readToneColorModel } from "./model-check.js";
import { ChunkStitcher, planChunks, type ChunkPlan } from "./chunks.js";
import type { OpenVoiceMethods } from "./host-protocol.js";

const HOST_MAIN = new URL("./host-main.js", import.meta.url);

/** OpenVoice's own default for how much of the source's variation the flow keeps. */
const TAU = 0.3;
/** The longest audio one request takes (a sentence is far shorter; references are cut to it). */
export const MAX_SECONDS = 30;
/** Seconds of a speaker's speech before their first tone colour (upstream asks for about 5). */
const MIN_SECONDS = 3;
/**
 * Pieces a sentence is converted in (chunks.ts): a short first one for the first audio's latency,
 * longer ones after it; context on each side covers the receptive field of the converter's
 * convolutions (its WaveNet and HiFi-GAN stacks span well under 0.3 s), and neighbours cross-fade
 * over 20 ms.
 */
const FIRST_PIECE_SECONDS = 1;
const NEXT_PIECE_SECONDS = 2.5;
const CONTEXT_SECONDS = 0.3;
const FADE_SECONDS = 0.01;

export interface OpenVoiceOptions {
  readonly entry: ToneColorModelEntry;
  /** The model's directory (models.ts). */
  readonly dir: string;
  /**
   * onnxruntime threads per pass (default: the machine's cores, up to 4). Passes run one at a time,
   * so each may use every core: a piece's latency halves on 2 cores, and the throughput is the same.
   */
  readonly threads?: number;
  /** Passes waiting (reference extractions, dubbing's sentences); beyond it a request fails at once (default 8). */
  readonly maxQueued?: number;
  readonly timeoutMs?: number;
  readonly maxHostMiB?: number;
}

const signalOf = ({ signal }: ToneColorRequest) => (signal ? { signal } : {});

export async function createOpenVoiceEngine(options: OpenVoiceOptions): Promise<ToneColorEngine> {
  const { entry, dir } = options;
  const host = new ModelHost<OpenVoiceMethods>("openvoice tone colour", HOST_MAIN, {
    timeoutMs: options.timeoutMs ?? 20_000,
    ...(options.maxHostMiB === undefined ? {} : { maxRssMiB: options.maxHostMiB }),
  });
  try {
    // Refused here with the file and what it lacks, not deep inside onnxruntime.
    const config = await readToneColorModel(dir, entry);
    if (typeof config === "string") throw new Error(config);
    const { sampleRate } = config;
    const { dim, runtime } = await host.setUp("load", {
      spectrogram: { nFft: config.filterLength, hop: config.hopLength, win: config.winLength },
      extractor: path.join(dir, entry.files.extractor),
      converter: path.join(dir, entry.files.converter),
      threads: options.threads ?? Math.min(4, availableParallelism()),
    });
    const queue = new FairQueue("tone colour conversion", {
      concurrency: 1,
      maxQueued: options.maxQueued ?? 8,
      maxQueuedPerAccount: 4,
    });
    const pass = <T>(request: ToneColorRequest, work: () => Promise<T>): Promise<T> =>
      queue.run(request.account ?? NO_ACCOUNT, work, request.signal);
    const longest = MAX_SECONDS * sampleRate;
    const hop = config.hopLength;
    const seconds = (s: number) => Math.round(s * sampleRate);
    const chunking = {
      first: seconds(FIRST_PIECE_SECONDS),
      next: seconds(NEXT_PIECE_SECONDS),
      context: seconds(CONTEXT_SECONDS),
      fade: seconds(FADE_SECONDS),
      step: hop,
    };
    const atModelRate = (audio: SynthesizedAudio) => resample(audio.samples, audio.sampleRate, sampleRate);

    return {
      info: {
        id: "openvoice",
        version: `${entry.name}+onnxruntime-${runtime}`,
        detail: `${entry.repo} (${dim}-value tone colours, ${sampleRate} Hz)`,
      },
      capabilities: { sampleRate, minSeconds: MIN_SECONDS },
      async toneColor(audio, request = {}): Promise<ToneColor> {
        // A reference longer than a request may be is cut: its first MAX_SECONDS say enough.
        const samples = (await atModelRate(audio)).subarray(0, longest);
        const vector = await pass(request, () => host.request("extract", { samples }, signalOf(request)));
        return { vector, seconds: samples.length / sampleRate };
      },
      async *convert(audio, target, request = {}): AsyncIterable<SynthesizedAudio> {
        const { running, queued } = queue.stats();
        if (!request.mayWait && running + queued > 0)
          throw new EngineBusyError("tone colour conversion is busy with another sentence");
        const samples = await atModelRate(audio);
        if (samples.length > longest)
          throw new Error(`tone colour conversion takes at most ${MAX_SECONDS} s of speech at once`);
        // The voice being replaced, from the whole sentence (a piece alone says less of it).
        const source = await pass(request, () => host.request("extract", { samples }, signalOf(request)));
        const plans = planChunks(samples.length, chunking);
        const stitcher = new ChunkStitcher(chunking.fade);
        const convertPiece = (plan: ChunkPlan) => {
          // Whole hops in, so the converter's output covers the piece exactly.
          const piece = new Float32Array(Math.ceil((plan.to - plan.from) / hop) * hop);
          piece.set(samples.subarray(plan.from, plan.to));
          const converted = pass(request, () =>
            host.request(
              "convert",
              { samples: piece, source, target: target.vector, tau: TAU },
              signalOf(request),
            ),
          );
          // Awaited below; a sentence abandoned half-way leaves its last piece unobserved.
          converted.catch(() => undefined);
          return converted;
        };
        // The next piece is queued before this one is spoken, so the sentence keeps its turn.
        let next = convertPiece(plans[0]!);
        for (const [k, plan] of plans.entries()) {
          const converted = await next;
          if (k + 1 < plans.length) next = convertPiece(plans[k + 1]!);
          const exact = new Float32Array(plan.to - plan.from);
          exact.set(converted.subarray(0, exact.length));
          yield { samples: stitcher.push(plan, plans[k + 1], exact), sampleRate };
        }
      },
      hosts: () => [host.status()],
      close: () => host.close(),
    };
  } catch (error) {
    await host.close();
    throw error;
  }
}
