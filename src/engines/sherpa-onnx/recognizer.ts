/**
 * Streaming English recognition through sherpa-onnx (a streaming zipformer transducer), in the
 * host process (host-asr.ts). Unlike whisper.cpp and PocketSphinx it is asked for nothing: every
 * piece of audio is decoded as it arrives, partial results are pushed as the text grows, and the
 * model's own endpoint rules (trailing silence after words) end an utterance. `finish` decodes the
 * held-back tail at once and, with the punctuation model, gives the final its sentences.
 */
import { bulkhead, BulkheadRejectedError } from "cockatiel";
import { int16ToFloat32 } from "../../audio/pcm.js";
import { concatPcm } from "../../audio/pcm.js";
import { AsrStreamBase } from "../kit/asr-stream.js";
import type {
  AsrEngine,
  AsrStreamOptions,
  Hypothesis,
  RecognitionEvent,
  RecognitionOptions,
  RecognitionStream,
  WordTiming,
} from "../../core/contracts.js";
import { ModelHost, type PinnedHost } from "../kit/model-host/host.js";
import { NO_ACCOUNT } from "../kit/model-host/fair-queue.js";
import { SHERPA_HOST } from "./host-entry.js";
import type {
  LoadRecognizerParams,
  RecognitionResult,
  RecognizerStats,
  SherpaMethods,
} from "./host-protocol.js";
import { glossaryFromContext } from "../../core/glossary.js";
import { hotwordsFrom } from "./hotwords.js";
import { checkModelFile } from "./model-check.js";

export interface SherpaRecognizerOptions {
  /** The catalogue name (names the engine's version). */
  readonly name: string;
  readonly files: LoadRecognizerParams["files"];
  readonly punctuation?: LoadRecognizerParams["punctuation"];
  /** onnxruntime threads per decode. Default 1. */
  readonly threads?: number;
  /** Utterances open at once; beyond it a new one fails (the session reports it). Default 64. */
  readonly maxStreams?: number;
  /** A host that does not answer within this fails the utterance and is replaced (default 10 s). */
  readonly timeoutMs?: number;
  /** A host is replaced once its resident memory passes this (MiB; default 2048). */
  readonly maxHostMiB?: number;
}

const SAMPLE_RATE = 16_000;
/**
 * Audio is sent to the host in pieces of at least this many samples (160 ms): the model decodes in
 * chunks of about 320 ms, so smaller pieces only add messages.
 */
const SEND_SAMPLES = 2_560;

export interface SherpaRecognizerEngine extends AsrEngine {
  /** The hotword host's recognizers, cached sets and memory (for tests and benchmarks). */
  hotwordStats(): Promise<RecognizerStats>;
}

