/**
 * The host process's streaming recognition (sherpa-onnx `OnlineRecognizer`, a streaming zipformer
 * transducer) and English punctuation (`OnlinePunctuation`). Every call here blocks this process
 * while it decodes, which is why it runs here and not in the service.
 *
 * Hotwords: sherpa-onnx's Node binding takes them only when a recognizer is created (no per-stream
 * hotwords, though its C API has them), so a session with context gets a recognizer built for its
 * hotwords, and each holds its own copy of the model. They are bounded: `MAX_BIASED` sets in all and
 * `MAX_BIASED_PER_ACCOUNT` per account (an account's new set replaces its least recently used
 * one). A dropped recognizer is freed as soon as no stream uses it: the binding frees native
 * objects only when JavaScript collects their handles, and the handles are too small for the
 * collector to hurry, so the host (started with --expose-gc) collects at once. The service runs
 * hotword recognizers in a host of their own (recognizer.ts), so building one never holds up
 * plain recognition.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Handlers } from "../kit/model-host/serve.js";
import { sherpa } from "./host-handlers.js";
import type {
  AcceptParams,
  LoadRecognizerParams,
  LoadedRecognizer,
  OpenParams,
  RecognitionResult,
  RecognizerStats,
  SherpaMethods,
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
/** Recognizers built for sessions' hotwords, kept at once (the plain one is always kept). */
const MAX_BIASED = 4;
/** Hotword recognizers one account keeps at once. */
const MAX_BIASED_PER_ACCOUNT = 2;
/**
 * Silence appended when an utterance ends: the model holds back its last ~0.45 s (its encoder's
 * right context) until more audio arrives.
 */
const TAIL = new Float32Array(Math.round(0.5 * SAMPLE_RATE));

interface Biased {
  readonly recognizer: OnlineRecognizer;
  /** The account that asked for it first: its share of `MAX_BIASED_PER_ACCOUNT`. */
  readonly account: string;
  /** Streams using it. */
  users: number;
  /** Dropped from the cache: freed when its last stream ends. */
  dropped: boolean;
}

interface LoadedModel {
  readonly params: LoadRecognizerParams;
  /** Undefined in the host that serves hotword recognition only. */
  readonly plain: OnlineRecognizer | undefined;
  /** By hotword set (its lines joined), most recently used last. */
  readonly biased: Map<string, Biased>;
  readonly punctuation: { addPunct(text: string): string } | undefined;
}

interface OpenStream {
  readonly recognizer: OnlineRecognizer;
  /** Dropped when it ends. */
  stream: OnlineStream | undefined;
  readonly model: LoadedModel;
  readonly biased: Biased | undefined;
}

const models = new Map<string, LoadedModel>();
const streams = new Map<number, OpenStream>();
let hotwordsDir: string | undefined;
/** Native recognizers not yet freed (for `stats`: proves that dropped ones go). */
let alive = 0;
const freed = new FinalizationRegistry<void>(() => alive--);
const gc = (globalThis as { gc?: () => void }).gc;
/** Collects once the caller's references are gone (the next turn of the event loop). */
const collect = () => {
  if (gc) setImmediate(gc);
};

