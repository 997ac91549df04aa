import { abortError } from "../../core/cancellation.js";
import type {
  AsrCapabilities,
  AsrEngine,
  AsrStream,
  AsrStreamOptions,
  EngineInfo,
  HostStatus,
  MtCapabilities,
  MtEngine,
  SynthesisRequest,
  SynthesizedAudio,
  TranslateRequest,
  TtsCapabilities,
  TtsEngine,
} from "../../core/contracts.js";
import { streamSynthesis } from "../kit/synthesis.js";

/**
 * The engines the registry hands out in place of a configured one: several engines of a language
 * as one that falls back (`FallbackRecognizer`, `FallbackSynthesizer`), and an engine narrowed to
 * the languages its entry in the engines file lists (`Restricted…`). Each names every member of
 * its contract, so what passes through is what the contract says, and `primary` is the engine it
 * stands for (the first in preference order).
 */

/** Told which candidate answered a call that could have fallen back to another. */
export type Served<T> = (candidate: T) => void;

type AnyEngine = AsrEngine | MtEngine | TtsEngine;

/** What every engine has, read through from the engine an adapter stands for. */
abstract class StandIn<E extends AnyEngine> {
  constructor(readonly primary: E) {}

  get info(): EngineInfo {
    return this.primary.info;
  }

  get unavailableParts(): E["unavailableParts"] {
    return this.primary.unavailableParts;
  }

  get circuit(): E["circuit"] {
    return this.primary.circuit;
  }

  hosts(): readonly HostStatus[] {
    return this.primary.hosts?.() ?? [];
  }

  close(): Promise<void> {
    return this.primary.close();
  }
}

/** Recognizers of one language in order of preference: a stream opens on the first that can open one. */
export class FallbackRecognizer extends StandIn<AsrEngine> implements AsrEngine {
  readonly openRecognition: AsrEngine["openRecognition"];

  constructor(
    private readonly candidates: readonly [AsrEngine, ...AsrEngine[]],
    private readonly served?: Served<AsrEngine>,
  ) {
    super(candidates[0]);
    this.openRecognition = this.primary.openRecognition?.bind(this.primary);
  }

  get capabilities(): AsrCapabilities {
    return this.primary.capabilities;
  }

  createStream(options: AsrStreamOptions): Promise<AsrStream> {
    return firstSuccess(this.candidates, (engine) => engine.createStream(options), undefined, this.served);
  }

  async prepare(options: AsrStreamOptions): Promise<void> {
    await this.primary.prepare?.(options);
  }
}

/** Synthesizers of one language in order of preference: the first that speaks (a stream: before its first chunk). */
export class FallbackSynthesizer extends StandIn<TtsEngine> implements TtsEngine {
  constructor(
    private readonly candidates: readonly [TtsEngine, ...TtsEngine[]],
    private readonly served?: Served<TtsEngine>,
  ) {
    super(candidates[0]);
  }

  get capabilities(): TtsCapabilities {
    return this.primary.capabilities;
  }

  synthesize(request: SynthesisRequest, signal?: AbortSignal): Promise<SynthesizedAudio> {
    return firstSuccess(this.candidates, (engine) => engine.synthesize(request, signal), signal, this.served);
  }

  synthesizeStream(request: SynthesisRequest, signal?: AbortSignal): AsyncIterable<SynthesizedAudio> {
    return firstStreaming(this.candidates, request, signal, this.served);
  }
}

/** A recognizer limited to some of its languages. */
export class RestrictedRecognizer extends StandIn<AsrEngine> implements AsrEngine {
  readonly capabilities: AsrCapabilities;
  readonly openRecognition: AsrEngine["openRecognition"];

  constructor(engine: AsrEngine, languages: readonly string[]) {
    super(engine);
    this.capabilities = { ...engine.capabilities, languages: only(engine.capabilities.languages, languages) };
    this.openRecognition = engine.openRecognition?.bind(engine);
  }

