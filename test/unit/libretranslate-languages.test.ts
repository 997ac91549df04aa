import { describe, expect, it } from "vitest";
import { languageList, serverLanguages } from "../../src/engines/libretranslate/languages.js";

/** A LibreTranslate `GET /languages` answer read into relay's pairs and back into the server's codes. */
const pairsOf = (list: Parameters<typeof serverLanguages>[0]) =>
  serverLanguages(list).pairs.map(({ from, to }) => `${from}>${to}`);

describe("LibreTranslate languages", () => {
  it("reads each language's targets, in relay's codes, keeping the server's codes to send", () => {
    const languages = serverLanguages([
      { code: "en", targets: ["de", "pt-BR", "zh-Hans", "zh-Hant"] },
      { code: "pt-BR", targets: ["en"] },
      { code: "zh-Hant", targets: ["en", "zh-Hans"] },
    ]);
    expect(languages.pairs).toEqual([
      { from: "en", to: "de" },
      { from: "en", to: "pt" },
      { from: "en", to: "zh" },
      { from: "pt", to: "en" },
      { from: "zh", to: "en" },
    ]);
    expect(languages.codes("en", "pt")).toEqual({ source: "en", target: "pt-BR" });
    // two scripts serve zh: the first the server lists is used
    expect(languages.codes("en", "zh")).toEqual({ source: "en", target: "zh-Hans" });
    expect(languages.codes("zh", "en")).toEqual({ source: "zh-Hant", target: "en" });
    // de is only a target here; zh-Hant → zh-Hans is no pair in relay's codes
    expect(languages.codes("de", "en")).toBeUndefined();
    expect(languages.codes("zh", "zh")).toBeUndefined();
  });

  it("prefers the plain code where a variant serves the same language", () => {
    const languages = serverLanguages([
      { code: "en", targets: ["pt-BR", "pt"] },
      { code: "pt-BR", targets: ["en"] },
      { code: "pt", targets: ["en"] },
    ]);
    expect(languages.codes("en", "pt")).toEqual({ source: "en", target: "pt" });
    expect(languages.codes("pt", "en")).toEqual({ source: "pt", target: "en" });
    expect(pairsOf([{ code: "en", targets: ["pt-BR", "pt"] }])).toEqual(["en>pt"]);
  });

  it("pairs every language with every other when the server lists no targets (before LibreTranslate 1.6)", () => {
    expect(pairsOf([{ code: "en" }, { code: "de" }, { code: "fr" }])).toEqual([
      "en>de",
      "en>fr",
      "de>en",
      "de>fr",
      "fr>en",
      "fr>de",
    ]);
  });

  it("drops codes relay's tag parser cannot read, and reads the ones it can as it does everywhere", () => {
    expect(
      pairsOf([
        { code: "auto" },
        { code: "english" },
        { code: "" },
        { code: "EN_us" },
        { code: "iw" },
        { code: "12" },
      ]),
    ).toEqual(["en>he", "he>en"]);
    expect(serverLanguages([{ code: "EN_us" }, { code: "iw" }]).codes("en", "he")).toEqual({
      source: "EN_us",
      target: "iw",
    });
  });

  it("accepts LibreTranslate's answer shape only", () => {
    const answer = [{ code: "en", name: "English", targets: ["es"] }];
    expect(languageList.parse(answer)).toEqual([{ code: "en", targets: ["es"] }]);
    expect(languageList.safeParse({ languages: answer }).success).toBe(false);
    expect(languageList.safeParse([{ name: "English" }]).success).toBe(false);
    expect(languageList.safeParse([{ code: "en", targets: "es" }]).success).toBe(false);
  });
});
