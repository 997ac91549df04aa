import type { RealtimeSocket } from "../../src/cli/recording-socket.js";
import { openSession } from "./session-socket.js";

/** A `mode=tts` session, once both ready frames are in. */
export const openTtsSession = (
  baseUrl: string,
  params: Record<string, string> = {},
): Promise<RealtimeSocket> =>
  openSession(
    baseUrl,
    { mode: "tts", ...params },
    { isReady: (m) => m.type === "ready" && m.mode === "tts" },
  );

/** Sends one `speak` and returns the audio frames received before its `speech_end`. */
export async function speakLine(
  socket: RealtimeSocket,
  message: Record<string, unknown>,
): Promise<Float32Array[]> {
  const start = socket.received.length;
  const ended = () => socket.received.slice(start).some((r) => r.message?.type === "speech_end");
  socket.send({ type: "speak", ...message });
  await socket.waitFor(ended);
  const slice = socket.received.slice(start);
  const end = slice.findIndex((r) => r.message?.type === "speech_end");
  return slice.slice(0, end).flatMap((r) => (r.audio ? [r.audio] : []));
}

/** Frames joined into one clip. */
export const joinFrames = (frames: readonly Float32Array[]): Float32Array =>
  Float32Array.from(frames.flatMap((f) => Array.from(f)));
