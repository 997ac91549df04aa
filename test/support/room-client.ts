import { HttpError, RealtimeSocket } from "../../src/cli/recording-socket.js";
import type { TestServer } from "./server.js";

/**
 * Client side of rooms: `POST /api/beta1/session`, extra participants, and joining the embedded
 * room server (its frames are those of the real-time WebSocket, so `RealtimeSocket` reads them).
 */

export interface RoomSessionRequest {
  readonly source_language: string;
  readonly target_language: string;
  readonly voice_type?: "clone" | "female" | "male";
  readonly context?: string;
}

export interface RoomSession {
  readonly url: string;
  readonly token: string;
  readonly room_name: string;
}

async function post<T>(baseUrl: string, path: string, apiKey: string, body: unknown): Promise<T> {
  const response = await fetch(new URL(path, baseUrl), {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const parsed: unknown = await response.json().catch(() => undefined);
  if (!response.ok) throw new HttpError(response.status, parsed);
  return parsed as T;
}

export function createRoomSession(
  baseUrl: string,
  apiKey: string,
  request: RoomSessionRequest,
): Promise<RoomSession> {
  return post(baseUrl, "/api/beta1/session", apiKey, request);
}

/** A token for one more participant of a room this API key created. */
export function addRoomParticipant(
  baseUrl: string,
  apiKey: string,
  roomName: string,
): Promise<RoomSession & { readonly identity: string }> {
  return post(baseUrl, `/api/beta1/session/${encodeURIComponent(roomName)}/participants`, apiKey, {});
}

/** Joins an embedded room (`url?access_token=token`); resolves once the server confirmed the join. */
export async function joinRoom(access: { url: string; token: string }): Promise<RealtimeSocket> {
  const url = new URL(access.url);
  url.searchParams.set("access_token", access.token);
  const socket = await RealtimeSocket.connect(url.toString());
  await socket.waitFor((message) => message.type === "joined", 10_000);
  return socket;
}

/**
 * Streams a recording into a room (3× real time) with 1.5 s of silence after it so its last
 * utterance ends (rooms have no `finalize`), and waits for the translated final of the utterance
 * that ends within 4 s of the recording's end. Speech follows it: assert on speech with
 * `expect.poll` (rooms have no `finalized`).
 */
export async function playToRoomTranslation(socket: RealtimeSocket, pcm: Int16Array): Promise<void> {
  const padded = new Int16Array(pcm.length + 24_000);
  padded.set(pcm);
  await socket.stream(padded, { chunkMs: 20, speed: 3 });
  const endMs = pcm.length / 16;
  const last = await socket.waitFor(
    (m) => m.type === "original_transcript" && m.is_final === true && (m.end_ms as number) > endMs - 4000,
    300_000,
  );
  await socket.waitFor(
    (m) =>
      m.type === "translated_transcript" && m.is_final === true && m.correlation_id === last.correlation_id,
    300_000,
  );
}

/** The secret the embedded room server signs its tokens with, to verify or forge them. */
export function embeddedRoomSecret(server: TestServer): string {
  const backend = server.config.rooms.backend;
  if (backend.kind !== "embedded") throw new Error("test expects the embedded room server");
  return backend.secret;
}
