import path from "node:path";
import { translationTerms } from "../../core/glossary.js";
import { protectTerms, type PlaceholderForm } from "../../core/term-protection.js";
import { loadProblem } from "../kit/models/model-dir.js";
import { DEFAULT_PIVOT_LANGUAGES, idOf, recognizersToBuild, type EngineSettings } from "./engine-config.js";
import { createEngine, type EngineKind, type EngineOfKind, type SpecOf } from "./descriptors.js";
import { createMfccSpeakerEngine } from "../mfcc-speaker/index.js";
import { descriptor as openvoice } from "../openvoice/descriptor.js";
import { createSileroVadEngine } from "../silero-vad/index.js";
import { nativeBuildLoads } from "../whisper-cpp/binding.js";
import {
  FallbackRecognizer,
  FallbackSynthesizer,
  firstSuccess,
  RestrictedRecognizer,
  RestrictedSynthesizer,
  RestrictedTranslator,
  type Served,
} from "./adapters.js";
import { voiceMeasurementStore, type VoiceMeasurementStore } from "../../voices/measurement-store.js";
import type {
  AsrEngine,
  HostStatus,
  LanguageCode,
  MtEngine,
  SpeakerEngine,
  ToneColorEngine,
  TranslateRequest,
  TranslationPair,
  TtsEngine,
  VadEngine,
} from "../../core/contracts.js";

/**
 * What voice_type=clone speaks with: each speaker's own voice through the tone colour converter,
 * the nearest library voice (no converter model), or the library voice because VOICE_CLONE is off.
 */
export type VoiceCloneMode = "tone-color" | "library" | "off";

/** A way to translate one pair: a direct engine, or two hops through the pivot language. */
export interface TranslationRoute {
  readonly from: LanguageCode;
  readonly to: LanguageCode;
  readonly hops: readonly {
    readonly engine: MtEngine;
    readonly from: LanguageCode;
    readonly to: LanguageCode;
  }[];
}

/** A pair some route translates: the engines along it, and the pivot language when it has two hops. */
export interface ServedPair {
  readonly from: LanguageCode;
  readonly to: LanguageCode;
  readonly engines: string[];
  readonly via: LanguageCode | null;
}

/** An engine serving, as /healthz and /v1/languages list it. */
export interface ServingEngine {
  readonly kind: string;
  readonly id: string;
  readonly version: string;
  readonly detail?: string;
}

/**
 * Builds the configured engines and answers every "who can serve this?" question from their
 * declared capabilities. Earlier engines in a configured list take precedence.
 */
export class EngineRegistry {
  private constructor(
    readonly vad: VadEngine,
    /** Tells speakers apart (src/speakers/): a speaker-embedding model when pulled, else the MFCC engine. */
    readonly speakers: SpeakerEngine,
    private readonly asr: readonly AsrEngine[],
    private readonly mt: readonly MtEngine[],
    private readonly tts: readonly TtsEngine[],
    /** Languages a pair without a direct engine may be translated through, in order of preference. */
    private readonly pivotLanguages: readonly LanguageCode[],
    /** Engines that were configured but failed to load, with the reason (shown on /healthz). */
    readonly unavailable: readonly { id: string; reason: string }[],
    /** Where the voices' measurements persist (src/voices/measurement-store.ts); undefined: in memory. */
    readonly voiceMeasurements: VoiceMeasurementStore | undefined,
    /** Converts clone voices to each speaker's own (undefined: the nearest library voice serves). */
    readonly toneColor: ToneColorEngine | undefined,
    private readonly cloningAllowed: boolean,
  ) {}

  /** What clone voices speak with (shown on /healthz, /v1/languages and in the room response). */
  get voiceClone(): VoiceCloneMode {
    return this.toneColor ? "tone-color" : this.cloningAllowed ? "library" : "off";
  }

  /** One synthesizer per language, so whatever is cached per engine (voice measurements) is found again. */
  private readonly synthesizers = new Map<LanguageCode, TtsEngine | undefined>();

