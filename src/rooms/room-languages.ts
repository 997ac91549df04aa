import type { LanguageCode } from "../core/contracts.js";
import { parseLanguageTag } from "../core/language-tags.js";
import type { Requirement } from "../engines/routing/languages.js";
import { languagePlan, requirementsOf, type LanguagePlan } from "../pipeline/language-plan.js";
import { TRANSLATION_TRACK_NAME, type RoomLanguages, type RoomMember } from "./types.js";

/**
 * The languages of a room and who hears what: the one rule rooms route speech and transcripts by.
 *
 * - A participant who declared a language (rooms created with `languages`, or a spec room's
 *   participant who chose one) speaks and hears it: they hear every other participant translated
 *   into it, never their own speech, never another language.
 * - An undeclared participant of a spec room hears the pair's target, as the spec's rooms do (with
 *   their own speech, as before).
 */

/** The language a participant hears. */
export function listeningLanguage(member: RoomMember, room: RoomLanguages): LanguageCode {
  return member.language ?? room.pair?.target ?? room.languages[0]!;
}

/**
 * A participant's language as a request or a join URL named it: one of the room's `languages`, or
 * the message saying why not.
 */
export function roomLanguageOf(
  asked: string,
  languages: readonly LanguageCode[],
): { readonly ok: true; readonly language: LanguageCode } | { readonly ok: false; readonly message: string } {
  const parsed = parseLanguageTag(asked);
  if (parsed.ok && languages.includes(parsed.language)) return { ok: true, language: parsed.language };
  const problem = parsed.ok ? "is not one of the room's" : "is not a language code; use one of the room's";
  return { ok: false, message: `language "${asked}" ${problem}: ${languages.join(", ")}` };
}

/** Who hears a translation into `language` of `speaker`'s speech. */
export function listenersOf(
  language: LanguageCode,
  speaker: RoomMember,
  present: Iterable<RoomMember>,
  room: RoomLanguages,
): string[] {
  return [...present]
    .filter((member) => !(member.identity === speaker.identity && speaker.language !== undefined))
    .filter((member) => listeningLanguage(member, room) === language)
    .map((member) => member.identity);
}

/** The languages `speaker`'s speech must reach now: those the others hear (a declared speaker's own excluded). */
export function languagesHeardBy(
  speaker: RoomMember,
  present: Iterable<RoomMember>,
  room: RoomLanguages,
): Set<LanguageCode> {
  return new Set(
    [...present]
      .filter((member) => member.identity !== speaker.identity)
      .map((member) => listeningLanguage(member, room)),
  );
}

/**
 * The track speech in `language` is published on: `translated-audio` for a spec room's target
 * (what Pinch's clients subscribe to), `translated-audio-<language>` for every other one.
 */
export function trackOf(language: LanguageCode, room: RoomLanguages): string {
  return language === room.pair?.target ? TRANSLATION_TRACK_NAME : `${TRANSLATION_TRACK_NAME}-${language}`;
}

/** Languages one room may have: each costs a translation lane per speaker. */
export const MAX_ROOM_LANGUAGES = 4;
/**
 * Translation lanes one room may hold: a lane is one speaker's speech translated and spoken into
 * one language (a translation stage and a synthesis stage beside the speaker's recognizer). What a
 * lane costs on 2 cores is in docs/benchmarks.md (bench:rooms).
 */
export const MAX_ROOM_LANES = 16;

/**
 * The participants one room admits: `maxParticipants`, fewer when each speaker's lanes (one per
 * other language) would take the room past `MAX_ROOM_LANES`.
 */
export function roomParticipantBound(room: RoomLanguages, maxParticipants: number): number {
  const lanesPerSpeaker = Math.max(1, room.languages.length - 1);
  return Math.max(1, Math.min(maxParticipants, Math.floor(MAX_ROOM_LANES / lanesPerSpeaker)));
}

