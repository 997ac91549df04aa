/**
 * Neural machine translation in the service's process tree: Marian (Opus-MT, one model per
 * direction) and M2M100 (many-to-many) models as Hugging Face publishes them in ONNX, run by
 * transformers.js on onnxruntime-node in a host process of their own (host-main.ts says why).
 *
 * A text is cut into sentences, and each sentence waits for the host with the other sessions'
 * (batches.ts): sentences that arrive together are translated in one batch. Every model is loaded
 * once in the host and shared by every session; the least recently used is released beyond
 * `maxLoaded`. The models are sentence-level: the session's history and context are not used.
 */
import { NO_ACCOUNT } from "../kit/model-host/fair-queue.js";
import { ModelHost } from "../kit/model-host/host.js";
import { SentenceSplitter } from "../../core/sentence-splitter.js";
import type {
  EngineInfo,
  LanguageCode,
  MtEngine,
  TranslateRequest,
  TranslationPair,
} from "../../core/contracts.js";
import { SentenceBatcher } from "./batches.js";
import { problemWithTranslationModel } from "./model-check.js";
import type {
  HostStats,
  TranslateBatchParams,
  TranslationModelFiles,
  TranslationMethods,
} from "./host-protocol.js";

/** A pulled model and the directions it serves. */
export interface TranslationModel extends TranslationModelFiles {
  /**
   * With `targetToken` where a model translating into several languages is told which by a token
   * leading the text (`>>pt<<`).
   */
  readonly directions: readonly (TranslationPair & { readonly targetToken?: string })[];
  /** Why its files must not be loaded (src/engines/kit/models/model-dir.ts): the model is left out, the others serve. */
  readonly problem?: string;
}

export interface TransformersEngineOptions {
  /** In order of preference: a direction two models serve goes to the first. */
  readonly models: readonly TranslationModel[];
  /** onnxruntime threads of each forward pass (default 1: faster on 2 cores, measured in docs/benchmarks.md). */
  readonly threads?: number;
  /** Sentences per batch (default 8). */
  readonly maxBatch?: number;
  /** Sentences waiting per model (default 64; interims from half of it are refused). */
  readonly maxQueued?: number;
  /** Models loaded at once; the least recently used is released beyond it (default 4). */
  readonly maxLoaded?: number;
  /**
   * The host process is replaced once its resident memory passes this (MiB; default 3072): a
   * released model does not give all its memory back (measured: docs/benchmarks.md), so a host
   * that keeps swapping models would grow without it. The new host loads models as they are needed.
   */
  readonly maxHostMiB?: number;
  /**
   * A batch the host has not answered within this fails (its sentences go to the next engine, say
   * Apertium) and a host that has said nothing since is replaced (default 10 s).
   */
  readonly timeoutMs?: number;
}

export interface TransformersEngine extends MtEngine {
  /** What the host has loaded and its memory, and the batches sent (for tests and benchmarks). */
  stats(): Promise<{
    host: HostStats;
    waiting: Record<string, number>;
    batches: number;
    sentences: number;
    /** Host processes replaced because their memory passed `maxHostMiB`. */
    recycled: number;
  }>;
}

/** Languages written without spaces between sentences. */
const UNSPACED = new Set<LanguageCode>(["ja", "zh"]);

const HOST_MAIN = new URL("./host-main.js", import.meta.url);

export async function createTransformersEngine(
  options: TransformersEngineOptions,
): Promise<TransformersEngine> {
  // A model that cannot load is found now, not at its first sentence, and serves no direction.
  const unavailableParts: { id: string; reason: string }[] = [];
  const usable: TranslationModel[] = [];
  for (const model of options.models) {
    const problem = model.problem ?? (await problemWithTranslationModel(model.dir, model.family));
    if (problem) unavailableParts.push({ id: `transformers-js ${model.name}`, reason: problem });
    else usable.push(model);
  }
  if (usable.length === 0) {
    const why = unavailableParts.map((part) => part.reason).join("; ");
    throw new Error(`no translation model is pulled (relay models list)${why ? `: ${why}` : ""}`);
  }
  return createWith({ ...options, models: usable }, unavailableParts);
}

