import type { LanguageCode } from "../core/contracts.js";
import type { Requirement } from "../engines/routing/languages.js";
import type { LanguageLabels } from "../engines/routing/translator.js";

/**
 * The language plan of live sessions (real-time and rooms): how a session listens (a language,
 * "auto", two-way) and where each utterance goes. Surfaces build it (`languagePlan` here; a room
 * speaker's in src/rooms/room-languages.ts), check its requirements (`requirementsOf`) with
 * src/engines/routing/languages.ts, then build the pipeline from it.
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

/**
 * Where an utterance goes: a lane of the pipeline (its own translation and synthesis stages; lanes
 * never wait for each other) and the language it is translated into there.
 */
export interface Route {
  /** The lane's name: a session has one lane (`SESSION_LANE`), a room speaker one per language heard. */
  readonly lane: string;
  /** undefined: passed through (its translation is its own text, and it is not spoken). */
  readonly to: LanguageCode | undefined;
}

/** A live session's one lane: one-way, two-way and "auto" sessions translate in order, one line at a time. */
export const SESSION_LANE = "session";

/**
 * How a live session (a WebSocket session, or one room participant's speech) listens, and where
 * each utterance it hears goes. Requirements, engines and voice-clone directions are read from
 * `directions` and `into`; the pipeline follows `routes`.
 */
export interface LanguagePlan {
  /** What the recognizer is opened with: a language, or "auto" (identified per utterance). */
  readonly listen: LanguageCode | "auto";
  /** With "auto": the languages identification is restricted to; undefined: any. */
  readonly candidates?: readonly LanguageCode[];
  /** Every language an utterance can be translated into, with the labels of that direction. */
  readonly directions: readonly { readonly to: LanguageCode; readonly labels: LanguageLabels }[];
  /** Every language an utterance heard in `language` may be translated into (what engines must serve). */
  into(language: LanguageCode): readonly LanguageCode[];
  /**
   * Where an utterance heard in `language` goes now (asked per utterance: a room's listeners come
   * and go); `undefined`: its language was not identified. No route: neither translated nor spoken.
   */
  routes(language: LanguageCode | undefined): readonly Route[];
  /**
   * The language the speaker speaks when heard translated into `to`: the voice matcher's rate
   * reference and the voice-clone direction.
   */
  speakerLanguageInto(to: LanguageCode): LanguageCode;
}

/**
 * The one rule for which language each utterance of a live session goes into. Two-way: each side
 * of the pair into the other (the labels swap with the direction). "auto": into the target, and an
 * utterance identified as already in the target is passed through. A named source: always into the
 * target (even the same language: the line is then revoiced). Every utterance takes the session's
 * one lane, an unidentified one too (its translated final says nothing was translated).
 */
export function languagePlan(session: SessionLanguages): LanguagePlan {
  const { sourceLanguage: source, targetLanguage: target } = session;
  const labels = {
    sourceLanguageLabel: session.sourceLanguageLabel,
    targetLanguageLabel: session.targetLanguageLabel,
  };
  const sessionPlan = (
    plan: Omit<LanguagePlan, "into" | "routes">,
    targetFor: (language: LanguageCode) => LanguageCode | undefined,
  ): LanguagePlan => ({
    ...plan,
    into: (language) => {
      const to = targetFor(language);
      return to === undefined ? [] : [to];
    },
    routes: (language) => [
      { lane: SESSION_LANE, to: language === undefined ? undefined : targetFor(language) },
    ],
  });
  if (session.twoWay) {
    if (source === "auto") throw new Error("a two-way session names both of its languages");
    const swapped = {
      sourceLanguageLabel: labels.targetLanguageLabel,
      targetLanguageLabel: labels.sourceLanguageLabel,
    };
    const other = (language: LanguageCode) => (language === target ? source : target);
    return sessionPlan(
      {
        listen: "auto",
        candidates: [source, target],
        directions: [
          { to: target, labels },
          { to: source, labels: swapped },
        ],
        speakerLanguageInto: other,
      },
      other,
    );
  }
  const hints = source === "auto" && session.languageHints?.length ? session.languageHints : undefined;
  return sessionPlan(
    {
      listen: source,
      ...(hints ? { candidates: hints } : {}),
      directions: [{ to: target, labels }],
      // With "auto" the speaker's language is not known ahead: the target stands in.
      speakerLanguageInto: (to) => (source === "auto" ? to : source),
    },
    (language) => (source === "auto" && language === target ? undefined : target),
  );
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
    ...heard.flatMap((from) => plan.into(from).map((to) => ({ kind: "translation", from, to }) as const)),
  ];
}
