import type { ServerMessage } from "../wire/messages.js";
/**
 * Rooms: a media room with a translator participant in it. Two back-ends implement the same
 * interfaces — the embedded room server (default) and LiveKit — and the translator only ever
 * talks to a `RoomConnection`, so its behavior is the same on both.
 */

/**
 * Identity of the translator participant in every room, and the name of the audio track it speaks
 * on: the names Pinch's own clients (pinch-sdk, Pipecat's Pinch service) look for.
 */
export const TRANSLATOR_IDENTITY = "translation-agent";
export const TRANSLATION_TRACK_NAME = "translated-audio";

/** What the translator hears in a room. Audio is PCM16, 16 kHz mono, per publishing participant. */
export type RoomEvent =
  | { readonly type: "participant_joined"; readonly identity: string }
  | { readonly type: "participant_left"; readonly identity: string }
  | { readonly type: "audio"; readonly identity: string; readonly pcm: Int16Array };

/** The translator's own presence in a room (the seam between translator and transport). */
export interface RoomConnection {
  /** Ends when the connection is closed (by `leave` or by the room going away). */
  readonly events: AsyncIterable<RoomEvent>;
  /** Identities of the (non-translator) participants present when the translator joined. */
  readonly participants: readonly string[];
  /** Publishes translated speech: float32 24 kHz mono frames, in order. */
  publishAudio(samples: Float32Array): Promise<void>;
  /** Publishes one transcript event (JSON, reliable delivery) to every participant. */
  publishData(message: ServerMessage): Promise<void>;
  leave(): Promise<void>;
}

/** Credentials a client needs to join one room (the `POST /api/beta1/session` response). */
export interface RoomAccess {
  readonly url: string;
  readonly token: string;
}

/** A room back-end: creates rooms, admits clients and lets the translator in. */
export interface RoomBackend {
  readonly kind: "embedded" | "livekit";
  /** Creates the room (idempotent per name). */
  createRoom(roomName: string): Promise<void>;
  /** A client's credentials for a room that exists (no call to a room service). */
  clientAccess(roomName: string, clientIdentity: string, publicBaseUrl: string): Promise<RoomAccess>;
  /** Joins the room as its translator; `speaks: false` (default true): it publishes transcripts only. */
  joinAsTranslator(roomName: string, options?: { readonly speaks: boolean }): Promise<RoomConnection>;
  /** Removes the room and disconnects everyone still in it. */
  deleteRoom(roomName: string): Promise<void>;
  close(): Promise<void>;
}
