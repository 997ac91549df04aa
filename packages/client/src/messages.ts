/**
 * The JSON messages of the real-time WebSocket and of embedded rooms. The server's zod schemas
 * (which it publishes as `GET /v1/messages.schema.json`) are checked at compile time to describe
 * exactly these types, so the SDK needs neither zod nor the server's code.
 */

interface TranscriptFields {
  /** Canonical text (for translated: the translated text). */
  text: string;
  /** Groups an original transcript with its translation. */
  correlation_id: string;
  /** false may still be revised; true is stable. */
  is_final: boolean;
  /** Session language; "auto" when auto-detection is used. */
  source_language: string;
  target_language: string;
  /** Language of the utterance; null on the first interims of an auto utterance. */
  detected_language: string | null;
  /** Unix seconds (float). */
  timestamp: number;
  /** relay-2: opaque speaker label (1, 2, ...). */
  speaker?: string;
  /** relay-2 and rooms: utterance start in the session audio. */
  start_ms?: number;
  end_ms?: number;
  /** Rooms: whose speech this is. */
  participant?: string;
  /** Rooms: the language of `text` (original: heard; translated: the translation's, its listeners'). */
  language?: string;
}

export interface OriginalTranscriptMessage extends TranscriptFields {
  type: "original_transcript";
}

export interface TranslatedTranscriptMessage extends TranscriptFields {
  type: "translated_transcript";
  /** Without any span whose translation failed (an error with this correlation_id precedes the final); may be empty. */
  translated_text: string;
  /** The source-language text that produced it. */
  original_text: string;
  /** With voiceId=auto: the voice matched to this speaker. */
  voiceId?: string;
}

export type TranscriptMessage = OriginalTranscriptMessage | TranslatedTranscriptMessage;

export type ReadyMessage =
  | {
      type: "ready";
      session_id: string;
      /** The process serving the session. */
      worker_id: string;
    }
  /** Second ready of a mode=tts session. */
  | { type: "ready"; mode: "tts" };

export interface ErrorMessage {
  type: "error";
  /** What went wrong, for a person to read. */
  error: string;
  /** The segment or speak the error concerns. */
  correlation_id?: string;
  /** Rooms: whose speech it concerns. */
  participant?: string;
  timestamp: number;
}

/** Something a client may want to know that ends nothing. */
export interface Notice {
  /** Machine-readable, e.g. "context_terms_ignored". */
  code: string;
  /** For a person to read. */
  message: string;
}

export interface MetadataAckMessage {
  type: "metadata_ack";
  applied: Record<string, true>;
  /** What the change applied with a caveat (e.g. context terms past the bound); absent when none. */
  notices?: Notice[];
}

/** Beyond the spec: informs and ends nothing (a spec client ignores the unknown type). */
export interface NoticeMessage extends Notice {
  type: "notice";
  timestamp: number;
}

/**
 * Beyond the spec: after a `finalize`, once everything received before it is out (its finals,
 * translations and speech). Finalizes within the server's ~300 ms wait for audio in flight get one.
 */
export interface FinalizedMessage {
  type: "finalized";
  timestamp: number;
}

export interface SpeakAckMessage {
  type: "speak_ack";
  correlation_id: string;
}

export interface SpeechEndMessage {
  type: "speech_end";
}

/** Embedded rooms only. */
export interface JoinedMessage {
  type: "joined";
  room_name: string;
  /** This participant. */
  identity: string;
  /** Those already in the room. */
  participants: string[];
  /** Those already in the room, with their language and name. */
  participant_info?: {
    identity: string;
    /** The language they declared, when they did. */
    language?: string;
    /** The name they gave when they joined, when they did. */
    name?: string;
  }[];
  /** The language this participant speaks and hears; null when they declared none (a spec room). */
  language?: string | null;
  /** The room's languages. */
  languages?: string[];
  /** The room's translator, named as on LiveKit (null if it is not in the room). */
  translator: {
    /** translation-agent, as on LiveKit. */
    identity: string;
    /** The track this participant hears (the float32 binary frames); null when the room has no speech output. */
    audio_track: string | null;
  } | null;
}

export interface ParticipantMessage {
  type: "participant_joined" | "participant_left";
  identity: string;
  /** participant_joined: the language they declared, when they did. */
  language?: string;
  /** participant_joined: the name they gave when they joined, when they did. */
  name?: string;
  timestamp: number;
}

export { MAX_SPEAK_CHARACTERS, MAX_WAITING_SPEAKS } from "./protocol.js";

export type ServerMessage =
  | ReadyMessage
  | OriginalTranscriptMessage
  | TranslatedTranscriptMessage
  | ErrorMessage
  | MetadataAckMessage
  | NoticeMessage
  | FinalizedMessage
  | SpeakAckMessage
  | SpeechEndMessage
  | JoinedMessage
  | ParticipantMessage;

export type ClientMessage =
  /** Commit the current segment now. */
  | { type: "finalize" }
  /** Change session parameters; answered by metadata_ack. */
  | { type: "update_metadata"; metadata: Record<string, string | number | boolean> }
  /** mode=tts: synthesize a line of text. */
  | {
      type: "speak";
      text: string;
      voiceId?: string | number;
      language?: string;
      correlation_id?: string;
    };