function createRecognizer({ files, threads }: LoadRecognizerParams, hotwordsFile?: string): OnlineRecognizer {
  const recognizer = new OnlineRecognizer({
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
  alive++;
  freed.register(recognizer);
  return recognizer;
}

function loadRecognizer(params: LoadRecognizerParams): LoadedRecognizer {
  const punctuation = params.punctuation
    ? new OnlinePunctuation({
        model: { cnnBilstm: params.punctuation.model, bpeVocab: params.punctuation.bpeVocab, numThreads: 1 },
      })
    : undefined;
  models.set(params.name, {
    params,
    plain: params.hotwordsOnly ? undefined : createRecognizer(params),
    biased: new Map(),
    punctuation,
  });
  return { punctuation: punctuation !== undefined };
}

/** Takes a hotword recognizer out of the cache; freed now if no stream uses it, else when the last ends. */
function drop(model: LoadedModel, key: string): void {
  const biased = model.biased.get(key)!;
  model.biased.delete(key);
  biased.dropped = true;
  if (biased.users === 0) collect();
}

async function biasedFor(model: LoadedModel, hotwords: readonly string[], account: string): Promise<Biased> {
  const key = hotwords.join("\n");
  const cached = model.biased.get(key);
  if (cached) {
    model.biased.delete(key);
    model.biased.set(key, cached);
    return cached;
  }
  // The account's own least recently used set makes room first, then the least recently used of all.
  // Keys only: nothing here may keep a dropped recognizer from being collected.
  const mine = [...model.biased].filter(([, biased]) => biased.account === account).map(([key]) => key);
  if (mine.length >= MAX_BIASED_PER_ACCOUNT) drop(model, mine[0]!);
  if (model.biased.size >= MAX_BIASED) drop(model, model.biased.keys().next().value!);
  hotwordsDir ??= await mkdtemp(path.join(tmpdir(), "relay-hotwords-"));
  const file = path.join(
    hotwordsDir,
    `${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2)}.txt`,
  );
  await writeFile(file, `${key}\n`);
  try {
    const biased: Biased = {
      recognizer: createRecognizer(model.params, file),
      account,
      users: 0,
      dropped: false,
    };
    model.biased.set(key, biased);
    return biased;
  } finally {
    await rm(file, { force: true });
  }
}

async function open(
  { model: name, hotwords, account }: OpenParams,
  request: { id: number },
): Promise<number> {
  const model = models.get(name);
  if (!model) throw new Error(`no recognizer "${name}" loaded`);
  if (hotwords.length === 0) {
    if (!model.plain) throw new Error("this host serves hotword recognition only");
    streams.set(request.id, {
      recognizer: model.plain,
      stream: model.plain.createStream(),
      model,
      biased: undefined,
    });
    return request.id;
  }
  const biased = await biasedFor(model, hotwords, account);
  biased.users++;
  streams.set(request.id, {
    recognizer: biased.recognizer,
    stream: biased.recognizer.createStream(),
    model,
    biased,
  });
  return request.id;
}

/** Ends a stream: its native stream is released, and a dropped recognizer it was the last user of is freed. */
function end(id: number): void {
  const open = streams.get(id);
  if (!open) return;
  streams.delete(id);
  open.stream = undefined;
  if (open.biased && --open.biased.users === 0 && open.biased.dropped) collect();
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
  stream!.acceptWaveform({ samples, sampleRate: SAMPLE_RATE });
  while (recognizer.isReady(stream!)) recognizer.decode(stream!);
  return result(recognizer, stream!);
}

/** The utterance's final result: its held-back tail decoded, punctuated when the model has punctuation. */
function finish({ stream: id }: StreamParams): RecognitionResult {
  const { recognizer, stream, model } = streamOf(id);
  try {
    stream!.acceptWaveform({ samples: TAIL, sampleRate: SAMPLE_RATE });
    stream!.inputFinished();
    while (recognizer.isReady(stream!)) recognizer.decode(stream!);
    const heard = result(recognizer, stream!);
    const text =
      model.punctuation && heard.text ? model.punctuation.addPunct(heard.text.toLowerCase()) : heard.text;
    return { ...heard, text };
  } finally {
    end(id);
  }
}

function close({ stream: id }: StreamParams): void {
  end(id);
}

/** Recognizers alive (not yet freed), hotword sets cached per account, streams open, and the memory they take. */
function stats(): RecognizerStats {
  const hotwordSets: Record<string, number> = {};
  for (const model of models.values())
    for (const { account } of model.biased.values()) hotwordSets[account] = (hotwordSets[account] ?? 0) + 1;
  return { recognizers: alive, hotwordSets, streams: streams.size, rss: process.memoryUsage.rss() };
}

export const asrHandlers: Pick<
  Handlers<SherpaMethods>,
  "loadRecognizer" | "open" | "accept" | "finish" | "close" | "recognizerStats"
> = {
  loadRecognizer,
  open,
  accept,
  finish,
  close,
  recognizerStats: stats,
};
