import type { EngineRegistry } from "./registry.js";
import type { LanguageCode } from "../../core/contracts.js";
import { languageName } from "../../core/language-tags.js";

/**
 * What the configured engines can do with a language: one servability check for every surface
 * (real-time sessions, rooms, dubbing). Each surface maps the typed results to its own
 * error code and wording. Language tags are parsed in src/core/language-tags.ts.
 */

/** The languages the dubbing interface accepts (`target_lang`, `source_lang`), the spec's list. */
export const DUBBING_LANGUAGES = ["en", "es", "fr", "de", "it", "pt", "ru", "ja", "ko", "zh"] as const;
export type DubbingLanguage = (typeof DUBBING_LANGUAGES)[number];

export function isDubbingLanguage(language: string): language is DubbingLanguage {
  return (DUBBING_LANGUAGES as readonly string[]).includes(language);
}

/** What the servability check reads of the configured engines (an `EngineRegistry`). */
export type LanguageCapabilities = Pick<
  EngineRegistry,
  | "recognizer"
  | "languageIdentifier"
  | "synthesizer"
  | "translationRoute"
  | "recognitionLanguages"
  | "voiceLanguages"
  | "translationTargets"
>;

/** Something a request needs the configured engines to do. */
export type Requirement =
  /** Recognize speech in `language`; "auto": identify which language is spoken. */
  | { readonly kind: "recognition"; readonly language: LanguageCode | "auto" }
  /** Tell `language` apart from others: the recognizer that identifies languages recognizes it. */
  | { readonly kind: "identification"; readonly language: LanguageCode }
  /** Translate from `from` into `to`; from "auto": from at least one recognized language. */
  | { readonly kind: "translation"; readonly from: LanguageCode | "auto"; readonly to: LanguageCode }
  /** Speak `language`. */
  | { readonly kind: "voice"; readonly language: LanguageCode };

/** The first requirement the configured engines cannot meet, with what they do offer instead. */
export type Unservable =
  | {
      readonly kind: "recognition";
      /** "auto": no configured recognizer identifies languages. */
      readonly language: LanguageCode | "auto";
      /** The languages speech can be recognized in. */
      readonly available: LanguageCode[];
    }
  | {
      readonly kind: "identification";
      readonly language: LanguageCode;
      /** The languages the identifying recognizer knows (none when no recognizer identifies languages). */
      readonly available: LanguageCode[];
    }
  | {
      readonly kind: "translation";
      readonly from: LanguageCode | "auto";
      readonly language: LanguageCode;
      /** The targets reachable from `from` (from "auto": from any recognized language). */
      readonly available: LanguageCode[];
    }
  | {
      readonly kind: "voice";
      readonly language: LanguageCode;
      /**
       * The languages with voice output; where the request also translates into `language`, only
       * those its sources translate into (`throughTranslation`).
       */
      readonly available: LanguageCode[];
      readonly throughTranslation?: true;
    };

/**
 * Checks the requirements in the order given (the order decides which problem a request with
 * several is told about) and returns the first one the engines cannot meet; undefined when all are.
 */
export function unservable(
  registry: LanguageCapabilities,
  requirements: readonly Requirement[],
): Unservable | undefined {
  for (const requirement of requirements) {
    const problem = check(registry, requirement);
    if (problem) return withWorkingAlternatives(registry, requirements, problem);
  }
  return undefined;
}

/**
 * A language the request translates into and speaks is offered only alternatives that meet every
 * requirement it had: a target with no voice lists the voiced languages its sources translate
 * into, not every voice (93 with eSpeak NG, most unreachable), and an untranslatable one the
 * targets that also have a voice.
 */
function withWorkingAlternatives(
  registry: LanguageCapabilities,
  requirements: readonly Requirement[],
  problem: Unservable,
): Unservable {
  if (problem.kind !== "voice" && problem.kind !== "translation") return problem;
  const { language } = problem;
  const into = requirements.filter(
    (requirement) =>
      (requirement.kind === "voice" && requirement.language === language) ||
      (requirement.kind === "translation" && requirement.to === language),
  );
  const instead = (requirement: Requirement, alternative: LanguageCode): Requirement =>
    requirement.kind === "translation"
      ? { ...requirement, to: alternative }
      : { kind: "voice", language: alternative };
  const available = problem.available.filter((alternative) =>
    into.every((requirement) => !check(registry, instead(requirement, alternative))),
  );
  if (problem.kind === "translation") return { ...problem, available };
  const translated = into.some((requirement) => requirement.kind === "translation");
  return { ...problem, available, ...(translated ? { throughTranslation: true as const } : {}) };
}

