import { describe, expect, it } from "vitest";
import { EngineRegistry } from "../../src/engines/routing/registry.js";
import type {
  AsrEngine,
  AsrStreamOptions,
  LanguageCode,
  MtEngine,
  TranslateRequest,
  TtsEngine,
} from "../../src/core/contracts.js";
import { unservable } from "../../src/engines/routing/languages.js";
import { createLivePipeline } from "../../src/pipeline/session-pipeline.js";
import type { PipelineEvent } from "../../src/pipeline/translation-pipeline.js";
import { languagePlan, requirementsOf, SESSION_LANE } from "../../src/pipeline/language-plan.js";
import { defaultVoice } from "../../src/voices/library.js";
import { energyVad } from "../support/vad-double.js";

/**
 * The languages of live sessions: which language each utterance is heard in and translated into
 * (two-way, "auto" with hints, a named source), what that needs of the engines, and the pipeline
 * built from it, with engine doubles.
 */

describe("languagePlan", () => {
  it("two-way: identifies among the pair and translates each side into the other, labels swapped", () => {
    const plan = languagePlan({
      sourceLanguage: "en",
      targetLanguage: "es",
      twoWay: true,
      sourceLanguageLabel: "English (US)",
      targetLanguageLabel: "Spanish (Mexico)",
    });
    expect(plan.listen).toBe("auto");
    expect(plan.candidates).toEqual(["en", "es"]);
    // A session is one lane, whatever the direction.
    expect(plan.routes("en")).toEqual([{ lane: SESSION_LANE, to: "es" }]);
    expect(plan.routes("es")).toEqual([{ lane: SESSION_LANE, to: "en" }]);
    expect(plan.routes(undefined)).toEqual([{ lane: SESSION_LANE, to: undefined }]);
    expect(plan.directions).toEqual([
      { to: "es", labels: { sourceLanguageLabel: "English (US)", targetLanguageLabel: "Spanish (Mexico)" } },
      { to: "en", labels: { sourceLanguageLabel: "Spanish (Mexico)", targetLanguageLabel: "English (US)" } },
    ]);
  });

  it('"auto": hints restrict identification; an utterance in the target is passed through', () => {
    const plan = languagePlan({ sourceLanguage: "auto", targetLanguage: "es", languageHints: ["de", "es"] });
    expect(plan).toMatchObject({ listen: "auto", candidates: ["de", "es"] });
    expect(plan.routes("de")[0]!.to).toBe("es");
    expect(plan.routes("es")[0]!.to).toBeUndefined();
    expect(languagePlan({ sourceLanguage: "auto", targetLanguage: "es" }).candidates).toBeUndefined();
  });

  it("a named source is always translated, even into its own language; hints are not read", () => {
    const plan = languagePlan({ sourceLanguage: "en", targetLanguage: "en", languageHints: ["de"] });
    expect(plan.listen).toBe("en");
    expect(plan.candidates).toBeUndefined();
    expect(plan.routes("en")[0]!.to).toBe("en");
  });
});

describe("requirementsOf", () => {
  it("two-way needs identification of both sides, both voices and both directions, in that order", () => {
    const plan = languagePlan({ sourceLanguage: "en", targetLanguage: "es", twoWay: true });
    expect(requirementsOf(plan, true)).toEqual([
      { kind: "recognition", language: "auto" },
      { kind: "identification", language: "en" },
      { kind: "identification", language: "es" },
      { kind: "voice", language: "es" },
      { kind: "voice", language: "en" },
      { kind: "translation", from: "en", to: "es" },
      { kind: "translation", from: "es", to: "en" },
    ]);
    expect(requirementsOf(plan, false).some((r) => r.kind === "voice")).toBe(false);
  });

  it('"auto" needs each hint identified and translated, except a hint that is the target', () => {
    const hinted = languagePlan({
      sourceLanguage: "auto",
      targetLanguage: "es",
      languageHints: ["de", "es"],
    });
    expect(requirementsOf(hinted, false)).toEqual([
      { kind: "recognition", language: "auto" },
      { kind: "identification", language: "de" },
      { kind: "identification", language: "es" },
      { kind: "translation", from: "de", to: "es" },
    ]);
    const open = languagePlan({ sourceLanguage: "auto", targetLanguage: "es" });
    expect(requirementsOf(open, true)).toEqual([
      { kind: "recognition", language: "auto" },
      { kind: "voice", language: "es" },
      { kind: "translation", from: "auto", to: "es" },
    ]);
  });

  it("a named source needs what it always did: recognition, voice, translation", () => {
    const plan = languagePlan({ sourceLanguage: "en", targetLanguage: "fr" });
    expect(requirementsOf(plan, true)).toEqual([
      { kind: "recognition", language: "en" },
      { kind: "voice", language: "fr" },
      { kind: "translation", from: "en", to: "fr" },
    ]);
  });
});

// ---------------------------------------------------------------- the pipeline, with engine doubles

/**
 * A recognizer that identifies languages and ignores the candidates it is given (it records them):
 * utterance n is heard as `heard[n]`, its text "line n." in that language.
 */
function identifyingAsr(heard: LanguageCode[]): AsrEngine & { opened: AsrStreamOptions[] } {
  const opened: AsrStreamOptions[] = [];
  return {
    opened,
    info: { id: "identifying-double", version: "test" },
    capabilities: {
      languages: ["en", "es", "pt"],
      sampleRate: 16_000,
      partialResults: false,
      wordTimings: false,
      punctuation: true,
      languageDetection: true,
    },
    async createStream(options) {
      const n = opened.push(options) - 1;
      const hypothesis = { text: `line ${n}.`, words: [], language: heard[n]! };
      return {
        write: async () => {},
        partial: async () => ({ text: "", words: [] }),
        finish: async () => hypothesis,
        abort: () => {},
      };
    },
    close: async () => {},
  };
}

