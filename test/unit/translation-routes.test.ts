import { describe, expect, it } from "vitest";
import { EngineRegistry } from "../../src/engines/routing/registry.js";
import type { AsrEngine, MtEngine, TranslationPair, VadEngine } from "../../src/core/contracts.js";

const vad: VadEngine = {
  info: { id: "vad-double", version: "test" },
  capabilities: { sampleRate: 16_000, windowSamples: 512 },
  createStream: () => ({ probability: async () => 0 }),
  close: async () => {},
};

function mt(id: string, pairs: string[]): MtEngine {
  return {
    info: { id, version: "test" },
    capabilities: {
      pairs: pairs.map((pair): TranslationPair => {
        const [from, to] = pair.split("-") as [string, string];
        return { from, to };
      }),
      usesContext: false,
    },
    translate: async ({ text }) => text,
    close: async () => {},
  };
}

/** Each route as "engine:from-to+engine:from-to". */
function routes(registry: EngineRegistry, from: string, to: string): string[] {
  return registry
    .translationRoutes(from, to)
    .map((route) => route.hops.map((hop) => `${hop.engine.info.id}:${hop.from}-${hop.to}`).join("+"));
}

// Apertium's pairs all include Spanish; the neural models' all include English.
const apertium = mt("apertium", ["en-es", "es-en", "es-fr", "fr-es", "es-pt", "pt-es"]);
const neural = mt("neural", ["en-es", "es-en", "en-de", "de-en", "en-fr", "fr-en", "en-ja"]);

describe("translation routes", () => {
  it("go through English, then Spanish, with the default pivots", () => {
    const registry = EngineRegistry.fromEngines({ vad, asr: [], mt: [apertium], tts: [] });
    expect(routes(registry, "en", "fr")).toEqual(["apertium:en-es+apertium:es-fr"]);
    expect(routes(registry, "fr", "pt")).toEqual(["apertium:fr-es+apertium:es-pt"]);
    expect(routes(registry, "fr", "en")).toEqual(["apertium:fr-es+apertium:es-en"]);
  });

  it("rank a route by its least preferred engine: the neural engine through English before Apertium direct", () => {
    const registry = EngineRegistry.fromEngines({ vad, asr: [], mt: [neural, apertium], tts: [] });
    expect(routes(registry, "fr", "es")).toEqual([
      "neural:fr-en+neural:en-es",
      "apertium:fr-es",
      "neural:fr-en+apertium:en-es",
    ]);
    expect(routes(registry, "de", "ja")).toEqual(["neural:de-en+neural:en-ja"]);
    expect(routes(registry, "en", "es")[0]).toBe("neural:en-es");
    // Apertium keeps what the neural engine cannot reach.
    expect(routes(registry, "pt", "fr")).toEqual(["apertium:pt-es+apertium:es-fr"]);
    expect(registry.translationPairs()).toContainEqual({
      from: "de",
      to: "es",
      engines: ["neural"],
      via: "en",
    });
  });

  it("follow the configured pivots", () => {
    const registry = EngineRegistry.fromEngines({
      vad,
      asr: [],
      mt: [neural, apertium],
      tts: [],
      pivotLanguages: ["es"],
    });
    expect(routes(registry, "de", "es")).toEqual([]);
    expect(routes(registry, "fr", "pt")).toEqual(["apertium:fr-es+apertium:es-pt"]);
  });
});

describe("warm-up at start", () => {
  /** A translator that records the pairs each warm-up asked for. */
  function warming(id: string, pairs: string[]): MtEngine & { warmed: string[][] } {
    const warmed: string[][] = [];
    return {
      ...mt(id, pairs),
      warmed,
      warmUp: async (asked) => {
        warmed.push((asked ?? []).map((pair) => `${pair.from}-${pair.to}`).sort());
      },
    };
  }
  function recognizer(languages: string[]): AsrEngine {
    return {
      info: { id: `asr-${languages.join("-")}`, version: "test" },
      capabilities: {
        languages,
        sampleRate: 16_000,
        partialResults: false,
        wordTimings: false,
        punctuation: false,
      },
      createStream: () => Promise.reject(new Error("not used")),
      close: async () => {},
    };
  }

  it("starts only the directions recognized speech can take: every hop of every route from a recognized language", async () => {
    const apertiumWarming = warming("apertium", ["en-es", "es-en", "es-fr", "fr-es", "es-pt", "pt-es"]);
    const registry = EngineRegistry.fromEngines({
      vad,
      asr: [recognizer(["en"])],
      mt: [apertiumWarming],
      tts: [],
    });
    await registry.warmUp();
    // en→es direct, en→fr and en→pt through Spanish; nothing from French or Portuguese.
    expect(apertiumWarming.warmed).toEqual([["en-es", "es-fr", "es-pt"]]);
  });

  it("starts every direction a recognizer of all the languages can take, and asks an engine no route uses for nothing", async () => {
    const apertiumWarming = warming("apertium", ["en-es", "es-en", "es-fr", "fr-es"]);
    const unused = warming("unused", ["ja-ko"]);
    const registry = EngineRegistry.fromEngines({
      vad,
      asr: [recognizer(["en", "es", "fr"])],
      mt: [apertiumWarming, unused],
      tts: [],
    });
    await registry.warmUp();
    expect(apertiumWarming.warmed).toEqual([["en-es", "es-en", "es-fr", "fr-es"]]);
    expect(unused.warmed).toEqual([]);
  });
});
