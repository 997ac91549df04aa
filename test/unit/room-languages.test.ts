import { describe, expect, it } from "vitest";
import {
  languagesHeardBy,
  listenersOf,
  MAX_ROOM_LANES,
  roomParticipantBound,
  roomSpeakerPlan,
  spokenLanguages,
  trackOf,
} from "../../src/rooms/room-languages.js";
import type { RoomLanguages, RoomMember } from "../../src/rooms/types.js";
import type { LanguagePlan } from "../../src/pipeline/language-plan.js";

/** Who hears what in a room (src/rooms/room-languages.ts) and a participant's speech plan. */

/** The languages an utterance heard in `heard` goes into now, each its own lane. */
const lanesOf = (plan: LanguagePlan, heard: string) =>
  plan.routes(heard).map(({ lane, to }) => (lane === to ? to : `${to} on lane ${lane}`));

const meeting: RoomLanguages = { languages: ["en", "es", "de"] };
const spec: RoomLanguages = { languages: ["en", "es"], pair: { source: "en", target: "es", twoWay: false } };
const ana: RoomMember = { identity: "ana", language: "en" };
const ben: RoomMember = { identity: "ben", language: "es" };
const cleo: RoomMember = { identity: "cleo", language: "de" };
const pinch: RoomMember = { identity: "pinch" };

describe("room languages", () => {
  it("a translation goes to its language's listeners, never back to a declared speaker", () => {
    const present = [ana, ben, cleo, { identity: "bea", language: "es" }];
    expect(listenersOf("es", ana, present, meeting)).toEqual(["ben", "bea"]);
    expect(listenersOf("de", ana, present, meeting)).toEqual(["cleo"]);
    expect(listenersOf("en", ana, present, meeting)).toEqual([]);
    expect([...languagesHeardBy(ana, present, meeting)].sort()).toEqual(["de", "es"]);
  });

  it("an undeclared participant of a spec room hears the target, their own speech included (as before)", () => {
    const present = [pinch, ana];
    expect(listenersOf("es", pinch, present, spec)).toEqual(["pinch"]);
    expect([...languagesHeardBy(ana, present, spec)]).toEqual(["es"]);
    expect(trackOf("es", spec)).toBe("translated-audio");
    expect(trackOf("en", spec)).toBe("translated-audio-en");
    expect(trackOf("es", meeting)).toBe("translated-audio-es");
  });

  it("bounds a room's participants by its lanes: more languages, fewer speakers", () => {
    expect(roomParticipantBound({ languages: ["en", "es"] }, 8)).toBe(8);
    expect(roomParticipantBound(meeting, 8)).toBe(8);
    const four = roomParticipantBound({ languages: ["en", "es", "de", "fr"] }, 8);
    expect(four).toBe(Math.floor(MAX_ROOM_LANES / 3));
    expect(four * 3).toBeLessThanOrEqual(MAX_ROOM_LANES);
  });

  it("plans a declared speaker in their language into what the others hear now", () => {
    let present = [ana, ben];
    const plan = roomSpeakerPlan(meeting, ana, () => languagesHeardBy(ana, present, meeting));
    expect(plan.listen).toBe("en");
    expect(plan.directions.map(({ to }) => to)).toEqual(["es", "de"]);
    expect(lanesOf(plan, "en")).toEqual(["es"]);
    present = [ana, ben, cleo];
    expect(lanesOf(plan, "en")).toEqual(["es", "de"]);
  });

  it("keeps the spec's rule for an undeclared speaker: the pair, one way or two", () => {
    const listening = () => new Set<string>();
    const undeclared = { identity: "pinch-client" };
    const oneWay = roomSpeakerPlan(
      { languages: ["en", "es"], pair: { source: "en", target: "es", twoWay: false } },
      undeclared,
      listening,
    );
    expect(oneWay.listen).toBe("en");
    expect(lanesOf(oneWay, "en")).toEqual(["es"]);
    const twoWay = roomSpeakerPlan(
      { languages: ["en", "es"], pair: { source: "en", target: "es", twoWay: true } },
      undeclared,
      listening,
    );
    expect(twoWay.listen).toBe("auto");
    expect(lanesOf(twoWay, "es")).toEqual(["en"]);
    expect(lanesOf(twoWay, "en")).toEqual(["es"]);
  });

  it("makes a language no engine recognizes listen-only, keeping the first when none is", () => {
    const english = (language: string) => language === "en";
    expect(spokenLanguages({ languages: ["es", "en", "fr"] }, english)).toEqual({
      spoken: ["en"],
      listenOnly: ["es", "fr"],
    });
    expect(spokenLanguages({ languages: ["es", "fr"] }, english)).toEqual({
      spoken: ["es"],
      listenOnly: ["fr"],
    });
  });
});
