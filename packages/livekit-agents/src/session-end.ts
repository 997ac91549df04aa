import type { RealtimeSession } from "@relay-translate/client";

/** After `finalize`, what relay sends last comes within this of the previous message. */
const QUIET_MS = 1000;
/** …and a session that heard nothing is given this long to show it heard something after all. */
const SILENT_QUIET_MS = 3000;
/** The longest a stream's end waits for relay's last transcripts. */
const MAX_WAIT_MS = 15_000;

/**
 * relay's speech sessions have no end-of-results message, so a stream whose input ended sends
 * `finalize` and waits until no segment is open and the server has gone quiet (as `relay live`
 * does), then closes the session. `lastMessageAt` is read each time (performance.now() ms).
 */
export async function finishSession(
  session: RealtimeSession,
  state: { readonly open: boolean; readonly heardAny: boolean; readonly lastMessageAt: number },
): Promise<void> {
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