export async function createSherpaRecognizer(
  options: SherpaRecognizerOptions,
): Promise<SherpaRecognizerEngine> {
  await checkModelFile(options.files.encoder, "zipformer2-encoder");
  await checkModelFile(options.files.decoder, "transducer-decoder");
  if (options.punctuation) await checkModelFile(options.punctuation.model, "punctuation");
  const hostOptions = {
    timeoutMs: options.timeoutMs ?? 10_000,
    maxRssMiB: options.maxHostMiB ?? 2048,
    // The host frees dropped hotword recognizers itself (host-asr.ts).
    execArgv: ["--expose-gc"],
  };
  // Plain recognition, and recognition with a session's hotwords in a host of its own: building a
  // recognizer for new hotwords blocks its host for as long as a model load.
  const host = new ModelHost<SherpaMethods>("sherpa-onnx recognizer", SHERPA_HOST, hostOptions);
  const hotwordHost = new ModelHost<SherpaMethods>(
    "sherpa-onnx recognizer (hotwords)",
    SHERPA_HOST,
    hostOptions,
  );
  try {
    const version = await host.request("version", null);
    const params: LoadRecognizerParams = {
      name: options.name,
      files: options.files,
      ...(options.punctuation ? { punctuation: options.punctuation } : {}),
      threads: options.threads ?? 1,
    };
    const loaded = await host.setUp("loadRecognizer", params);
    /** The hotword host loads its models when the first session with context needs it. */
    let hotwordsLoaded: Promise<unknown> | undefined;
    const hotwordHostReady = () => {
      hotwordsLoaded ??= hotwordHost.setUp("loadRecognizer", { ...params, hotwordsOnly: true });
      hotwordsLoaded.catch(() => (hotwordsLoaded = undefined));
      return hotwordsLoaded;
    };
    const maxStreams = options.maxStreams ?? 64;
    // Opening costs a model load when a session's hotwords are new: one at a time, the rest wait.
    const opening = bulkhead(1, maxStreams);
    let open = 0;

    const openStream = async (streamOptions: AsrStreamOptions): Promise<SherpaStream> => {
      if (streamOptions.language !== "en") {
        throw new Error(`the streaming recognizer hears English only, not "${streamOptions.language}"`);
      }
      if (open >= maxStreams)
        throw new Error(`the streaming recognizer is busy (${maxStreams} utterances open)`);
      const hotwords = hotwordsFrom(streamOptions.glossary ?? glossaryFromContext(streamOptions.context));
      const account = streamOptions.account ?? NO_ACCOUNT;
      let pinned: PinnedHost<SherpaMethods> | undefined;
      let id: number;
      try {
        const opened = async () => {
          if (hotwords.length === 0) {
            pinned = host.pin();
            return pinned.request("open", { model: options.name, hotwords, account });
          }
          await hotwordHostReady();
          pinned = hotwordHost.pin();
          return pinned.request("open", { model: options.name, hotwords, account });
        };
        id = (await (hotwords.length === 0 ? opened() : opening.execute(opened))) as number;
      } catch (error) {
        pinned?.release();
        if (error instanceof BulkheadRejectedError) {
          throw new Error(`the streaming recognizer is busy (${maxStreams} utterances opening)`, {
            cause: error,
          });
        }
        throw error;
      }
      open++;
      const stream = pinned!;
      return new SherpaStream(stream, id, () => {
        open--;
        stream.release();
      });
    };

    return {
      info: {
        id: "sherpa-onnx",
        version: `${version}+${options.name}${loaded.punctuation ? "+punctuation" : ""}`,
        detail: `streaming ${options.name}${loaded.punctuation ? ", with punctuation" : ""}`,
      },
      capabilities: {
        languages: ["en"],
        sampleRate: SAMPLE_RATE,
        partialResults: true,
        wordTimings: true,
        punctuation: loaded.punctuation,
      },
      createStream: openStream,
      async openRecognition(recognition: RecognitionOptions): Promise<RecognitionStream> {
        return new PushedRecognition(await openStream(recognition), recognition.onEvent);
      },
      hosts: () => [host.status(), hotwordHost.status()],
      hotwordStats: async () => await hotwordHost.request("recognizerStats", null),
      async close() {
        await Promise.all([host.close(), hotwordHost.close()]);
      },
    };
  } catch (error) {
    await Promise.all([host.close(), hotwordHost.close()]);
    throw error;
  }
}

/** One utterance on the host: audio goes out in pieces, each answered with what is heard so far. */
class SherpaStream extends AsrStreamBase {
  private unsent: Int16Array[] = [];
  private unsentSamples = 0;
  private heard: RecognitionResult = { text: "", tokens: [], timestamps: [], endpoint: false };
  /** Samples the host has heard (the rest wait in `unsent`). */
  private sent = 0;
  private released = false;

  constructor(
    private readonly host: PinnedHost<SherpaMethods>,
    private readonly id: number,
    private readonly onRelease: () => void,
  ) {
    super("sherpa-onnx");
  }

  /** What was heard up to the last piece sent (whether the model saw an endpoint). */
  get latest(): RecognitionResult {
    return this.heard;
  }

  /** How much audio `latest` covers. */
  get latestMs(): number {
    return this.sent / (SAMPLE_RATE / 1000);
  }

