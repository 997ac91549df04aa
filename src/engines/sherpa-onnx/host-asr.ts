/**
 * The host process's streaming recognition (sherpa-onnx `OnlineRecognizer`, a streaming zipformer
 * transducer) and English punctuation (`OnlinePunctuation`). Every call here blocks this process
 * while it decodes, which is why it runs here and not in the service.
 *
 * Hotwords: sherpa-onnx's Node binding takes them only when a recognizer is created (no per-stream
 * hotwords), so a session with context gets a recognizer built for its hotwords. Those are kept for
 * the few most recent hotword sets (`MAX_BIASED`); each holds its own copy of the model.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Handler } from "../model-host/serve.js";
import { sherpa } from "./host-handlers.js";
import type {
  AcceptParams,
  LoadRecognizerParams,
  LoadedRecognizer,
  OpenParams,
  RecognitionResult,
  StreamParams,
} from "./host-protocol.js";

interface OnlineStream {
  acceptWaveform(audio: { samples: Float32Array; sampleRate: number }): void;
  inputFinished(): void;
}

interface OnlineRecognizer {
  createStream(): OnlineStream;
  isReady(stream: OnlineStream): boolean;
  decode(stream: OnlineStream): void;
  isEndpoint(stream: OnlineStream): boolean;
  getResult(stream: OnlineStream): { text: string; tokens: string[]; timestamps: number[] };
}

const { OnlineRecognizer, OnlinePunctuation } = sherpa as {
  OnlineRecognizer: new (config: unknown) => OnlineRecognizer;
  OnlinePunctuation: new (config: unknown) => { addPunct(text: string): string };
};

const SAMPLE_RATE = 16_000;
/** Recognizers built for a session's hotwords, kept at once (the plain one is always kept). */
const MAX_BIASED = 2;
/**
 * Silence appended when an utterance ends: the model holds back its last ~0.45 s (its encoder's
 * right context) until more audio arrives.
 */
const TAIL = new Float32Array(Math.round(0.5 * SAMPLE_RATE));

interface LoadedModel {
  readonly params: LoadRecognizerParams;
  readonly plain: OnlineRecognizer;
  /** By hotword set (its lines joined), most recently used last. */
  readonly biased: Map<string, OnlineRecognizer>;
  readonly punctuation: { addPunct(text: string): string } | undefined;
}

const models = new Map<string, LoadedModel>();
const streams = new Map<number, { recognizer: OnlineRecognizer; stream: OnlineStream; model: LoadedModel }>();
let hotwordsDir: string | undefined;

function createRecognizer({ files, threads }: LoadRecognizerParams, hotwordsFile?: string): OnlineRecognizer {
  return new OnlineRecognizer({
    featConfig: { sampleRate: SAMPLE_RATE, featureDim: 80 },
    modelConfig: {
      transducer: { encoder: files.encoder, decoder: files.decoder, joiner: files.joiner },
      tokens: files.tokens,
      // Named here as well: an encoder without `model_type` would otherwise crash the process.
      modelType: "zipformer2",
      numThreads: threads,
      provider: "cpu",
      debug: 0,
      ...(hotwordsFile ? { modelingUnit: "bpe", bpeVocab: files.bpeVocab } : {}),
    },
    // Hotwords need beam search; plain recognition keeps the cheaper greedy search.
    decodingMethod: hotwordsFile ? "modified_beam_search" : "greedy_search",
    ...(hotwordsFile ? { maxActivePaths: 4, hotwordsFile, hotwordsScore: 1.5 } : {}),
    enableEndpoint: true,
    rule1MinTrailingSilence: 2.4,
    rule2MinTrailingSilence: 0.8,
    rule3MinUtteranceLength: 20,
  });
}

function loadRecognizer(params: LoadRecognizerParams): LoadedRecognizer {
  const punctuation = params.punctuation
    ? new OnlinePunctuation({
        model: { cnnBilstm: params.punctuation.model, bpeVocab: params.punctuation.bpeVocab, numThreads: 1 },
      })
    : undefined;
  models.set(params.name, { params, plain: createRecognizer(params), biased: new Map(), punctuation });
  return { punctuation: punctuation !== undefined };
}

async function recognizerFor(model: LoadedModel, hotwords: readonly string[]): Promise<OnlineRecognizer> {
  if (hotwords.length === 0) return model.plain;
  const key = hotwords.join("\n");
  const cached = model.biased.get(key);
  if (cached) {
    model.biased.delete(key);
    model.biased.set(key, cached);
    return cached;
  }
  hotwordsDir ??= await mkdtemp(path.join(tmpdir(), "relay-hotwords-"));
  const file = path.join(hotwordsDir, `${model.biased.size}-${Date.now()}.txt`);
  await writeFile(file, `${key}\n`);
  try {
    const recognizer = createRecognizer(model.params, file);
    model.biased.set(key, recognizer);
    // The least recently used goes; streams still using it keep it alive until they end.
    if (model.biased.size > MAX_BIASED) model.biased.delete(model.biased.keys().next().value!);
    return recognizer;
  } finally {
    await rm(file, { force: true });
  }
}

async function open({ model: name, hotwords }: OpenParams, request: { id: number }): Promise<number> {
  const model = models.get(name);
  if (!model) throw new Error(`no recognizer "${name}" loaded`);
  const recognizer = await recognizerFor(model, hotwords);
  streams.set(request.id, { recognizer, stream: recognizer.createStream(), model });
  return request.id;
}

function streamOf(id: number) {
  const open = streams.get(id);
  if (!open) throw new Error(`no recognition stream ${id}`);
  return open;
}

function result(recognizer: OnlineRecognizer, stream: OnlineStream): RecognitionResult {
  const { text, tokens, timestamps } = recognizer.getResult(stream);
  return { text, tokens, timestamps, endpoint: recognizer.isEndpoint(stream) };
}

function accept({ stream: id, samples }: AcceptParams): RecognitionResult {
  const { recognizer, stream } = streamOf(id);
  stream.acceptWaveform({ samples, sampleRate: SAMPLE_RATE });
  while (recognizer.isReady(stream)) recognizer.decode(stream);
  return result(recognizer, stream);
}

/** The utterance's final result: its held-back tail decoded, punctuated when the model has punctuation. */
function finish({ stream: id }: StreamParams): RecognitionResult {
  const { recognizer, stream, model } = streamOf(id);
  streams.delete(id);
  stream.acceptWaveform({ samples: TAIL, sampleRate: SAMPLE_RATE });
  stream.inputFinished();
  while (recognizer.isReady(stream)) recognizer.decode(stream);
  const heard = result(recognizer, stream);
  const text =
    model.punctuation && heard.text ? model.punctuation.addPunct(heard.text.toLowerCase()) : heard.text;
  return { ...heard, text };
}

function close({ stream: id }: StreamParams): void {
  streams.delete(id);
}

export const asrHandlers: Record<string, Handler> = {
  loadRecognizer,
  open,
  accept,
  finish,
  close,
};
