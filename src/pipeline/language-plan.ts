import type { LanguageCode } from "../core/contracts.js";
import type { Requirement } from "../engines/routing/languages.js";
import type { LanguageLabels } from "../engines/routing/translator.js";

/**
 * The language plan of live sessions (real-time and rooms): how a session listens (a language,
 * "auto", two-way) and which language each utterance goes into. Surfaces check the plan's
 * requirements (`requirementsOf`) with src/engines/routing/languages.ts, then build the pipeline.
 */

/** The languages of a live speech session (WebSocket sessions and rooms), as the client asked. */
export interface SessionLanguages extends LanguageLabels {
  /** The spoken language, or "auto": identified per utterance. */
  readonly sourceLanguage: LanguageCode | "auto";
  readonly targetLanguage: LanguageCode;
  /** With "auto": the languages identification chooses among (`languageHints`); absent: any. */
  readonly languageHints?: readonly LanguageCode[];
  /** `sourceLanguage` and `targetLanguage` (both named) are a pair: each side into the other. */
  readonly twoWay?: boolean;
}

/** How a live session listens and what it translates each utterance into. */
export interface LanguagePlan {
  /** What the recognizer is opened with: a language, or "auto" (identified per utterance). */
  readonly listen: LanguageCode | "auto";
  /** With "auto": the languages identification is restricted to; undefined: any. */
  readonly candidates?: readonly LanguageCode[];
  /** Every language an utterance can be translated into, with the labels of that direction. */
  readonly directions: readonly { readonly to: LanguageCode; readonly labels: LanguageLabels }[];
  /** What an utterance heard in `language` is translated into; undefined: it is passed through. */
  targetFor(language: LanguageCode): LanguageCode | undefined;
  /**
   * Rooms: every language an utterance heard in `language` goes into, asked per utterance (who
   * listens changes); replaces `targetFor` in the pipeline (`PipelineOptions.fanOut`).
   */
  readonly fanOut?: (language: LanguageCode) => readonly LanguageCode[];
}

/** A room participant as a speaker (src/rooms): what they speak, and who listens to them. */
export interface RoomSpeaker {
  /** The room's pair (spec rooms): an undeclared participant speaks the source, or either side when two-way. */
  readonly sourceLanguage: LanguageCode;
  readonly targetLanguage: LanguageCode;
  readonly twoWay: boolean;
  /** Every language of the room. */
  readonly languages: readonly LanguageCode[];
  /** The language the participant declared they speak and hear; undefined: a spec room's participant. */
  readonly language: LanguageCode | undefined;
  /** The languages the room's listeners hear now (for a declared speaker: everyone else's). */
  readonly listening: () => ReadonlySet<LanguageCode>;
}

/**
 * The plan of one room participant's speech. A participant who declared a language is heard in it
 * and translated into every other language someone in the room listens in (none: not translated,
 * not spoken). An undeclared participant of a spec room keeps the spec's rule (and the
 * WebSocket's): the source into the target, or with `twoWay` either side of the pair into the
 * other, whoever listens.
 */
export function roomSpeakerPlan(speaker: RoomSpeaker): LanguagePlan {
  const { language, sourceLanguage: source, targetLanguage: target } = speaker;
  if (language === undefined) {
    const pair = languagePlan({ sourceLanguage: source, targetLanguage: target, twoWay: speaker.twoWay });
    return {
      ...pair,
      fanOut: (heard) => {
        const to = pair.targetFor(heard);
        return to === undefined ? [] : [to];
      },
    };
  }
  return {
    listen: language,
    directions: speaker.languages
      .filter((to) => to !== language)
      .map((to) => ({ to, labels: {} as LanguageLabels })),
    targetFor: () => undefined,
    fanOut: (heard) => [...speaker.listening()].filter((to) => to !== heard),
  };
}

/**
 * The one rule for which language each utterance of a live session goes into. Two-way: each side
 * of the pair into the other (the labels swap with the direction). "auto": into the target, and an
 * utterance identified as already in the target is passed through. A named source: always into the
 * target (even the same language: the line is then revoiced).
 */
export function languagePlan(session: SessionLanguages): LanguagePlan {
  const { sourceLanguage: source, targetLanguage: target } = session;
  const labels = {
    sourceLanguageLabel: session.sourceLanguageLabel,
    targetLanguageLabel: session.targetLanguageLabel,
  };
  if (session.twoWay) {
    if (source === "auto") throw new Error("a two-way session names both of its languages");
    const swapped = {
      sourceLanguageLabel: labels.targetLanguageLabel,
      targetLanguageLabel: labels.sourceLanguageLabel,
    };
    return {
      listen: "auto",
      candidates: [source, target],
      directions: [
        { to: target, labels },
        { to: source, labels: swapped },
      ],
      targetFor: (language) => (language === target ? source : target),
    };
  }
  const hints = source === "auto" && session.languageHints?.length ? session.languageHints : undefined;
  return {
    listen: source,
    ...(hints ? { candidates: hints } : {}),
    directions: [{ to: target, labels }],
    targetFor: (language) => (source === "auto" && language === target ? undefined : target),
  };
}

/**
 * What a plan needs of the engines, in the order problems are reported: recognition (identifying
 * each candidate), voice output for every direction (`speaks`), then translation of every language
 * that can be heard into its target.
 */
export function requirementsOf(plan: LanguagePlan, speaks: boolean): Requirement[] {
  const { listen, candidates } = plan;
  const heard = listen !== "auto" ? [listen] : (candidates ?? []);
  return [
    { kind: "recognition", language: listen },
    ...(listen === "auto" ? heard.map((language) => ({ kind: "identification", language }) as const) : []),
    ...(speaks ? plan.directions.map(({ to }) => ({ kind: "voice", language: to }) as const) : []),
    // "auto" without candidates: at least one language heard must reach the target.
    ...(heard.length === 0
      ? plan.directions.map(({ to }) => ({ kind: "translation", from: "auto", to }) as const)
      : []),
    ...heard.flatMap((from) => {
      const to = plan.targetFor(from);
      return to === undefined ? [] : [{ kind: "translation", from, to } as const];
    }),
  ];
}
