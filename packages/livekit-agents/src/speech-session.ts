import { log, type stt } from "@livekit/agents";
import type { RealtimeSession } from "@relay-translate/client";
import type { TranscriptEvents } from "./transcripts.js";

/** After `finalize`, what relay sends last comes within this of the previous message. */
const QUIET_MS = 1000;
/** …and a session that heard nothing is given this long to show it heard something after all. */
const SILENT_QUIET_MS = 3000;
/** The longest a stream's end waits for relay's last transcripts. */
const MAX_WAIT_MS = 15_000;

/** What a session's end waits on, kept up to date while its messages are read. */
export interface SessionState {
  /** Words were shown that no final has covered yet. */
  readonly open: boolean;
  /** A transcript has come. */
  heardAny: boolean;
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
  const state: SessionState = {
    get open() {
      return events.open;
    },
    heardAny: false,
    lastMessageAt: performance.now(),
  };
  const done = (async () => {
    for await (const message of session) {
      state.lastMessageAt = performance.now();
      if (message.type === "original_transcript") {
        state.heardAny = true;
        for (const event of events.eventsOf(message, offset)) emit(event);
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
 * relay's speech sessions have no end-of-results message, so a stream whose input ended sends
 * `finalize` and waits until no segment is open and the server has gone quiet (as `relay live`
 * does), then closes the session.
 */
export async function finishSession(session: RealtimeSession, state: Readonly<SessionState>): Promise<void> {
  session.finalize();
  const finalizedAt = performance.now();
  const deadline = finalizedAt + MAX_WAIT_MS;
  for (;;) {
    const now = performance.now();
    const quiet = now - Math.max(state.lastMessageAt, finalizedAt);
    const done = !state.open && quiet >= (state.heardAny ? QUIET_MS : SILENT_QUIET_MS);
    if (done || now >= deadline || !session.isOpen) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  session.close(1000);
  await session.closed;
}
