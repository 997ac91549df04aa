import { normalizeLanguage, stt } from "@livekit/agents";
import type { OriginalTranscriptMessage } from "@relay-translate/client";

/** What is known of one relay segment (one `correlation_id`). */
interface Segment {
  /** The text of its last final: finals of a segment extend each other (`stable` mode). */
  finalText: string;
  /** The text of its last transcript, interim or final. */
  shownText: string;
  /** Seconds into the stream's audio. */
  startTime: number;
}

/**
 * relay's transcripts as the agents' speech events. relay sends the whole segment each time (an
 * interim is the segment so far; in `stable` mode each final extends the previous one), while
 * agents appends each FINAL_TRANSCRIPT to the user's turn: so a final carries only what it adds,
 * and an interim only what no final has covered yet.
 *
 * relay has no end-of-speech message. Speech has ended when a final covers everything shown:
 * relay never commits the newest word before the utterance ends (its stabilizer holds it back), so
 * a final that leaves nothing pending is the utterance's last. In `stable` mode a final that leaves
 * words pending keeps its segment open; in `sentence` mode every final closes its segment and the
 * pending words go on in the next one. START_OF_SPEECH comes with the first transcript after the
 * end, END_OF_SPEECH (with the turn's finals joined, as agents expects) once nothing is pending.
 */
export class TranscriptEvents {
  private readonly segments = new Map<string, Segment>();
  private speaking = false;
  /** Sentence mode: a closed segment left words pending, which the next segment will carry. */
  private carried = false;
  private finals: string[] = [];

  /** `audioSeconds`: audio sent so far, the time of a transcript without relay-2's times. */
  constructor(
    private readonly mode: "stable" | "sentence",
    private readonly audioSeconds: () => number,
  ) {}

  /** Whether words were shown that no final has covered yet. */
  get open(): boolean {
    return this.segments.size > 0 || this.carried;
  }

  /** The events for one `original_transcript`; `offset`: seconds of audio before this session. */
  eventsOf(message: OriginalTranscriptMessage, offset = 0): stt.SpeechEvent[] {
    const events: stt.SpeechEvent[] = [];
    const now = this.audioSeconds();
    let segment = this.segments.get(message.correlation_id);
    if (!segment) {
      segment = {
        finalText: "",
        shownText: "",
        startTime: message.start_ms !== undefined ? message.start_ms / 1000 : now,
      };
      this.segments.set(message.correlation_id, segment);
      this.carried = false;
    }
    if (!this.speaking) {
      this.speaking = true;
      events.push({ type: stt.SpeechEventType.START_OF_SPEECH });
    }
    const { text } = message;
    const added = text.startsWith(segment.finalText) ? text.slice(segment.finalText.length).trim() : text;
    const data = (words: string): stt.SpeechData => ({
      language: normalizeLanguage(message.detected_language ?? message.source_language),
      text: words,
      startTime: offset + segment.startTime,
      endTime: offset + (message.end_ms !== undefined ? message.end_ms / 1000 : now),
      // relay reports no confidence; agents takes a missing one as 1.
      confidence: 1,
      ...(message.speaker !== undefined ? { speakerId: message.speaker } : {}),
      metadata: { correlationId: message.correlation_id },
    });
    if (!message.is_final) {
      segment.shownText = text;
      if (added) events.push({ type: stt.SpeechEventType.INTERIM_TRANSCRIPT, alternatives: [data(added)] });
      return events;
    }
    if (added) {
      events.push({ type: stt.SpeechEventType.FINAL_TRANSCRIPT, alternatives: [data(added)] });
      this.finals.push(added);
    }
    const pending = segment.shownText.startsWith(text) && segment.shownText.length > text.length;
    segment.finalText = text;
    segment.shownText = text;
    if (pending && this.mode === "stable") return events;
    this.segments.delete(message.correlation_id);
    // Unless a newer segment already shows them.
    if (pending && this.segments.size === 0) this.carried = true;
    if (!this.open) {
      this.speaking = false;
      events.push({
        type: stt.SpeechEventType.END_OF_SPEECH,
        alternatives: [data(this.finals.join(" "))],
      });
      this.finals = [];
    }
    return events;
  }
}