function mtDouble(calls: TranslateRequest[]): MtEngine {
  const pairs = [
    { from: "en", to: "es" },
    { from: "es", to: "en" },
  ];
  return {
    info: { id: "mt-double", version: "test" },
    capabilities: { pairs, usesContext: false },
    translate: async (request) => {
      calls.push(request);
      return `${request.to}: ${request.text}`;
    },
    close: async () => {},
  };
}

function ttsDouble(language: LanguageCode, spoken: string[]): TtsEngine {
  return {
    info: { id: `tts-${language}`, version: "test" },
    capabilities: { languages: [language] },
    synthesize: async ({ text, language: asked }) => {
      spoken.push(`${asked}: ${text}`);
      return { samples: new Float32Array(2400).fill(0.1), sampleRate: 24_000 };
    },
    close: async () => {},
  };
}

const translatedFinals = (events: PipelineEvent[]) =>
  events.filter(
    (e): e is Extract<PipelineEvent, { type: "translated" }> => e.type === "translated" && e.isFinal,
  );

/** Speaks `utterances` utterances (speech, then finalize, each awaited to its translated final), then ends the input. */
async function run(
  pipeline: ReturnType<typeof createLivePipeline>,
  utterances: number,
): Promise<PipelineEvent[]> {
  const events: PipelineEvent[] = [];
  const collecting = (async () => {
    for await (const event of pipeline.events) events.push(event);
  })();
  for (let i = 0; i < utterances; i++) {
    const before = translatedFinals(events).length;
    pipeline.pushAudio(new Int16Array(600 * 16).fill(1000));
    pipeline.finalize();
    for (let wait = 0; wait < 500; wait++) {
      if (translatedFinals(events).length > before) break;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }
  await pipeline.end();
  await collecting;
  return events;
}

describe("createLivePipeline (engine doubles)", () => {
  it("two-way: each side into the other, spoken by that language's synthesizer; outside the pair is the first side", async () => {
    const asr = identifyingAsr(["en", "es", "pt"]);
    const translations: TranslateRequest[] = [];
    const spoken: string[] = [];
    const registry = EngineRegistry.fromEngines({
      vad: energyVad,
      asr: [asr],
      mt: [mtDouble(translations)],
      tts: [ttsDouble("es", spoken), ttsDouble("en", spoken)],
    });
    const pipeline = createLivePipeline(registry, {
      plan: languagePlan({
        sourceLanguage: "en",
        targetLanguage: "es",
        twoWay: true,
      }),
      finalizeMode: "sentence",
      voice: defaultVoice("female"),
    });
    const events = await run(pipeline, 3);

    expect(asr.opened.map((o) => [o.language, o.candidates])).toEqual([
      ["auto", ["en", "es"]],
      ["auto", ["en", "es"]],
      ["auto", ["en", "es"]],
    ]);
    const translated = translatedFinals(events);
    // "pt" (an engine that ignored the candidates) is taken to be the first language of the pair.
    expect(translated.map((e) => [e.language, e.text])).toEqual([
      ["en", "es: line 0."],
      ["es", "en: line 1."],
      ["en", "es: line 2."],
    ]);
    expect(translations.map((t) => `${t.from}>${t.to}`)).toEqual(["en>es", "es>en", "en>es"]);
    expect(spoken).toEqual(["es: es: line 0.", "en: en: line 1.", "es: es: line 2."]);
    expect(events.filter((e) => e.type === "error")).toEqual([]);
  });

  it('"auto" with hints: identification among them; the target language is passed through, unspoken', async () => {
    const asr = identifyingAsr(["en", "es"]);
    const translations: TranslateRequest[] = [];
    const spoken: string[] = [];
    const registry = EngineRegistry.fromEngines({
      vad: energyVad,
      asr: [asr],
      mt: [mtDouble(translations)],
      tts: [ttsDouble("es", spoken)],
    });
    const pipeline = createLivePipeline(registry, {
      plan: languagePlan({
        sourceLanguage: "auto",
        targetLanguage: "es",
        languageHints: ["en", "es"],
      }),
      finalizeMode: "sentence",
      voice: defaultVoice("male"),
    });
    const events = await run(pipeline, 2);

    expect(asr.opened.map((o) => o.candidates)).toEqual([
      ["en", "es"],
      ["en", "es"],
    ]);
    const translated = translatedFinals(events);
    expect(translated.map((e) => [e.language, e.text])).toEqual([
      ["en", "es: line 0."],
      ["es", "line 1."],
    ]);
    expect(translations).toHaveLength(1);
    expect(spoken).toEqual(["es: es: line 0."]);
  });
});

describe("unservable: identification", () => {
  it("reports a language the identifying recognizer does not know, with the ones it does", () => {
    const registry = EngineRegistry.fromEngines({
      vad: energyVad,
      asr: [identifyingAsr([])],
      mt: [],
      tts: [],
    });
    expect(unservable(registry, [{ kind: "identification", language: "es" }])).toBeUndefined();
    expect(unservable(registry, [{ kind: "identification", language: "ja" }])).toEqual({
      kind: "identification",
      language: "ja",
      available: ["en", "es", "pt"],
    });
    const none = EngineRegistry.fromEngines({ vad: energyVad, asr: [], mt: [], tts: [] });
    expect(unservable(none, [{ kind: "identification", language: "es" }])).toEqual({
      kind: "identification",
      language: "es",
      available: [],
    });
  });
});
