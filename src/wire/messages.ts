import type * as sdk from "@relay-translate/client";
import { z } from "zod";

/**
 * The JSON messages of the real-time WebSocket and of embedded rooms, as zod schemas. The server
 * builds its messages with these types and `GET /v1/messages.schema.json` publishes them as JSON
 * Schema; the SDK (packages/client, which must not depend on zod or on the server) declares the
 * same types by hand, and the check below fails the build when the two differ.
 */

const timestamp = z.number().describe("Unix seconds (float)");

const transcriptFields = {
  text: z.string().describe("Canonical text (for translated: the translated text)"),
  correlation_id: z.string().describe("Groups an original transcript with its translation"),
  is_final: z.boolean().describe("false may still be revised; true is stable"),
  source_language: z.string().describe('Session language; "auto" when auto-detection is used'),
  target_language: z.string(),
  detected_language: z
    .string()
    .nullable()
    .describe("Language of the utterance; null on the first interims of an auto utterance"),
  timestamp,
  speaker: z.string().optional().describe("relay-2: opaque speaker label (1, 2, ...)"),
  start_ms: z.number().int().optional().describe("relay-2 and rooms: utterance start in the session audio"),
  end_ms: z.number().int().optional(),
  participant: z.string().optional().describe("Rooms: whose speech this is"),
  language: z
    .string()
    .optional()
    .describe(
      "Rooms: the language of `text` (original: heard; translated: the translation's, its listeners')",
    ),
};

export const originalTranscriptMessage = z.object({
  type: z.literal("original_transcript"),
  ...transcriptFields,
});

export const translatedTranscriptMessage = z.object({
  type: z.literal("translated_transcript"),
  ...transcriptFields,
  translated_text: z
    .string()
    .describe(
      "Without any span whose translation failed (an error with this correlation_id precedes the final); may be empty",
    ),
  original_text: z.string().describe("The source-language text that produced it"),
  voiceId: z.string().optional().describe("With voiceId=auto: the voice matched to this speaker"),
});

export const readyMessage = z.union([
  z.object({
    type: z.literal("ready"),
    session_id: z.string(),
    worker_id: z.string().describe("The process serving the session"),
  }),
  z
    .object({ type: z.literal("ready"), mode: z.literal("tts") })
    .describe("Second ready of a mode=tts session"),
]);

export const errorMessage = z.object({
  type: z.literal("error"),
  error: z.string().describe("What went wrong, for a person to read"),
  correlation_id: z.string().optional().describe("The segment or speak the error concerns"),
  participant: z.string().optional().describe("Rooms: whose speech it concerns"),
  timestamp,
});

/** Something a client may want to know that ends nothing (never an `error`: see docs/realtime-api.md). */
const notice = {
  code: z.string().describe('Machine-readable, e.g. "context_terms_ignored"'),
  message: z.string().describe("For a person to read"),
};

export const metadataAckMessage = z.object({
  type: z.literal("metadata_ack"),
  applied: z.record(z.string(), z.literal(true)),
  notices: z
    .array(z.object(notice))
    .optional()
    .describe("What the change applied with a caveat (e.g. context terms past the bound); absent when none"),
});

export const noticeMessage = z
  .object({ type: z.literal("notice"), ...notice, timestamp })
  .describe("Beyond the spec: informs and ends nothing (a spec client ignores the unknown type)");

export const finalizedMessage = z
  .object({ type: z.literal("finalized"), timestamp })
  .describe(
    "Beyond the spec: after a finalize, once everything received before it is out (its finals, translations and speech)",
  );

export const speakAckMessage = z.object({ type: z.literal("speak_ack"), correlation_id: z.string() });

export const speechEndMessage = z.object({ type: z.literal("speech_end") });

/** Embedded rooms only. */
export const joinedMessage = z.object({
  type: z.literal("joined"),
  room_name: z.string(),
  identity: z.string().describe("This participant"),
  participants: z.array(z.string()).describe("Those already in the room"),
  participant_info: z
    .array(
      z.object({
        identity: z.string(),
        language: z.string().optional().describe("The language they declared, when they did"),
        name: z.string().optional().describe("The name they gave when they joined, when they did"),
      }),
    )
    .optional()
    .describe("Those already in the room, with their language and name"),
  language: z
    .string()
    .nullable()
    .optional()
    .describe("The language this participant speaks and hears; null when they declared none (a spec room)"),
  languages: z.array(z.string()).optional().describe("The room's languages"),
  translator: z
    .object({
      identity: z.string().describe("translation-agent, as on LiveKit"),
      audio_track: z
        .string()
        .nullable()
        .describe(
          "The track this participant hears (the float32 binary frames); null when the room has no speech output",
        ),
    })
    .nullable()
    .describe("The room's translator, named as on LiveKit (null if it is not in the room)"),
});

export const participantMessage = z.object({
  type: z.enum(["participant_joined", "participant_left"]),
  identity: z.string(),
  language: z.string().optional().describe("participant_joined: the language they declared, when they did"),
  name: z
    .string()
    .optional()
    .describe("participant_joined: the name they gave when they joined, when they did"),
  timestamp,
});

export const serverMessage = z.union([
  readyMessage,
  originalTranscriptMessage,
  translatedTranscriptMessage,
  errorMessage,
  metadataAckMessage,
  noticeMessage,
  finalizedMessage,
  speakAckMessage,
  speechEndMessage,
  joinedMessage,
  participantMessage,
]);

export const clientMessage = z.discriminatedUnion("type", [
  z.object({ type: z.literal("finalize") }).describe("Commit the current segment now"),
  z
    .object({
      type: z.literal("update_metadata"),
      metadata: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])),
    })
    .describe("Change session parameters; answered by metadata_ack"),
  z
    .object({
      type: z.literal("speak"),
      text: z.string(),
      voiceId: z.union([z.string(), z.number()]).optional(),
      language: z.string().optional(),
      correlation_id: z.string().optional(),
    })
    .describe("mode=tts: synthesize a line of text"),
]);

export type OriginalTranscriptMessage = z.infer<typeof originalTranscriptMessage>;
export type TranslatedTranscriptMessage = z.infer<typeof translatedTranscriptMessage>;
export type TranscriptMessage = OriginalTranscriptMessage | TranslatedTranscriptMessage;
export type ErrorMessage = z.infer<typeof errorMessage>;
export type ServerMessage = z.infer<typeof serverMessage>;
export type ClientMessage = z.infer<typeof clientMessage>;

/** true only when A and B are the same type (optional fields and all), not merely assignable. */
type Identical<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
type Holds<Check extends true> = Check;
/** Compile-time only (an error here): the SDK's declared messages are exactly those of these schemas. */
export type SdkMessagesMatch = Holds<
  Identical<[ServerMessage, ClientMessage], [sdk.ServerMessage, sdk.ClientMessage]>
>;

/** Both directions as one JSON Schema document (draft 2020-12). */
export function messagesJsonSchema(): Record<string, unknown> {
  return {
    $schema: "https://json-schema.org/draft/2020-12/schema",
    title: "relay real-time WebSocket messages",
    description:
      "JSON text frames of the session WebSocket (and of embedded rooms). Binary frames carry audio: " +
      "PCM16 LE mono 16 kHz from the client, float32 LE mono 24 kHz from the server.",
    $defs: {
      ServerMessage: z.toJSONSchema(serverMessage, { target: "draft-2020-12", unrepresentable: "any" }),
      ClientMessage: z.toJSONSchema(clientMessage, { target: "draft-2020-12", unrepresentable: "any" }),
    },
  };
}