  static async create(config: EngineSettings): Promise<EngineRegistry> {
    const unavailable: { id: string; reason: string }[] = [];
    /** Builds the configured engines of one kind (src/engines/routing/descriptors.ts), skipping failures. */
    async function build<K extends EngineKind>(
      kind: K,
      specs: readonly (SpecOf<K> & { readonly languages?: readonly string[] })[],
      restrict: (engine: EngineOfKind[K], languages: readonly string[]) => EngineOfKind[K],
    ): Promise<EngineOfKind[K][]> {
      const built = await Promise.all(
        specs.map(async (spec) => {
          try {
            const engine = await createEngine(kind, spec, config);
            return spec.languages ? restrict(engine, spec.languages) : engine;
          } catch (error) {
            unavailable.push({ id: idOf(spec), reason: (error as Error).message });
            return undefined;
          }
        }),
      );
      return built.filter((engine) => engine !== undefined);
    }
    const vad = await createSileroVadEngine(config.sileroModel ? { modelPath: config.sileroModel } : {});
    const [asr, mt, tts, speakers, toneColor] = await Promise.all([
      build("asr", recognizersToBuild(config, nativeBuildLoads), (e, l) => new RestrictedRecognizer(e, l)),
      build("mt", config.mt, (e, l) => new RestrictedTranslator(e, l)),
      build("tts", config.tts, (e, l) => new RestrictedSynthesizer(e, l)),
      buildSpeakerEngine(config, unavailable),
      openvoice.toneColor(config).catch((error: unknown) => {
        unavailable.push({ id: "openvoice", reason: (error as Error).message });
        return undefined;
      }),
    ]);
    // Parts of engines that serve without them (one voice of several).
    for (const engine of [...asr, ...mt, ...tts]) unavailable.push(...(engine.unavailableParts ?? []));
    return new EngineRegistry(
      vad,
      speakers,
      asr,
      mt,
      tts,
      config.pivotLanguages,
      unavailable,
      voiceMeasurementStore(config.voiceMeasurementsDir),
      toneColor,
      openvoice.enabled(config),
    );
  }

  /** For tests and embedders that construct engines themselves. */
  static fromEngines(engines: {
    vad: VadEngine;
    speakers?: SpeakerEngine;
    asr: AsrEngine[];
    mt: MtEngine[];
    tts: TtsEngine[];
    pivotLanguages?: readonly LanguageCode[];
    voiceMeasurementsDir?: string;
    toneColor?: ToneColorEngine;
  }): EngineRegistry {
    return new EngineRegistry(
      engines.vad,
      engines.speakers ?? createMfccSpeakerEngine(),
      engines.asr,
      engines.mt,
      engines.tts,
      engines.pivotLanguages ?? DEFAULT_PIVOT_LANGUAGES,
      [],
      engines.voiceMeasurementsDir === undefined
        ? undefined
        : voiceMeasurementStore(engines.voiceMeasurementsDir),
      engines.toneColor,
      true,
    );
  }

  /**
   * The recognizer for a language: the preferred engine that serves it, falling back to the next
   * one when a stream cannot be opened (e.g. a remote server whose circuit is open). `served` is
   * told which engine opened each stream, so the metrics credit a fallback with what it served.
   */
  recognizer(language: LanguageCode, served?: Served<AsrEngine>): AsrEngine | undefined {
    const candidates = this.asr.filter((engine) => engine.capabilities.languages.includes(language));
    const [first, ...others] = candidates;
    if (!first || (others.length === 0 && !served)) return first;
    return new FallbackRecognizer([first, ...others], served);
  }

  /** The preferred recognizer that identifies the spoken language (`language: "auto"`). */
  languageIdentifier(): AsrEngine | undefined {
    return this.asr.find((engine) => engine.capabilities.languageDetection === true);
  }

  /**
   * The preferred synthesizer for a language, falling back to the next one when synthesis fails
   * (a stream: when it fails before its first chunk). The same object for every call.
   */
  synthesizer(language: LanguageCode): TtsEngine | undefined {
    if (!this.synthesizers.has(language)) this.synthesizers.set(language, this.fallbackSynthesizer(language));
    return this.synthesizers.get(language);
  }

  /**
   * As `synthesizer`, telling `served` which engine answered each call (as soon as one has), so the
   * metrics credit a fallback engine with the calls it served. A new object per call: one per caller.
   */
  synthesizerReporting(language: LanguageCode, served: Served<TtsEngine>): TtsEngine | undefined {
    return this.fallbackSynthesizer(language, served);
  }

  private fallbackSynthesizer(language: LanguageCode, served?: Served<TtsEngine>): TtsEngine | undefined {
    const candidates = this.tts.filter((engine) => engine.capabilities.languages.includes(language));
    const [first, ...others] = candidates;
    if (!first || (others.length === 0 && !served)) return first;
    return new FallbackSynthesizer([first, ...others], served);
  }

