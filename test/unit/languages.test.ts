import { describe, expect, it } from "vitest";
import { isLanguageCode, parseLanguageTag } from "../../src/core/language-tags.js";
import {
  isDubbingLanguage,
  translatableSources,
  unservable,
  type LanguageCapabilities,
} from "../../src/engines/routing/languages.js";

describe("parseLanguageTag", () => {
  it("keeps the primary language of BCP 47 tags, lower-case and canonical", () => {
    for (const [tag, language] of [
      ["en", "en"],
      ["en-US", "en"],
      ["EN-us", "en"],
      ["pt_BR", "pt"],
      ["zh-Hant-TW", "zh"],
      ["es-419", "es"],
      ["eng", "en"],
      ["iw", "he"],
    ]) {
      expect(parseLanguageTag(tag!)).toEqual({ ok: true, language });
    }
  });

  it("rejects what is not a language tag, with the tag", () => {
    for (const tag of ["", "e", "english", "en-", "123", "en US", "x-private", "-en"]) {
      expect(parseLanguageTag(tag)).toEqual({ ok: false, rejection: { kind: "malformed", tag } });
    }
  });

  it("tells canonical codes and dubbing languages apart", () => {
    expect(isLanguageCode("en")).toBe(true);
    expect(isLanguageCode("en-US")).toBe(false);
    expect(isLanguageCode("EN")).toBe(false);
    expect(isDubbingLanguage("ja")).toBe(true);
    expect(isDubbingLanguage("nl")).toBe(false);
  });
});

describe("unservable", () => {
  // en and es recognized, en→es and es→en translated, es and fr spoken; no language identifier.
  const routes = new Set(["en>es", "es>en"]);
  const engines = {
    recognizer: (language: string) => (["en", "es"].includes(language) ? {} : undefined),
    languageIdentifier: () => undefined,
    synthesizer: (language: string) => (["es", "fr"].includes(language) ? {} : undefined),
    translationRoute: (from: string, to: string) => (routes.has(`${from}>${to}`) ? {} : undefined),
    recognitionLanguages: () => ["en", "es"],
    voiceLanguages: () => ["es", "fr"],
    translationTargets: (from: string) =>
      [...routes].filter((r) => r.startsWith(`${from}>`)).map((r) => r.slice(3)),
  } as unknown as LanguageCapabilities;

  it("is undefined when every requirement is met", () => {
    expect(
      unservable(engines, [
        { kind: "recognition", language: "en" },
        { kind: "translation", from: "en", to: "es" },
        { kind: "voice", language: "es" },
      ]),
    ).toBeUndefined();
  });

  it("reports the first unmet requirement, in the order given, with what is available", () => {
    expect(unservable(engines, [{ kind: "recognition", language: "de" }])).toEqual({
      kind: "recognition",
      language: "de",
      available: ["en", "es"],
    });
    expect(unservable(engines, [{ kind: "recognition", language: "auto" }])).toMatchObject({
      kind: "recognition",
      language: "auto",
    });
    const both = [
      { kind: "voice", language: "en" },
      { kind: "translation", from: "es", to: "fr" },
    ] as const;
    expect(unservable(engines, both)).toEqual({ kind: "voice", language: "en", available: ["es", "fr"] });
    expect(unservable(engines, [...both].reverse())).toEqual({
      kind: "translation",
      from: "es",
      language: "fr",
      available: ["en"],
    });
    expect(unservable(engines, [{ kind: "translation", from: "auto", to: "fr" }])).toEqual({
      kind: "translation",
      from: "auto",
      language: "fr",
      available: ["es", "en"],
    });
  });

  it("offers a target only the languages that would meet all it needed: translated into and voiced", () => {
    // "de" has no voice, nor a translation from "en": of the voices (es, fr), only es is reached from en.
    expect(
      unservable(engines, [
        { kind: "recognition", language: "en" },
        { kind: "voice", language: "de" },
        { kind: "translation", from: "en", to: "de" },
      ]),
    ).toEqual({ kind: "voice", language: "de", available: ["es"], throughTranslation: true });
    // Spoken "fr" is not reached from "es"; of the targets of "es" (en), none has a voice.
    expect(
      unservable(engines, [
        { kind: "voice", language: "fr" },
        { kind: "translation", from: "es", to: "fr" },
      ]),
    ).toEqual({ kind: "translation", from: "es", language: "fr", available: [] });
  });

  it("lists the recognized languages that translate into a target", () => {
    expect(translatableSources(engines, "es")).toEqual(["en"]);
    expect(translatableSources(engines, "fr")).toEqual([]);
  });
});