  createStream(options: AsrStreamOptions): Promise<AsrStream> {
    return this.primary.createStream(options);
  }

  async prepare(options: AsrStreamOptions): Promise<void> {
    await this.primary.prepare?.(options);
  }
}

/** A synthesizer limited to some of its languages. */
export class RestrictedSynthesizer extends StandIn<TtsEngine> implements TtsEngine {
  readonly capabilities: TtsCapabilities;
  readonly synthesizeStream: TtsEngine["synthesizeStream"];

  constructor(engine: TtsEngine, languages: readonly string[]) {
    super(engine);
    this.capabilities = { ...engine.capabilities, languages: only(engine.capabilities.languages, languages) };
    this.synthesizeStream = engine.synthesizeStream?.bind(engine);
  }

  synthesize(request: SynthesisRequest, signal?: AbortSignal): Promise<SynthesizedAudio> {
    return this.primary.synthesize(request, signal);
  }
}

/** A translator limited to the pairs between some languages. */
export class RestrictedTranslator extends StandIn<MtEngine> implements MtEngine {
  readonly capabilities: MtCapabilities;
  readonly translateStream: MtEngine["translateStream"];
  readonly warmUp: MtEngine["warmUp"];

  constructor(engine: MtEngine, languages: readonly string[]) {
    super(engine);
    const pairs = engine.capabilities.pairs.filter(
      (p) => languages.includes(p.from) && languages.includes(p.to),
    );
    this.capabilities = { ...engine.capabilities, pairs };
    this.translateStream = engine.translateStream?.bind(engine);
    this.warmUp = engine.warmUp?.bind(engine);
  }

  translate(request: TranslateRequest, signal?: AbortSignal): Promise<string> {
    return this.primary.translate(request, signal);
  }
}

const only = <T extends string>(have: readonly T[], wanted: readonly string[]): T[] =>
  have.filter((language) => wanted.includes(language));

/**
 * Tries each candidate in order; the first success wins (and `served` is told which it was),
 * otherwise the first failure is thrown. Once `signal` has fired no further candidate is tried:
 * the call was cancelled, nothing failed.
 */
export async function firstSuccess<C, T>(
  candidates: readonly C[],
  attempt: (candidate: C) => Promise<T>,
  signal?: AbortSignal,
  served?: Served<C>,
): Promise<T> {
  let firstError: unknown;
  for (const candidate of candidates) {
    if (signal?.aborted) throw abortError(signal);
    let result: T;
    try {
      result = await attempt(candidate);
    } catch (error) {
      firstError ??= error;
      continue;
    }
    served?.(candidate);
    return result;
  }
  throw firstError ?? new Error("no engine available");
}

/**
 * Streams speech from the first engine that produces some: an engine failing before its first
 * chunk hands over to the next (as `firstSuccess`); a failure after that ends the stream. `served`
 * is told the engine at its first chunk.
 */
async function* firstStreaming(
  engines: readonly TtsEngine[],
  request: SynthesisRequest,
  signal: AbortSignal | undefined,
  served: Served<TtsEngine> | undefined,
): AsyncIterable<SynthesizedAudio> {
  let firstError: unknown;
  for (const engine of engines) {
    if (signal?.aborted) throw abortError(signal);
    let produced = false;
    try {
      for await (const chunk of streamSynthesis(engine, request, signal)) {
        if (!produced) served?.(engine);
        produced = true;
        yield chunk;
      }
      return;
    } catch (error) {
      if (produced) throw error;
      firstError ??= error;
    }
  }
  throw firstError ?? new Error("no engine available");
}

/**
 * The configured engine behind what the registry handed out: the preferred one behind a fallback,
 * the whole engine behind a restricted one (for what is not part of the contracts: a host's stats).
 */
export function configuredEngine<E extends AnyEngine>(engine: E): E {
  return engine instanceof StandIn ? configuredEngine(engine.primary as E) : engine;
}