  /** The preferred route (see `translationRoutes`). */
  translationRoute(from: LanguageCode, to: LanguageCode): TranslationRoute | undefined {
    return this.translationRoutes(from, to)[0];
  }

  /**
   * Every route for a pair, best first: each engine with the pair directly, and two hops through
   * each pivot language (English, then Spanish, by default). A route is as preferred as its least
   * preferred engine (the configured order), so a neural engine through English comes before a
   * rule-based engine direct; among equals, fewer hops first, then the pivots in order. The same
   * language needs no route.
   */
  translationRoutes(from: LanguageCode, to: LanguageCode): TranslationRoute[] {
    if (from === to) return [{ from, to, hops: [] }];
    const routes: TranslationRoute[] = this.directEngines(from, to).map((engine) => ({
      from,
      to,
      hops: [{ engine, from, to }],
    }));
    for (const pivot of this.pivotLanguages) {
      if (pivot === from || pivot === to) continue;
      for (const first of this.directEngines(from, pivot))
        for (const second of this.directEngines(pivot, to))
          routes.push({
            from,
            to,
            hops: [
              { engine: first, from, to: pivot },
              { engine: second, from: pivot, to },
            ],
          });
    }
    const rank = (route: TranslationRoute) =>
      Math.max(...route.hops.map((hop) => this.mt.indexOf(hop.engine)));
    // Array.prototype.sort is stable: equal routes keep direct-first, pivot order.
    return routes.sort((a, b) => rank(a) - rank(b) || a.hops.length - b.hops.length);
  }

  recognitionLanguages(): LanguageCode[] {
    return unique(this.asr.flatMap((engine) => engine.capabilities.languages));
  }

  voiceLanguages(): LanguageCode[] {
    return unique(this.tts.flatMap((engine) => engine.capabilities.languages));
  }

  /** Every language some route can translate into from `from`. */
  translationTargets(from: LanguageCode): LanguageCode[] {
    const candidates = unique([
      from,
      ...this.mt.flatMap((e) => e.capabilities.pairs.flatMap((p) => [p.from, p.to])),
    ]);
    return candidates.filter((to) => this.translationRoute(from, to) !== undefined);
  }

  /** The engines serving sessions, as they appear in `model_version_id`. */
  engineSummary(): string {
    return this.allEngines()
      .map(({ engine }) => `${engine.info.id}@${engine.info.version}`)
      .join(",");
  }

  /** Every pair some route translates, with the engines along its preferred route. */
  translationPairs(): ServedPair[] {
    const languages = unique(this.mt.flatMap((e) => e.capabilities.pairs.flatMap((p) => [p.from, p.to])));
    const pairs: ServedPair[] = [];
    for (const from of languages) {
      for (const to of languages) {
        if (from === to) continue;
        const route = this.translationRoute(from, to);
        if (!route) continue;
        pairs.push({
          from,
          to,
          engines: unique(route.hops.map((hop) => hop.engine.info.id)),
          via: route.hops.length > 1 ? route.hops[0]!.to : null,
        });
      }
    }
    return pairs;
  }

  /** The model host processes of the engines (src/engines/kit/model-host/): /healthz and the metrics. */
  hosts(): HostStatus[] {
    return this.allEngines().flatMap(({ engine }) => engine.hosts?.() ?? []);
  }

  /** Whether everything configured serves: no engine missing, no host failing. */
  healthy(): boolean {
    return this.unavailable.length === 0 && this.hosts().every((host) => host.state !== "failing");
  }

  /** The circuit breakers of the remote engines (for metrics). */
  circuits(): { kind: string; id: string; circuit: NonNullable<VadEngine["circuit"]> }[] {
    return this.allEngines().flatMap(({ kind, engine }) =>
      engine.circuit === undefined ? [] : [{ kind, id: engine.info.id, circuit: engine.circuit }],
    );
  }

  /** Every engine serving, with its version and how it runs. */
  engines(): ServingEngine[] {
    return this.allEngines().map(({ kind, engine }) => ({ kind, ...engine.info }));
  }