  protected async accept(pcm: Int16Array): Promise<void> {
    this.unsent.push(pcm);
    this.unsentSamples += pcm.length;
    if (this.unsentSamples >= SEND_SAMPLES) await this.send();
  }

  protected async currentHypothesis(): Promise<Hypothesis> {
    await this.send();
    return toHypothesis(this.heard, this.sent);
  }

  protected async conclude(): Promise<Hypothesis> {
    // The host drops the stream as soon as it is asked to finish it, whatever happens next.
    let finishing = false;
    try {
      await this.send();
      finishing = true;
      const final = await this.host.request("finish", { stream: this.id });
      return toHypothesis(final, this.sent);
    } finally {
      this.release(!finishing);
    }
  }

  protected aborted(): void {
    this.release(true);
  }

  private async send(): Promise<void> {
    if (this.unsentSamples === 0) return;
    const pcm = concatPcm(this.unsent.splice(0));
    this.unsentSamples = 0;
    this.heard = await this.host.request("accept", {
      stream: this.id,
      samples: int16ToFloat32(pcm),
    });
    this.sent += pcm.length;
  }

  private release(tellHost: boolean): void {
    if (this.released) return;
    this.released = true;
    this.onRelease();
    if (tellHost) this.host.request("close", { stream: this.id }).catch(() => undefined);
  }
}

/** The push interface over a stream: a partial each time the text grows, the model's endpoint once. */
class PushedRecognition implements RecognitionStream {
  private lastText = "";
  private endpointSent = false;
  private open = true;

  constructor(
    private readonly stream: SherpaStream,
    private readonly onEvent: (event: RecognitionEvent) => void,
  ) {}

  async write(pcm: Int16Array): Promise<void> {
    const before = this.stream.latest;
    await this.stream.write(pcm);
    const heard = this.stream.latest;
    if (!this.open || heard === before) return;
    if (heard.text !== this.lastText) {
      this.lastText = heard.text;
      const audioMs = this.stream.latestMs;
      this.onEvent({
        type: "partial",
        hypothesis: toHypothesis(heard, audioMs * (SAMPLE_RATE / 1000)),
        audioMs,
      });
    }
    // The model's endpoint rules also fire on long silence with no words: only words end an utterance.
    if (heard.endpoint && heard.text !== "" && !this.endpointSent) {
      this.endpointSent = true;
      this.onEvent({ type: "endpoint" });
    }
  }

  async finish(lastAudio?: Int16Array): Promise<Hypothesis> {
    if (lastAudio && lastAudio.length > 0) await this.stream.write(lastAudio);
    this.open = false;
    return this.stream.finish();
  }

  abort(): void {
    this.open = false;
    this.stream.abort();
  }
}

/**
 * The host's result as a hypothesis: the English model writes upper case, given sentence case by
 * the punctuation model when there is one and lower case otherwise (as PocketSphinx writes);
 * words are the BPE pieces joined ("▁" opens a word), each ending where the next begins.
 */
function toHypothesis(result: RecognitionResult, samplesHeard: number): Hypothesis {
  const text = /\p{Ll}/u.test(result.text) ? result.text.trim() : result.text.toLowerCase().trim();
  const starts: { word: string; startMs: number }[] = [];
  result.tokens.forEach((token, i) => {
    const ms = Math.round((result.timestamps[i] ?? 0) * 1000);
    if (token.startsWith("▁") || starts.length === 0)
      starts.push({ word: token.replace(/^▁/u, ""), startMs: ms });
    else starts[starts.length - 1]!.word += token;
  });
  const endOfAudio = Math.round(samplesHeard / (SAMPLE_RATE / 1000));
  const words: WordTiming[] = starts.map((word, i) => ({
    word: word.word.toLowerCase(),
    startMs: word.startMs,
    endMs: starts[i + 1]?.startMs ?? Math.max(word.startMs + 1, endOfAudio),
  }));
  return { text, words };
}
