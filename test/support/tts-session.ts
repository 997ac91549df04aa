import { createSession, RealtimeSocket } from "../../src/cli/recording-socket.js";
import { API_KEY } from "./env.js";

/** A `mode=tts` session, once both ready frames are in. */
export async function openTtsSession(
  baseUrl: string,
  params: Record<string, string> = {},
): Promise<RealtimeSocket> {
  const session = await createSession(baseUrl, API_KEY, { mode: "tts", ...params });
  const socket = await RealtimeSocket.connect(session.ws_url);
  await socket.waitFor((m) => m.type === "ready" && m.mode === "tts");
  return socket;
}

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
