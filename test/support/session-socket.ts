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
 * Streams a recording of several utterances (3× real time), finalizes, and waits for the final of
 * the last one (a final ending less than 4 s before `endMs`, or any final from sessions that report
 * no positions) and then that final's translation.
 */
export async function playToLastTranslation(
  socket: RealtimeSocket,
  pcm: Int16Array,
  /** Where the last utterance ends (default: the recording's end). */
  endMs = pcm.length / 16,
): Promise<void> {
  await socket.stream(pcm, { chunkMs: 20, speed: 3 });
  socket.finalize();
  const last = await socket.waitFor(
    (m) =>
      m.type === "original_transcript" &&
      m.is_final === true &&
      (m.end_ms === undefined || (m.end_ms as number) > endMs - 4000),
    150_000,
  );
  await socket.waitFor(
    (m) =>
      m.type === "translated_transcript" && m.is_final === true && m.correlation_id === last.correlation_id,
    150_000,
  );
}

/**
 * Streams one utterance (4× real time) with a second of silence after it, so that the utterance
 * ends before `finalize`, which follows.
 */
export async function speakOneUtterance(socket: RealtimeSocket, speech: Int16Array): Promise<void> {
  const audio = new Int16Array(speech.length + 16_000);
  audio.set(speech);
  await socket.stream(audio, { chunkMs: 20, speed: 4 });
  socket.finalize();
}
