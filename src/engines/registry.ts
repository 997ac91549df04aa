import type { Config } from "../config.js";
import { createApertiumEngine } from "./apertium/index.js";
import { createEspeakEngine } from "./espeak-ng/index.js";
import { createPocketSphinxEngine } from "./pocketsphinx/index.js";
import { createSileroVadEngine } from "./silero-vad/index.js";
import { createSvoxPicoEngine } from "./svox-pico/index.js";
import type { AsrEngine, LanguageCode, MtEngine, TtsEngine, VadEngine } from "./types.js";

type EngineConfig = Config["engines"];

const ASR_FACTORIES: Record<string, (c: EngineConfig) => Promise<AsrEngine>> = {
  pocketsphinx: (c) =>
    createPocketSphinxEngine({
      modelDir: c.pocketsphinxModelDir,
      maxDecoders: c.pocketsphinxMaxDecoders,
      decoderSettings: c.pocketsphinxSettings,
    }),
};
const MT_FACTORIES: Record<string, (c: EngineConfig) => Promise<MtEngine>> = {
  apertium: (c) => createApertiumEngine({ modesDir: c.apertiumModesDir }),
};
const TTS_FACTORIES: Record<string, (c: EngineConfig) => Promise<TtsEngine>> = {
  "espeak-ng": (c) => createEspeakEngine({ binary: c.espeakBinary }),
  "svox-pico": (c) => {
    if (!c.svoxPicoDir) throw new Error("SVOX_PICO_DIR does not exist");
    return createSvoxPicoEngine({ lingwareDir: c.svoxPicoDir });
  },
};

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

export interface LanguagesReport {
  readonly recognition: {
    language: string;
    engine: string;
    partial_results: boolean;
    word_timings: boolean;
  }[];
  readonly translation: { from: string; to: string; engines: string[]; via: string | null }[];
  readonly voice_output: { language: string; engine: string }[];
  readonly engines: { kind: string; id: string; version: string }[];
}

/**
 * Builds the configured engines and answers every "who can serve this?" question from their
 * declared capabilities. Earlier engines in a configured list take precedence.
 */
export class EngineRegistry {
  private constructor(
    readonly vad: VadEngine,
    private readonly asr: readonly AsrEngine[],
    private readonly mt: readonly MtEngine[],
    private readonly tts: readonly TtsEngine[],
    private readonly pivotLanguage: LanguageCode,
    /** Engines that were configured but failed to load, with the reason (shown on /healthz). */
    readonly unavailable: readonly { id: string; reason: string }[],
  ) {}

  static async create(config: EngineConfig): Promise<EngineRegistry> {
    const unavailable: { id: string; reason: string }[] = [];
    async function build<T>(
      ids: readonly string[],
      factories: Record<string, (c: EngineConfig) => Promise<T>>,
    ) {
      const engines: T[] = [];
      for (const id of ids) {
        const factory = factories[id];
        if (!factory) throw new Error(`unknown engine "${id}" (known: ${Object.keys(factories).join(", ")})`);
        try {
          engines.push(await factory(config));
        } catch (error) {
          unavailable.push({ id, reason: (error as Error).message });
        }
      }
      return engines;
    }
    const vad = await createSileroVadEngine(config.sileroModel ? { modelPath: config.sileroModel } : {});
    const [asr, mt, tts] = await Promise.all([
      build(config.asr, ASR_FACTORIES),
      build(config.mt, MT_FACTORIES),
      build(config.tts, TTS_FACTORIES),
    ]);
    return new EngineRegistry(vad, asr, mt, tts, config.pivotLanguage, unavailable);
  }

  /** For tests and embedders that construct engines themselves. */
  static fromEngines(engines: {
    vad: VadEngine;
    asr: AsrEngine[];
    mt: MtEngine[];
    tts: TtsEngine[];
    pivotLanguage?: LanguageCode;
  }): EngineRegistry {
    return new EngineRegistry(
      engines.vad,
      engines.asr,
      engines.mt,
      engines.tts,
      engines.pivotLanguage ?? "es",
      [],
    );
  }

  recognizer(language: LanguageCode): AsrEngine | undefined {
    return this.asr.find((engine) => engine.capabilities.languages.includes(language));
  }

  synthesizer(language: LanguageCode): TtsEngine | undefined {
    return this.tts.find((engine) => engine.capabilities.languages.includes(language));
  }

  /** Direct when an engine has the pair, otherwise through the pivot language; same language needs no route. */
  translationRoute(from: LanguageCode, to: LanguageCode): TranslationRoute | undefined {
    if (from === to) return { from, to, hops: [] };
    const direct = this.directEngine(from, to);
    if (direct) return { from, to, hops: [{ engine: direct, from, to }] };
    const pivot = this.pivotLanguage;
    const first = this.directEngine(from, pivot);
    const second = this.directEngine(pivot, to);
    if (!first || !second) return undefined;
    return {
      from,
      to,
      hops: [
        { engine: first, from, to: pivot },
        { engine: second, from: pivot, to },
      ],
    };
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

  report(): LanguagesReport {
    const languages = unique(this.mt.flatMap((e) => e.capabilities.pairs.flatMap((p) => [p.from, p.to])));
    const translation: LanguagesReport["translation"] = [];
    for (const from of languages) {
      for (const to of languages) {
        if (from === to) continue;
        const route = this.translationRoute(from, to);
        if (!route) continue;
        translation.push({
          from,
          to,
          engines: unique(route.hops.map((hop) => hop.engine.info.id)),
          via: route.hops.length > 1 ? route.hops[0]!.to : null,
        });
      }
    }
    return {
      recognition: this.recognitionLanguages().map((language) => {
        const engine = this.recognizer(language)!;
        return {
          language,
          engine: engine.info.id,
          partial_results: engine.capabilities.partialResults,
          word_timings: engine.capabilities.wordTimings,
        };
      }),
      translation,
      voice_output: this.voiceLanguages().map((language) => ({
        language,
        engine: this.synthesizer(language)!.info.id,
      })),
      engines: this.allEngines().map(({ kind, engine }) => ({ kind, ...engine.info })),
    };
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.allEngines().map(({ engine }) => engine.close()));
  }

  private directEngine(from: LanguageCode, to: LanguageCode): MtEngine | undefined {
    return this.mt.find((engine) => engine.capabilities.pairs.some((p) => p.from === from && p.to === to));
  }

  private allEngines() {
    return [
      { kind: "vad", engine: this.vad },
      ...this.asr.map((engine) => ({ kind: "asr", engine })),
      ...this.mt.map((engine) => ({ kind: "mt", engine })),
      ...this.tts.map((engine) => ({ kind: "tts", engine })),
    ];
  }
}

/** Runs a text through every hop of a route. */
export async function translateAlong(
  route: TranslationRoute,
  text: string,
  context: string,
): Promise<string> {
  let current = text;
  for (const hop of route.hops) {
    current = await hop.engine.translate({ text: current, from: hop.from, to: hop.to, context });
  }
  return current;
}

function unique<T>(items: T[]): T[] {
  return [...new Set(items)];
}
