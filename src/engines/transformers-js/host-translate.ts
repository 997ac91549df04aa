/**
 * Translation in the host process: models loaded on first use, at most `RELAY_MT_MAX_LOADED` at a
 * time (the least recently used is released first), each shared by every batch; a batch is one
 * greedy `generate` over padded inputs.
 */
import path from "node:path";
import {
  AutoModelForSeq2SeqLM,
  AutoTokenizer,
  env,
  StoppingCriteria,
  type PreTrainedModel,
  type PreTrainedTokenizer,
  type Tensor,
} from "@huggingface/transformers";
import type { HandlerRequest, Handlers } from "../kit/model-host/serve.js";
import type {
  HostStats,
  TranslateBatchParams,
  TranslateBatchResult,
  TranslationMethods,
  TranslationModelFiles,
} from "./host-protocol.js";

/** Threads each model's sessions use (the service sets it; onnxruntime's default is every core). */
const THREADS = Number(process.env.RELAY_MT_THREADS ?? 1);
const MAX_LOADED = Number(process.env.RELAY_MT_MAX_LOADED ?? 4);
/** Longest translation, in tokens, whatever the input: a model that never ends stops here. */
const MAX_NEW_TOKENS = 512;

// Models come from the models directory only: never from the network, never into a cache.
env.allowRemoteModels = false;
env.allowLocalModels = true;
env.useFSCache = false;

interface Loaded {
  readonly tokenizer: PreTrainedTokenizer;
  readonly model: PreTrainedModel;
}

/** Loaded models by name, least recently used first. */
const loaded = new Map<string, Promise<Loaded>>();
/** Loads a model (one load at a time: see `oneAtATime`; transformers.js reads their location from a global). */
async function load(files: TranslationModelFiles): Promise<Loaded> {
  env.localModelPath = `${path.dirname(files.dir)}/`;
  const id = path.basename(files.dir);
  const tokenizer = await AutoTokenizer.from_pretrained(id);
  const model = await AutoModelForSeq2SeqLM.from_pretrained(id, {
    dtype: "q8",
    device: "cpu",
    session_options: { intraOpNumThreads: THREADS, interOpNumThreads: 1 },
  });
  return { tokenizer, model };
}

/** The model, loaded if it is not, and now the most recently used. */
async function modelFor(files: TranslationModelFiles): Promise<Loaded> {
  const found = loaded.get(files.name);
  if (found) {
    loaded.delete(files.name);
    loaded.set(files.name, found);
    return found;
  }
  const pending = load(files);
  loaded.set(files.name, pending);
  // A model that failed to load is not kept: the next batch tries again.
  pending.catch(() => {
    if (loaded.get(files.name) === pending) loaded.delete(files.name);
  });
  while (loaded.size > MAX_LOADED) {
    const [oldest, model] = loaded.entries().next().value!;
    loaded.delete(oldest);
    void model.then(({ model }) => model.dispose()).catch(() => undefined);
  }
  return pending;
}

/**
 * The host's work, one piece at a time: a model is released only between batches, never while a
 * batch uses it (the service sends one batch at a time, but loads ahead of need may come meanwhile).
 */
let working: Promise<unknown> = Promise.resolve();
function oneAtATime<T>(work: () => Promise<T>): Promise<T> {
  const run = working.then(work);
  working = run.catch(() => undefined);
  return run;
}

/** Stops generation at the next token once the service has cancelled the batch. */
class WhenCancelled extends StoppingCriteria {
  constructor(private readonly request: HandlerRequest) {
    super();
  }

  override _call(inputIds: number[][]): boolean[] {
    return inputIds.map(() => this.request.cancelled());
  }
}

async function translate(
  { model: files, from, to, texts }: TranslateBatchParams,
  request: HandlerRequest,
): Promise<TranslateBatchResult> {
  // A first use loads the model (seconds for M2M100): the service is told the host is not stuck.
  const { tokenizer, model } = await request.whileWorking(modelFor(files));
  const options = { padding: true, truncation: true };
  // M2M100 is told both languages: the source's token leads the input, and the target's, which
  // the tokenizer puts in `forced_bos_token_id`, is generated first.
  const languages: { src_lang: string; tgt_lang: string; forced_bos_token_id?: number } = {
    src_lang: from,
    tgt_lang: to,
  };
  const inputs = (
    files.family === "m2m100"
      ? (tokenizer as unknown as M2M100Tokenizer)._build_translation_inputs([...texts], options, languages)
      : tokenizer([...texts], options)
  ) as { input_ids: Tensor; attention_mask: Tensor };
  const generation =
    languages.forced_bos_token_id === undefined ? {} : { forced_bos_token_id: languages.forced_bos_token_id };
  const inputLength = inputs.input_ids.dims[1]!;
  const output = (await model.generate({
    ...inputs,
    ...generation,
    // Greedy: transformers.js decodes one beam (published scores are with beam search).
    num_beams: 1,
    do_sample: false,
    max_new_tokens: Math.min(MAX_NEW_TOKENS, 2 * inputLength + 10),
    stopping_criteria: [new WhenCancelled(request)],
  } as Parameters<PreTrainedModel["generate"]>[0])) as Tensor;
  const eos = model.config["eos_token_id" as keyof typeof model.config] as unknown as number;
  const rows = output.tolist() as bigint[][];
  const translations = rows.map((row) => {
    // A finished row goes on with the batch's longer ones: what follows its end is not its text.
    const tokens = row.slice(1).map(Number);
    const end = tokens.indexOf(eos);
    return tokenizer.decode(end < 0 ? tokens : tokens.slice(0, end), { skip_special_tokens: true }).trim();
  });
  return { translations };
}

interface M2M100Tokenizer {
  _build_translation_inputs(texts: string[], options: object, generation: object): unknown;
}

function stats(): HostStats {
  return { loaded: [...loaded.keys()], rss: process.memoryUsage().rss };
}

export function translationHandlers(): Handlers<TranslationMethods> {
  return {
    version: () => env.version,
    translate: (params, request) => oneAtATime(() => translate(params, request)),
    load: (files, request) =>
      oneAtATime(async () => {
        await request.whileWorking(modelFor(files));
        return null;
      }),
    stats,
  };
}