async function createWith(
  options: TransformersEngineOptions,
  unavailableParts: readonly { id: string; reason: string }[],
): Promise<TransformersEngine> {
  const maxLoaded = options.maxLoaded ?? 4;
  const host = new ModelHost<TranslationMethods>("transformers.js translation", HOST_MAIN, {
    env: { RELAY_MT_THREADS: String(options.threads ?? 1), RELAY_MT_MAX_LOADED: String(maxLoaded) },
    timeoutMs: options.timeoutMs ?? 10_000,
    maxRssMiB: options.maxHostMiB ?? 3072,
  });
  let version: string;
  try {
    version = await host.request("version", null);
  } catch (error) {
    await host.close();
    throw error;
  }
  const byName = new Map(options.models.map((model) => [model.name, model]));
  const modelFor = (from: LanguageCode, to: LanguageCode): TranslationModel | undefined =>
    options.models.find((model) => model.directions.some((d) => d.from === from && d.to === to));
  const batcher = new SentenceBatcher(
    async ({ model, from, to, texts }, signal) => {
      const { dir, family, name, directions } = byName.get(model)!;
      const token = directions.find((d) => d.from === from && d.to === to)?.targetToken;
      const params: TranslateBatchParams = {
        model: { name, dir, family },
        from,
        to,
        texts: token ? texts.map((text) => `${token} ${text}`) : texts,
      };
      const result = await host.request("translate", params, { signal });
      return result.translations;
    },
    { maxBatch: options.maxBatch ?? 8, maxQueued: options.maxQueued ?? 64 },
  );

  /** Each sentence's translation as a promise, in order; a failure cancels the others. */
  function translateSentences(request: TranslateRequest, signal?: AbortSignal): Promise<string>[] {
    const model = modelFor(request.from, request.to);
    if (!model) throw new Error(`no translation model for ${request.from} to ${request.to}`);
    const failed = new AbortController();
    const both = signal ? AbortSignal.any([signal, failed.signal]) : failed.signal;
    return sentencesOf(request.text).map((sentence) => {
      const translation = batcher.translate(model.name, request.from, request.to, sentence, {
        interim: request.interim,
        signal: both,
        account: request.account ?? NO_ACCOUNT,
      });
      translation.catch((error: unknown) => failed.abort(error));
      return translation;
    });
  }
  const joiner = (to: LanguageCode) => (UNSPACED.has(to) ? "" : " ");

  const pairs = unique(
    options.models.flatMap((model) => model.directions.map(({ from, to }) => ({ from, to }))),
  );
  const info: EngineInfo = {
    id: "transformers-js",
    version: `${version}+${options.models.map((model) => model.name).join("+")}`,
    detail: `Opus-MT / M2M100 through transformers.js ${version} (${options.models.length} models, at most ${maxLoaded} loaded)`,
  };
  return {
    info,
    capabilities: { pairs, usesContext: false, placeholder: "digits", streaming: true },
    unavailableParts,
    hosts: () => [host.status()],
    async translate(request, signal) {
      const translations = await Promise.all(translateSentences(request, signal));
      return translations.filter(Boolean).join(joiner(request.to));
    },
    async *translateStream(request, signal) {
      // A consumer that stops listening takes its sentences still waiting out of the queue.
      const stopped = new AbortController();
      const done: string[] = [];
      try {
        const both = signal ? AbortSignal.any([signal, stopped.signal]) : stopped.signal;
        for (const translation of translateSentences(request, both)) {
          const text = await translation;
          if (text) done.push(text);
          yield done.join(joiner(request.to));
        }
      } finally {
        stopped.abort();
      }
    },
    async warmUp(pairs?: readonly TranslationPair[]) {
      // The first models serving `pairs` (as many as stay loaded) are loaded before the first
      // session needs them.
      const serves = (model: TranslationModel) =>
        !pairs || model.directions.some((d) => pairs.some((p) => p.from === d.from && p.to === d.to));
      for (const { name, dir, family } of options.models.filter(serves).slice(0, maxLoaded))
        await host.request("load", { name, dir, family } satisfies TranslationModelFiles);
    },
    async stats() {
      return {
        host: await host.request("stats", null),
        ...batcher.stats(),
        recycled: host.status().restarts.memory,
      };
    },
    async close() {
      batcher.close(new Error("the translator is closed"));
      await host.close();
    },
  };
}

/** The sentences of a text (one when it has no sentence end). */
function sentencesOf(text: string): string[] {
  const splitter = new SentenceSplitter();
  const sentences = [...splitter.push(text), ...splitter.flush()];
  return sentences.length > 0 ? sentences : [text.trim()].filter(Boolean);
}

function unique(pairs: readonly TranslationPair[]): TranslationPair[] {
  const seen = new Set<string>();
  return pairs.filter((pair) => {
    const key = `${pair.from}>${pair.to}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
