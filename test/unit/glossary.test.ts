import { describe, expect, it } from "vitest";
import {
  glossaryFromContext,
  ignoredTermsNotice,
  MAX_GLOSSARY_TERMS,
  spellAsGlossary,
  translationTerms,
} from "../../src/core/glossary.js";
import { protectTerms, type PlaceholderForm } from "../../src/core/term-protection.js";
import { spellHypothesis } from "../../src/core/glossary-spelling.js";
import type { MtEngine, TranslateRequest, VadEngine } from "../../src/core/contracts.js";
import { EngineRegistry } from "../../src/engines/routing/registry.js";
import { translatorFor } from "../../src/engines/routing/translator.js";

/** Each term as "text" (recognition only) or "text => target". */
const terms = (context: string) =>
  glossaryFromContext(context).terms.map((term) =>
    term.target === undefined ? term.text : `${term.text} => ${term.target}`,
  );

describe("terms from a context", () => {
  it("takes the names of prose (runs of capitalized words, titles included), not a sentence's lone first word", () => {
    expect(
      terms("Dr. Baker met Mrs. Hope Walker. Quarterly review with Anneliese Brandt on Monday."),
    ).toEqual([
      "Dr. Baker => Dr. Baker",
      "Mrs. Hope Walker => Mrs. Hope Walker",
      "Anneliese Brandt => Anneliese Brandt",
      "Monday => Monday",
    ]);
  });

  it("takes list items whole: names kept in translation, lower-case phrases for recognition only", () => {
    expect(terms("Topics: Kubernetes, OKRs, machine learning, the Rust roadmap, Bank of America")).toEqual([
      "Kubernetes => Kubernetes",
      "OKRs => OKRs",
      "machine learning",
      "the Rust roadmap",
      "Rust => Rust",
      "Bank of America => Bank of America",
    ]);
  });

  it("takes acronyms, words with digits and quoted phrases anywhere, in any script", () => {
    expect(terms('We discuss "machine learning" and K8s with GPT-4 at ACME.')).toEqual([
      "machine learning => machine learning",
      "K8s => K8s",
      "GPT-4 => GPT-4",
      "ACME => ACME",
    ]);
    expect(terms("東京タワー、スカイツリー")).toEqual([
      "東京タワー => 東京タワー",
      "スカイツリー => スカイツリー",
    ]);
  });

  it("reads explicit lines: `source => target`, and `term => =` keeps it verbatim", () => {
    expect(terms("Hope Walker => =\nReading => Reading (UK)\nthe cloud => la nube")).toEqual([
      "Hope Walker => Hope Walker",
      "Reading => Reading (UK)",
      "the cloud => la nube",
    ]);
  });

  it(`uses the first ${MAX_GLOSSARY_TERMS} terms, each once, and counts the rest`, () => {
    const many = Array.from({ length: 70 }, (_, i) => `Term${String.fromCharCode(65 + (i % 26))}${i}`);
    const glossary = glossaryFromContext([...many, "TermA0", "terma0"].join(", "));
    expect(glossary.terms).toHaveLength(MAX_GLOSSARY_TERMS);
    expect(glossary.ignored).toBe(20);
    expect(ignoredTermsNotice(20)).toEqual({
      code: "context_terms_ignored",
      message: `context: 20 terms past the first ${MAX_GLOSSARY_TERMS} are not used for recognition and translation`,
    });
    expect(glossaryFromContext("").terms).toEqual([]);
    expect(glossaryFromContext(" , ; ").terms).toEqual([]);
  });
});

describe("placeholders", () => {
  const glossary = glossaryFromContext("Hope Walker, Kubernetes\nReading => Reading (UK)");
  const kept = translationTerms(glossary);

  for (const form of ["digits", "name", "tag"] as PlaceholderForm[]) {
    it(`(${form}) stand in for each occurrence, any case, and the terms or targets go back`, () => {
      const shielded = protectTerms("kubernetes runs in Reading, says Hope  Walker.", kept, form)!;
      expect(shielded.text).not.toMatch(/kubernetes|reading|walker/iu);
      const marks = shielded.text.match(/\d{3}|[A-Z][a-z]{3}[aeiou]x|<t\d+\/>/gu)!;
      expect(marks).toHaveLength(3);
      // An engine that reorders the sentence and keeps the placeholders.
      const translated = `Dice ${marks[2]}: ${marks[0]} corre en ${marks[1]}.`;
      expect(shielded.restore(translated)).toBe("Dice Hope Walker: Kubernetes corre en Reading (UK).");
    });
  }

  it("fail when a placeholder is lost or doubled, and are not used when none is needed", () => {
    const shielded = protectTerms("Kubernetes and Hope Walker", kept, "digits")!;
    const [first, second] = shielded.text.match(/\d{3}/gu)!;
    expect(shielded.restore(`${first} y`)).toBeUndefined();
    expect(shielded.restore(`${first} y ${second} ${second}`)).toBeUndefined();
    expect(protectTerms("nothing to protect here", kept, "digits")).toBeUndefined();
    // A text that holds a placeholder's own spelling is not protected.
    expect(protectTerms("Kubernetes costs 311 euros", kept, "digits")).toBeUndefined();
  });
});

