/**
 * relay's client SDK, for Node (20+) and browsers: `import { RealtimeSession, DubbingClient } from
 * "@relay-translate/client"`. The message types are those the server builds its messages with (its
 * zod schemas are checked against them).
 */
export { ConnectionError, HttpError, ProtocolError } from "./errors.js";
export {
  createSession,
  MAX_FRAME_BYTES,
  RealtimeSession,
  SessionError,
  type ClientOptions,
  type CloseInfo,
  type SessionInfo,
  type SessionParams,
  type WebSocketConstructor,
  type WebSocketLike,
} from "./realtime.js";
export {
  contentTypeFor,
  DubbingClient,
  storageErrorBody,
  UPLOAD_CONTENT_TYPES,
  type JobRequest,
  type JobState,
  type JobStatus,
  type UploadBody,
  type UploadGrant,
} from "./dubbing.js";
export {
  INPUT_SAMPLE_RATE,
  MAX_SPEAK_CHARACTERS,
  MAX_WAITING_SPEAKS,
  OUTPUT_FRAME_SAMPLES,
  OUTPUT_SAMPLE_RATE,
} from "./protocol.js";
export { speakableLines } from "./speak-lines.js";
export type {
  ClientMessage,
  ErrorMessage,
  JoinedMessage,
  MetadataAckMessage,
  Notice,
  NoticeMessage,
  FinalizedMessage,
  OriginalTranscriptMessage,
  ParticipantMessage,
  ReadyMessage,
  ServerMessage,
  SpeakAckMessage,
  SpeechEndMessage,
  TranscriptMessage,
  TranslatedTranscriptMessage,
} from "./messages.js";
