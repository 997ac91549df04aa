import type { LanguageCode } from "../core/contracts.js";
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

/** The languages of a room (who hears what: src/rooms/room-languages.ts). */
export interface RoomLanguages {
  /** Every language of the room, 2–4: the spec pair (source first), or the `languages` asked for. */
  readonly languages: readonly LanguageCode[];
  /**
   * Spec rooms: what undeclared participants speak (the source; either side when two-way) and hear
   * (the target). Undefined for rooms created with `languages`, where everyone has a language.
   */
  readonly pair?: {
    readonly source: LanguageCode;
    readonly target: LanguageCode;
    readonly twoWay: boolean;
  };
}

/** Why a room ended, as its participants are told (src/rooms/rooms.ts's `ROOM_ENDINGS`). */
export type RoomEndReason = "owner" | "empty" | "lifetime" | "translator" | "revoked" | "shutdown";

/** A participant as the translator knows them: the language they declared (from their token), if any. */
export interface RoomMember {
  readonly identity: string;
  readonly language?: LanguageCode;
  /** The name they gave when they joined (a meeting's share link), shown to the others. */
  readonly name?: string;
}

/** Where one clip of translated speech goes: its language's track, heard by `listeners` only. */
export interface SpeechOutput {
  readonly language: LanguageCode;
  readonly track: string;
  /** Identities of the participants who hear it (the embedded server sends it to them alone). */
  readonly listeners: readonly string[];
}
/** What the translator hears in a room. Audio is PCM16, 16 kHz mono, per publishing participant. */
export type RoomEvent =
  | {
      readonly type: "participant_joined";
      readonly identity: string;
      readonly language?: LanguageCode;
      readonly name?: string;
    }
  | { readonly type: "participant_left"; readonly identity: string }
  | { readonly type: "audio"; readonly identity: string; readonly pcm: Int16Array };

/** The translator's own presence in a room (the seam between translator and transport). */
export interface RoomConnection {
  /** Ends when the connection is closed (by `leave` or by the room going away). */
  readonly events: AsyncIterable<RoomEvent>;
  /** The (non-translator) participants present when the translator joined. */
  readonly participants: readonly RoomMember[];
  /**
   * Publishes translated speech: float32 24 kHz mono frames, in order per output. Outputs of
   * different languages are independent (one track each).
   */
  publishAudio(samples: Float32Array, output: SpeechOutput): Promise<void>;
  /**
   * Publishes the output's track before its first speech, where outputs are tracks (LiveKit):
   * clients then subscribe as they join, and the first speech is not lost while they subscribe.
   */
  openOutput(output: SpeechOutput): Promise<void>;
  /** Publishes one event (JSON, reliable delivery) to `listeners`, or to every participant. */
  publishData(message: ServerMessage, listeners?: readonly string[]): Promise<void>;
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
  /** Creates the room (idempotent per name); a participant may declare one of its languages. */
  createRoom(roomName: string, room: RoomLanguages): Promise<void>;
  /**
   * A client's credentials for a room that exists (no call to a room service); `language`: the
   * language the participant speaks and hears, carried by the token.
   */
  clientAccess(roomName: string, client: RoomMember, publicBaseUrl: string): Promise<RoomAccess>;
  /** Joins the room as its translator; `speaks: false` (default true): it publishes transcripts only. */
  joinAsTranslator(roomName: string, options?: { readonly speaks: boolean }): Promise<RoomConnection>;
  /** Removes the room and disconnects everyone still in it. */
  deleteRoom(roomName: string): Promise<void>;
  close(): Promise<void>;
}