function check(registry: LanguageCapabilities, requirement: Requirement): Unservable | undefined {
  if (requirement.kind === "recognition") {
    const { language } = requirement;
    const served = language === "auto" ? registry.languageIdentifier() : registry.recognizer(language);
    return served ? undefined : { kind: "recognition", language, available: registry.recognitionLanguages() };
  }
  if (requirement.kind === "identification") {
    const { language } = requirement;
    const known = registry.languageIdentifier()?.capabilities.languages ?? [];
    return known.includes(language) ? undefined : { kind: "identification", language, available: [...known] };
  }
  if (requirement.kind === "voice") {
    const { language } = requirement;
    return registry.synthesizer(language)
      ? undefined
      : { kind: "voice", language, available: registry.voiceLanguages() };
  }
  const { from, to } = requirement;
  const served =
    from === "auto"
      ? translatableSources(registry, to).length > 0
      : registry.translationRoute(from, to) !== undefined;
  if (served) return undefined;
  const available =
    from === "auto"
      ? [...new Set(registry.recognitionLanguages().flatMap((source) => registry.translationTargets(source)))]
      : registry.translationTargets(from);
  return { kind: "translation", from, language: to, available };
}

/**
 * The recognized languages whose speech can be translated into `target`: the candidates when the
 * source language is "auto" (dubbing's `sourceCandidates` computes this list).
 */
export function translatableSources(registry: LanguageCapabilities, target: LanguageCode): LanguageCode[] {
  return registry
    .recognitionLanguages()
    .filter((source) => registry.translationRoute(source, target) !== undefined);
}

/**
 * What a dubbing `source_lang` of "auto" (the spec's default) means with the configured engines:
 * "auto" when a recognizer identifies languages (the speech is identified); the one dubbing
 * language the recognizers know when they know only one (dubbing checks that the speech sounds
 * like it); undefined otherwise (several languages and nothing to tell them apart: refused).
 */
export function dubbingAutoSource(registry: LanguageCapabilities): LanguageCode | "auto" | undefined {
  if (registry.languageIdentifier()) return "auto";
  const [only, ...others] = registry.recognitionLanguages();
  return only !== undefined && others.length === 0 && isDubbingLanguage(only) ? only : undefined;
}

/**
 * The dubbing languages the configured engines serve: targets they can translate into and speak,
 * sources they recognize ("auto" when `dubbingAutoSource` gives it a meaning). Listed by
 * `GET /v1/languages`, so clients offer what this server does.
 */
export function servedDubbingLanguages(registry: LanguageCapabilities): {
  sources: (LanguageCode | "auto")[];
  targets: LanguageCode[];
} {
  const servable = (requirements: Requirement[]) => unservable(registry, requirements) === undefined;
  return {
    sources: [
      ...(dubbingAutoSource(registry) !== undefined ? ["auto" as const] : []),
      ...DUBBING_LANGUAGES.filter((language) => servable([{ kind: "recognition", language }])),
    ],
    targets: DUBBING_LANGUAGES.filter((language) =>
      servable([
        { kind: "voice", language },
        { kind: "translation", from: "auto", to: language },
      ]),
    ),
  };
}

/** The model that widens recognition from one language to whisper's 99 (src/engines/whisper-cpp/catalogue.ts). */
const WIDER_RECOGNITION = "`npx relay models pull base`, then restart, for 99 languages";

/** How operators and users know the recognizers, where their ids would mean nothing. */
const RECOGNIZER_NAMES: Readonly<Record<string, string>> = {
  pocketsphinx: "PocketSphinx",
  "whisper-cpp": "whisper.cpp",
  "sherpa-onnx": "streaming zipformer",
  "openai-asr": "remote Whisper server",
};

/**
 * The recognition this server offers, in a user's words, and the step that widens it: the start-up
 * banner, `GET /v1/languages`, `relay languages`, the playground and the "cannot be recognized"
 * errors all say why "From" offers what it does with this one rule.
 */
export interface RecognitionTier {
  /** e.g. "English recognition only: PocketSphinx". */
  readonly summary: string;
  /** What the operator can do for more languages, when there is a next step. */
  readonly upgrade?: string;
}

export function recognitionTier(
  registry: Pick<LanguageCapabilities, "recognitionLanguages" | "recognizer" | "languageIdentifier">,
): RecognitionTier {
  const languages = registry.recognitionLanguages();
  const engines = [...new Set(languages.map((language) => registry.recognizer(language)!.info.id))].map(
    (id) => RECOGNIZER_NAMES[id] ?? id,
  );
  const upgrade = registry.languageIdentifier() ? {} : { upgrade: WIDER_RECOGNITION };
  if (languages.length === 0) return { summary: "No speech recognition: no recognizer loaded", ...upgrade };
  const [only] = languages;
  const summary =
    languages.length === 1
      ? `${languageName(only!)} recognition only: ${engines.join(", ")}`
      : `Recognition in ${languages.length} languages${registry.languageIdentifier() ? ", spoken language identified" : ""}: ${engines.join(", ")}`;
  return { summary, ...upgrade };
}

/** The tier's next step as the end of a "cannot be recognized" message ("" when there is none). */
export function recognitionAdvice(tier: RecognitionTier): string {
  return tier.upgrade ? ` (the server's operator can add languages: ${tier.upgrade})` : "";
}