  /**
   * Starts what the translation engines start on first use (the service calls this once it listens),
   * for the directions recognized speech can take: every hop of every route from a language some
   * recognizer hears. Text reaches translation only as recognized speech (`mode=tts` does not
   * translate), so with English recognition alone Apertium starts en→es and the directions out of
   * Spanish that pivot routes go on with, not all twelve (75 processes); the rest start on first use.
   */
  async warmUp(): Promise<void> {
    const reachable = new Map<MtEngine, TranslationPair[]>();
    for (const from of this.recognitionLanguages())
      for (const to of this.translationTargets(from))
        for (const { hops } of this.translationRoutes(from, to))
          for (const { engine, from: hopFrom, to: hopTo } of hops) {
            const pairs = reachable.get(engine) ?? [];
            if (!pairs.some((pair) => pair.from === hopFrom && pair.to === hopTo))
              pairs.push({ from: hopFrom, to: hopTo });
            reachable.set(engine, pairs);
          }
    await Promise.allSettled([...reachable].map(([engine, pairs]) => engine.warmUp?.(pairs)));
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.allEngines().map(({ engine }) => engine.close()));
  }

  private directEngines(from: LanguageCode, to: LanguageCode): MtEngine[] {
    return this.mt.filter((engine) => engine.capabilities.pairs.some((p) => p.from === from && p.to === to));
  }

  private allEngines() {
    return [
      { kind: "vad", engine: this.vad },
      { kind: "speakers", engine: this.speakers },
      ...this.asr.map((engine) => ({ kind: "asr", engine })),
      ...this.mt.map((engine) => ({ kind: "mt", engine })),
      ...this.tts.map((engine) => ({ kind: "tts", engine })),
      ...(this.toneColor ? [{ kind: "tone-color", engine: this.toneColor }] : []),
    ];
  }
}

/**
 * The speaker engine: sherpa-onnx over the configured speaker-embedding model, or the embedded MFCC
 * engine when none is configured or it fails to load (the reason then goes to `unavailable`).
 */
async function buildSpeakerEngine(
  config: EngineSettings,
  unavailable: { id: string; reason: string }[],
): Promise<SpeakerEngine> {
  if (config.speakerModel === undefined) return createMfccSpeakerEngine();
  try {
    const problem = loadProblem(path.dirname(config.speakerModel), config.modelsDir, [config.speakerModel]);
    if (problem) throw new Error(`the speaker model is not loaded: ${problem}`);
    // Loaded only when configured, as every other engine (src/engines/routing/descriptors.ts).
    const { createSherpaSpeakerEngine } = await import("../sherpa-onnx/speaker-embedding.js");
    return await createSherpaSpeakerEngine({ model: config.speakerModel, ...config.speakerThresholds });
  } catch (error) {
    unavailable.push({ id: "sherpa-onnx-speaker", reason: (error as Error).message });
    return createMfccSpeakerEngine();
  }
}

export type { Served } from "./adapters.js";

/** What a translation needs besides the language pair (see `TranslateRequest`). */
export type TranslationInput = Omit<TranslateRequest, "from" | "to">;

/**
 * Translates along the first route that works: every hop of a route in turn, and the next route
 * when an engine of this one fails (a remote server down, say, with Apertium behind it). `served`
 * is told the route that translated.
 */
export async function translateAlong(
  routes: readonly TranslationRoute[],
  input: TranslationInput,
  signal?: AbortSignal,
  served?: Served<TranslationRoute>,
): Promise<string> {
  const terms = input.glossary ? translationTerms(input.glossary) : [];
  return firstSuccess(
    routes,
    async (route) => {
      const along = async (text: string) => {
        let current = text;
        for (const hop of route.hops) {
          current = await hop.engine.translate(
            { ...input, text: current, from: hop.from, to: hop.to },
            signal,
          );
        }
        return current;
      };
      // Engines that cannot read context get the terms as placeholders, carried through every hop
      // of a pivot; a placeholder lost on the way means the plain translation instead.
      const form = placeholderOf(route);
      const shielded = form && terms.length > 0 ? protectTerms(input.text, terms, form) : undefined;
      if (shielded) {
        const restored = shielded.restore(await along(shielded.text));
        if (restored !== undefined) return restored;
      }
      return along(input.text);
    },
    signal,
    served,
  );
}

/** The placeholder form a route's terms travel in: its first engine's, when no engine of it reads context. */
function placeholderOf(route: TranslationRoute): PlaceholderForm | undefined {
  if (route.hops.some((hop) => hop.engine.capabilities.usesContext)) return undefined;
  return route.hops[0]?.engine.capabilities.placeholder;
}

function unique<T>(items: T[]): T[] {
  return [...new Set(items)];
}