/**
 * The plan of one participant's speech (`listening`: the languages the room's other participants
 * hear now, asked per utterance). A participant who declared a language is heard in it and
 * translated into every other language someone in the room listens in (none: not translated, not
 * spoken). An undeclared participant of a spec room keeps the spec's rule (and the WebSocket's): the
 * source into the target, or with `twoWay` either side of the pair into the other, whoever listens.
 * Each language a speaker's speech goes into is a lane of its own, and so a track of its own.
 */
export function roomSpeakerPlan(
  room: RoomLanguages,
  member: RoomMember,
  listening: () => ReadonlySet<LanguageCode>,
): LanguagePlan {
  const lanes = (languages: readonly LanguageCode[]) => languages.map((to) => ({ lane: to, to }));
  // Rooms created with `languages` have no undeclared participants; one would be heard in the first.
  const language = member.language ?? (room.pair ? undefined : room.languages[0]!);
  if (language === undefined) {
    const { source, target, twoWay } = room.pair!;
    const pair = languagePlan({ sourceLanguage: source, targetLanguage: target, twoWay });
    // Unidentified (two-way): not translated; the pipeline reports it.
    return { ...pair, routes: (heard) => (heard === undefined ? [] : lanes(pair.into(heard))) };
  }
  const others = room.languages.filter((to) => to !== language);
  return {
    listen: language,
    directions: others.map((to) => ({ to, labels: {} })),
    into: () => others,
    routes: (heard) => lanes([...listening()].filter((to) => to !== heard)),
    speakerLanguageInto: () => language,
  };
}

/**
 * What a room needs of the engines when its participants speak `spoken` (undefined: an undeclared
 * spec-room participant, who speaks the pair's source, or either side when two-way): what each
 * speaker's plan needs (`requirementsOf`), whoever listens. A room language nobody can be recognized
 * in is listen-only (`listenOnly`): its participants hear the others, and are told they are not
 * heard. The rooms API checks these at creation and for each participant's language.
 */
export function roomRequirements(
  room: RoomLanguages,
  spoken: readonly (LanguageCode | undefined)[],
  speaks: boolean,
): Requirement[] {
  const everyone = () => new Set(room.languages);
  return spoken.flatMap((language) =>
    requirementsOf(
      roomSpeakerPlan(room, { identity: "", ...(language === undefined ? {} : { language }) }, everyone),
      speaks,
    ),
  );
}

/**
 * The directions (speaker's language → language heard) voice cloning prepares for a room: those of
 * an undeclared participant's plan in a spec room, of each language participants can be recognized
 * in (`recognizes`) in a room created with `languages`.
 */
export function roomDirections(
  room: RoomLanguages,
  recognizes: (language: LanguageCode) => boolean,
): { readonly from: LanguageCode; readonly to: LanguageCode }[] {
  const speakers: (LanguageCode | undefined)[] = room.pair ? [undefined] : room.languages.filter(recognizes);
  const directions = new Map<string, { from: LanguageCode; to: LanguageCode }>();
  for (const language of speakers) {
    const plan = roomSpeakerPlan(
      room,
      { identity: "", ...(language === undefined ? {} : { language }) },
      () => new Set(room.languages),
    );
    const heard = plan.listen === "auto" ? (plan.candidates ?? []) : [plan.listen];
    for (const from of heard.filter(recognizes))
      for (const to of plan.into(from)) directions.set(`${from}>${to}`, { from, to });
  }
  return [...directions.values()];
}

/**
 * The languages of a room created with `languages` that participants can speak in (`recognizes`);
 * the rest are listen-only. With none recognized, the first is taken as spoken, so the check
 * reports that it cannot be recognized.
 */
export function spokenLanguages(
  room: RoomLanguages,
  recognizes: (language: LanguageCode) => boolean,
): { readonly spoken: LanguageCode[]; readonly listenOnly: LanguageCode[] } {
  const spoken = room.languages.filter(recognizes);
  if (spoken.length === 0) return { spoken: [room.languages[0]!], listenOnly: room.languages.slice(1) };
  return { spoken, listenOnly: room.languages.filter((language) => !spoken.includes(language)) };
}
