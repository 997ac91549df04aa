import { stt } from "@livekit/agents";
import type { OriginalTranscriptMessage } from "@relay-translate/client";
import { describe, expect, it } from "vitest";
import { TranscriptEvents } from "../../src/transcripts.js";

const { START_OF_SPEECH, INTERIM_TRANSCRIPT, FINAL_TRANSCRIPT, END_OF_SPEECH } = stt.SpeechEventType;

function message(
  correlationId: string,
  text: string,
  isFinal: boolean,
  extra: Partial<OriginalTranscriptMessage> = {},
): OriginalTranscriptMessage {
  return {
    type: "original_transcript",
    text,
    correlation_id: correlationId,
    is_final: isFinal,
    source_language: "en",
    target_language: "en",
    detected_language: "en",
    timestamp: 0,
    ...extra,
  };
}

/** The events of a run of messages, as [type, text] pairs. */
function run(events: TranscriptEvents, messages: OriginalTranscriptMessage[]) {
  return messages.flatMap((m) => events.eventsOf(m)).map((e) => [e.type, e.alternatives?.[0].text]);
}

describe("relay transcripts as the agents' speech events", () => {
  it("gives each final only the words it adds (stable mode's finals extend each other), and ends speech when nothing is pending", () => {
    const events = new TranscriptEvents("stable", () => 1);
    expect(
      run(events, [
        message("a", "go", false),
        message("a", "go forward ten", false),
        // Committed while "ten" is still pending: speech goes on.
        message("a", "go forward", true),
        message("a", "go forward ten meters", false),
        message("a", "go forward ten meters", true),
      ]),
    ).toEqual([
      [START_OF_SPEECH, undefined],
      [INTERIM_TRANSCRIPT, "go"],
      [INTERIM_TRANSCRIPT, "go forward ten"],
      [FINAL_TRANSCRIPT, "go forward"],
      [INTERIM_TRANSCRIPT, "ten meters"],
      [FINAL_TRANSCRIPT, "ten meters"],
      [END_OF_SPEECH, "go forward ten meters"],
    ]);
    expect(events.open).toBe(false);
  });

  it("keeps speech open across segments until the last one closes (sentence mode: one segment per sentence)", () => {
    const events = new TranscriptEvents("sentence", () => 2);
    expect(
      run(events, [
        message("s1", "Hello there. How", false),
        message("s2", "How are", false),
        message("s1", "Hello there.", true),
        message("s2", "How are you?", true),
        message("s3", "Fine", false),
      ]),
    ).toEqual([
      [START_OF_SPEECH, undefined],
      [INTERIM_TRANSCRIPT, "Hello there. How"],
      [INTERIM_TRANSCRIPT, "How are"],
      [FINAL_TRANSCRIPT, "Hello there."],
      [FINAL_TRANSCRIPT, "How are you?"],
      [END_OF_SPEECH, "Hello there. How are you?"],
      [START_OF_SPEECH, undefined],
      [INTERIM_TRANSCRIPT, "Fine"],
    ]);
    expect(events.open).toBe(true);
  });

  it("in sentence mode, a final that leaves words pending closes its segment but not the speech", () => {
    const events = new TranscriptEvents("sentence", () => 2);
    run(events, [message("s1", "Hello there. How", false), message("s1", "Hello there.", true)]);
    expect(events.open).toBe(true);
    expect(run(events, [message("s2", "How are you?", true)])).toEqual([
      [FINAL_TRANSCRIPT, "How are you?"],
      [END_OF_SPEECH, "Hello there. How are you?"],
    ]);
  });

  it("uses relay-2's speaker and utterance times, else the audio sent; the identified language; an offset across reconnections", () => {
    let audio = 3;
    const events = new TranscriptEvents("stable", () => audio);
    const [, relay2] = events.eventsOf(
      message("a", "hola", true, { speaker: "2", start_ms: 1200, end_ms: 1800, detected_language: "es" }),
      10,
    );
    expect(relay2!.alternatives![0]).toMatchObject({
      text: "hola",
      language: "es",
      speakerId: "2",
      startTime: 11.2,
      endTime: 11.8,
    });
    const [start] = events.eventsOf(message("b", "one", false));
    audio = 4;
    const [final] = events.eventsOf(message("b", "one two", true));
    expect(start!.type).toBe(START_OF_SPEECH);
    expect(final!.alternatives![0]).toMatchObject({ text: "one two", startTime: 3, endTime: 4 });
    expect(final!.alternatives![0].speakerId).toBeUndefined();
  });

  it("sends no empty finals: a final that adds nothing still closes the segment", () => {
    const events = new TranscriptEvents("stable", () => 0);
    expect(run(events, [message("a", "stop here", false), message("a", "stop here", true)])).toEqual([
      [START_OF_SPEECH, undefined],
      [INTERIM_TRANSCRIPT, "stop here"],
      [FINAL_TRANSCRIPT, "stop here"],
      [END_OF_SPEECH, "stop here"],
    ]);
    const closing = new TranscriptEvents("stable", () => 0);
    run(closing, [message("a", "a b c", false), message("a", "a b", true)]);
    expect(run(closing, [message("a", "a b", true)])).toEqual([[END_OF_SPEECH, "a b"]]);
  });
});
