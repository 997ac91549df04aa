import type { LanguageCode } from "../core/contracts.js";
import type { PipelineEvent } from "../pipeline/translation-pipeline.js";
import type { TranscriptMessage } from "./messages.js";

export type TranscriptEvent = Extract<PipelineEvent, { type: "original" | "translated" }>;

export interface TranscriptLanguages {
  /** "auto" is echoed as the spec says; `detected_language` then carries what was heard. */
  readonly sourceLanguage: LanguageCode | "auto";
  readonly targetLanguage: LanguageCode;
  /** Whether `start_ms` / `end_ms` are sent (relay-2 sessions and rooms). */
  readonly timings: boolean;
  /** Whether a matched voice is reported as `voiceId` (sessions with `voiceId=auto`). */
  readonly voiceIds?: boolean;
}

/**
 * The `original_transcript` / `translated_transcript` message of the real-time interface. WebSocket
 * sessions and rooms (embedded and LiveKit) send exactly this shape.
 */
export function transcriptMessage(event: TranscriptEvent, session: TranscriptLanguages): TranscriptMessage {
  const fields = {
    text: event.text,
    correlation_id: event.segmentId,
    is_final: event.isFinal,
    source_language: session.sourceLanguage,
    target_language: session.targetLanguage,
    // null on the first interims of an "auto" utterance, before its language is identified.
    detected_language: event.language ?? null,
    timestamp: Date.now() / 1000,
    ...(session.timings ? { start_ms: event.startMs, end_ms: event.endMs } : {}),
    // relay-2 only (the pipeline labels speakers only there); omitted while unknown.
    ...(event.speaker !== undefined ? { speaker: event.speaker } : {}),
  };
  if (event.type === "original") return { type: "original_transcript", ...fields };
  return {
    type: "translated_transcript",
    ...fields,
    translated_text: event.text,
    original_text: event.originalText,
    ...(session.voiceIds && event.voiceId !== undefined ? { voiceId: String(event.voiceId) } : {}),
  };
}
