import { createSession, RealtimeSocket, type ServerMessage } from "../../src/cli/recording-socket.js";
import { API_KEY } from "./env.js";

/**
 * A real-time session on the service at `baseUrl`, its socket open and its `ready` frame in: the
 * one way the integration tests open a session (`ready` as `isReady` recognizes it).
 */
export async function openSession(
  baseUrl: string,
  params: Record<string, string> = {},
  options: { readonly key?: string; readonly isReady?: (message: ServerMessage) => boolean } = {},
): Promise<RealtimeSocket> {
  const session = await createSession(baseUrl, options.key ?? API_KEY, params);
  const socket = await RealtimeSocket.connect(session.ws_url);
  await socket.waitFor(options.isReady ?? ((m) => m.type === "ready"));
  return socket;
}

/**
 * Streams a recording of several utterances (3× real time), finalizes, and waits for the server's
 * `finalized`: every final, translation and speech of the recording has come.
 */
export async function playToLastTranslation(socket: RealtimeSocket, pcm: Int16Array): Promise<void> {
  await socket.stream(pcm, { chunkMs: 20, speed: 3 });
  await finalizeAndWait(socket);
}

/**
 * Sends `finalize` and waits for the `finalized` that answers it: everything sent before is out.
 * What a test asserts after it depends on order only, never on a quiet spell.
 */
export async function finalizeAndWait(socket: RealtimeSocket, timeoutMs = 400_000): Promise<void> {
  const from = socket.messages.length;
  socket.finalize();
  await socket.waitFor((m) => m.type === "finalized" && socket.messages.indexOf(m) >= from, timeoutMs);
}

/**
 * Streams one utterance (4× real time) with a second of silence after it, so that the utterance
 * ends before `finalize`, which follows; resolves at its `finalized` (every result is in).
 */
export async function speakOneUtterance(socket: RealtimeSocket, speech: Int16Array): Promise<void> {
  const audio = new Int16Array(speech.length + 16_000);
  audio.set(speech);
  await socket.stream(audio, { chunkMs: 20, speed: 4 });
  await finalizeAndWait(socket);
}
