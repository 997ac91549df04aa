import { log, type stt } from "@livekit/agents";
import type { RealtimeSession } from "@relay-translate/client";
import type { TranscriptEvents } from "./transcripts.js";

/** The longest a stream's end waits for relay's `finalized` while relay sends nothing. */
const MAX_QUIET_MS = 60_000;

/** What a session's end waits on, kept up to date while its messages are read. */
export interface SessionState {
  /** `finalized` messages so far: each answers a `finalize` once its results are all out. */
  finalized: number;
  /** When the last message came (performance.now() ms). */
  lastMessageAt: number;
}

/**
 * Reads a speech session's messages until it closes: transcripts become the agents' events (to
 * `emit`), `error` frames of a session that goes on and notices are logged. `done` settles when
 * the socket has closed and everything was read.
 */
export function followTranscripts(
  session: RealtimeSession,
  events: TranscriptEvents,
  offset: number,
  emit: (event: stt.SpeechEvent) => void,
): { readonly state: SessionState; readonly done: Promise<void> } {
  const state: SessionState = { finalized: 0, lastMessageAt: performance.now() };
  const done = (async () => {
    for await (const message of session) {
      state.lastMessageAt = performance.now();
      if (message.type === "original_transcript") {
        for (const event of events.eventsOf(message, offset)) emit(event);
      } else if (message.type === "finalized") {
        state.finalized++;
      } else if (message.type === "error") {
        // Worth seeing, not worth ending the stream for.
        log().warn({ correlationId: message.correlation_id }, `relay: ${message.error}`);
      } else if (message.type === "notice") {
        log().info({ code: message.code }, `relay: ${message.message}`);
      }
    }
  })();
  return { state, done };
}

/**
 * Ends a session whose input ended without losing its tail: sends `finalize`, waits for relay's
 * `finalized` (every final of the audio sent has come), then closes the session.
 */
export async function finishSession(session: RealtimeSession, state: Readonly<SessionState>): Promise<void> {
  const before = state.finalized;
  session.finalize();
  const finalizedAt = performance.now();
  while (state.finalized === before && session.isOpen) {
    if (performance.now() - Math.max(state.lastMessageAt, finalizedAt) > MAX_QUIET_MS) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  session.close(1000);
  await session.closed;
}