describe("recognized terms in the glossary's spelling", () => {
  const glossary = glossaryFromContext("OKRs, Hope Walker, Reading");
  it("respells distinctive terms in the text and in the timed words, lone ordinary-looking words not", () => {
    expect(spellAsGlossary("we met hope walker about the okrs while reading", glossary)).toBe(
      "we met Hope Walker about the OKRs while reading",
    );
    const words = ["the", "okrs", "of", "hope", "walker"].map((word, i) => ({
      word,
      startMs: i * 100,
      endMs: i * 100 + 90,
    }));
    const spelled = spellHypothesis({ text: "the okrs of hope walker", words }, glossary);
    expect(spelled.text).toBe("the OKRs of Hope Walker");
    expect(spelled.words.map((word) => word.word)).toEqual(["the", "OKRs", "of", "Hope", "Walker"]);
    expect(spelled.words[1]!.startMs).toBe(100);
  });
});

describe("translation with a glossary", () => {
  const vad: VadEngine = {
    info: { id: "vad-double", version: "test" },
    capabilities: { sampleRate: 16_000, windowSamples: 512 },
    createStream: () => ({ probability: async () => 0 }),
    close: async () => {},
  };
  /** An engine that "translates" by upper-casing every word it does not know as a placeholder. */
  function shouting(id: string, pairs: [string, string][], options: Partial<MtEngine["capabilities"]>) {
    const requests: TranslateRequest[] = [];
    const engine: MtEngine = {
      info: { id, version: "test" },
      capabilities: { pairs: pairs.map(([from, to]) => ({ from, to })), usesContext: false, ...options },
      translate: async (request) => {
        requests.push(request);
        return request.text.replace(/\b[a-z]+\b/gu, (word) => word.toUpperCase());
      },
      close: async () => {},
    };
    return { engine, requests };
  }
  const glossary = glossaryFromContext("Hope Walker\nthe cloud => la nube");

  it("carries the terms through an engine that cannot read context, across both legs of a pivot", async () => {
    const { engine, requests } = shouting(
      "rules",
      [
        ["de", "es"],
        ["es", "fr"],
      ],
      { placeholder: "name" },
    );
    const registry = EngineRegistry.fromEngines({ vad, asr: [], mt: [engine], tts: [] });
    const translator = translatorFor(registry, "fr");
    const call = { from: "de", text: "hope walker and the cloud", context: "", previous: [], glossary };
    expect(await translator.translate(call)).toBe("Hope Walker AND la nube");
    expect(requests.map((request) => request.text)).toEqual(["Zorvax and Quixax", "Zorvax AND Quixax"]);
    // Streaming engines are not streamed from when the text holds terms: a partial would show placeholders.
    const stream = translator.translateStream(call, new AbortController().signal);
    const values: string[] = [];
    for await (const value of stream) values.push(value);
    expect(values).toEqual(["Hope Walker AND la nube"]);
  });

  it("falls back to the plain translation when a placeholder is lost, and hands the glossary to engines that read context", async () => {
    const { engine } = shouting("lossy", [["en", "es"]], { placeholder: "digits" });
    const lossy: MtEngine = { ...engine, translate: async (request) => request.text.replace(/\d+/gu, "") };
    const registry = EngineRegistry.fromEngines({ vad, asr: [], mt: [lossy], tts: [] });
    const call = { from: "en", text: "ask Hope Walker", context: "", previous: [], glossary };
    expect(await translatorFor(registry, "es").translate(call)).toBe("ask Hope Walker");

    const reading = shouting("llm", [["en", "es"]], { usesContext: true });
    const llmRegistry = EngineRegistry.fromEngines({ vad, asr: [], mt: [reading.engine], tts: [] });
    expect(await translatorFor(llmRegistry, "es").translate(call)).toBe("ASK Hope Walker");
    expect(reading.requests[0]!.glossary).toBe(glossary);
    expect(reading.requests[0]!.text).toBe("ask Hope Walker");
  });
});
