import { describe, expect, it } from "vitest";
import { UnsupportedLanguageError } from "../../src/dubbing/media/errors.js";
import {
  chooseSourceLanguage,
  pooledConfidence,
  type Heard,
} from "../../src/dubbing/stages/language-detection.js";
import { dubbingAutoSource, type LanguageCapabilities } from "../../src/engines/routing/languages.js";

/** Recognizers of `languages`, one of them identifying languages when `identifier`. */
const engines = (languages: string[], identifier = false) =>
  ({
    languageIdentifier: () => (identifier ? {} : undefined),
    recognitionLanguages: () => languages,
  }) as unknown as LanguageCapabilities;

describe("dubbingAutoSource: what source_lang auto means", () => {
  it("is identification with a language identifier, the one language without, refused with several", () => {
    expect(dubbingAutoSource(engines(["en", "de"], true))).toBe("auto");
    expect(dubbingAutoSource(engines(["en"]))).toBe("en");
    expect(dubbingAutoSource(engines(["en", "de"]))).toBeUndefined();
    // nl is not one of the spec's dubbing languages.
    expect(dubbingAutoSource(engines(["nl"]))).toBeUndefined();
    expect(dubbingAutoSource(engines([]))).toBeUndefined();
  });
});

describe("chooseSourceLanguage with one candidate and no identifier", () => {
  /** Resolves "auto" over segments heard as `heard`; the segments listened to are counted. */
  async function choose(heard: Heard[]) {
    const listened: number[] = [];
    const language = chooseSourceLanguage(
      ["en"],
      "es",
      heard.length,
      async (_, index) => {
        listened.push(index);
        return heard[index]!;
      },
      undefined,
    );
    return { language: await language.catch((error: unknown) => error), listened };
  }

  it("resolves to the language when the recognizer is confident enough over the first three segments", async () => {
    const sure = { text: "go forward ten meters", confidence: 0.9 };
    const result = await choose([sure, { text: "it was", confidence: 0.2 }, sure, sure, sure]);
    expect(result).toEqual({ language: "en", listened: [0, 1, 2] });
  });

  it("refuses speech the recognizer is not sure of, naming what would work", async () => {
    const { language } = await choose([
      { text: "and the and and once", confidence: 0.2 },
      { text: "it you should vote", confidence: 0.25 },
      { text: "", confidence: 1 },
    ]);
    expect(language).toBeInstanceOf(UnsupportedLanguageError);
    expect((language as Error).message).toMatch(
      /^source_lang "auto" was taken to be "en".*confidence 0\.22, below 0\.3.*source_lang.*npx relay models pull base/,
    );
  });

  it("does not refuse when there is nothing to judge by", async () => {
    expect((await choose([{ text: "words without a score" }])).language).toBe("en");
    expect((await choose([{ text: "", confidence: 0.1 }])).language).toBe("en");
    expect((await choose([])).language).toBe("en");
  });
});

describe("pooledConfidence", () => {
  it("weights each segment by its words and skips segments without words or a score", () => {
    const pooled = pooledConfidence([
      { text: "one two three", confidence: 0.2 },
      { text: "four", confidence: 0.6 },
      { text: "", confidence: 0 },
      { text: "five six" },
    ]);
    expect(pooled).toBeCloseTo((3 * 0.2 + 0.6) / 4);
  });
});
