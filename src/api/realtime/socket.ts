import type { FastifyBaseLogger } from "fastify";
import type { RawData, WebSocket } from "ws";
import { bytesToInt16, float32ToBytes } from "../../audio/pcm.js";
import { translateAlong, type EngineRegistry } from "../../engines/registry.js";
import type { LanguageCode, Voice } from "../../engines/types.js";
import { renderSpeech } from "../../pipeline/speech-output.js";
import { TranslationPipeline, type PipelineEvent } from "../../pipeline/translation-pipeline.js";
import {
  checkContext,
  checkVoiceOutput,
  planSession,
  primaryLanguage,
  resolveVoice,
  validationMessage,
  type SessionPlan,
} from "./session-params.js";
import type { PendingSession, RealtimeSessions } from "./sessions.js";

/**
 * The WebSocket adapter: translates wire frames to pipeline calls and pipeline events to wire
 * frames. All speech logic lives in the pipeline.
 */

export interface SocketDeps {
  readonly registry: EngineRegistry;
  readonly sessions: RealtimeSessions;
  readonly workerId: string;
  readonly log: FastifyBaseLogger;
}

/** Largest text a `speak` may carry. */
const MAX_SPEAK_CHARS = 5000;
/** While more than this is queued to a slow client, translated-speech frames are dropped. */
const AUDIO_DROP_BUFFERED_BYTES = 1 << 20;
/** A client this far behind on transcripts too is disconnected (1008) rather than buffered without bound. */
const MAX_BUFFERED_BYTES = 8 << 20;

const utf8 = new TextDecoder("utf-8", { fatal: true });

export function serveSessionSocket(socket: WebSocket, pending: PendingSession, deps: SocketDeps): void {
  const { sessions, registry, log } = deps;
  let ended = false;
  const wire = new Wire(socket);
  const live = { close: (code: number, reason: string) => wire.close(code, reason) };
  if (!sessions.open(live)) {
    wire.close(4503, "no capacity on this server; create a new session");
    return;
  }

  wire.send({ type: "ready", session_id: pending.sessionId, worker_id: deps.workerId });
  const planned = planSession(pending.metadata, registry);
  if (!planned.ok) {
    wire.error(planned.message);
    wire.close(1000, "session parameters rejected");
    sessions.ended(live);
    return;
  }
  const plan = planned.plan;
  const handler =
    plan.mode === "tts" ? new TextToSpeechSession(plan, deps, wire) : new SpeechSession(plan, deps, wire);
  if (plan.mode === "tts") wire.send({ type: "ready", mode: "tts" });

  socket.on("message", (data: RawData, isBinary: boolean) => {
    try {
      const bytes = toBuffer(data);
      if (isBinary) {
        handler.onAudio(bytes);
        return;
      }
      let text: string;
      try {
        text = utf8.decode(bytes);
      } catch {
        wire.error("text frame is not valid UTF-8");
        return;
      }
      let message: unknown;
      try {
        message = JSON.parse(text);
      } catch (error) {
        wire.error(`malformed JSON: ${(error as Error).message}`);
        return;
      }
      if (typeof message !== "object" || message === null || Array.isArray(message)) {
        wire.error('a message must be a JSON object with a string "type"');
        return;
      }
      const type = (message as { type?: unknown }).type;
      if (typeof type !== "string") {
        wire.error('a message must be a JSON object with a string "type"');
        return;
      }
      handler.onMessage(type, message as Record<string, unknown>);
    } catch (error) {
      log.error({ err: error, session: pending.sessionId }, "session failed");
      wire.close(4500, "internal error");
    }
  });

  const finish = () => {
    if (ended) return;
    ended = true;
    sessions.ended(live);
    void handler.close();
  };
  socket.on("close", finish);
  socket.on("error", (error) => {
    log.debug({ err: error, session: pending.sessionId }, "session socket error");
    finish();
  });
}

/** Outgoing frames of one socket, with the slow-reader policy applied. */
class Wire {
  constructor(private readonly socket: WebSocket) {}

  send(message: Record<string, unknown>): void {
    const { socket } = this;
    if (socket.readyState !== socket.OPEN) return;
    if (socket.bufferedAmount > MAX_BUFFERED_BYTES) {
      socket.close(1008, "client is not reading; too much data queued");
      return;
    }
    socket.send(JSON.stringify(message));
  }

  error(message: string): void {
    this.send({ type: "error", error: message, timestamp: Date.now() / 1000 });
  }

  close(code: number, reason: string): void {
    if (this.socket.readyState === this.socket.OPEN) this.socket.close(code, reason);
  }

  /** Speech frames are skipped while the client lags (transcripts are never dropped). */
  audio(samples: Float32Array): void {
    const { socket } = this;
    if (socket.readyState !== socket.OPEN || socket.bufferedAmount > AUDIO_DROP_BUFFERED_BYTES) return;
    socket.send(float32ToBytes(samples), { binary: true });
  }
}

interface ModeHandler {
  onAudio(bytes: Buffer): void;
  onMessage(type: string, message: Record<string, unknown>): void;
  close(): Promise<void>;
}

function metadataOf(message: Record<string, unknown>): Record<string, unknown> | string {
  const metadata = message.metadata;
  if (typeof metadata !== "object" || metadata === null || Array.isArray(metadata)) {
    return 'update_metadata needs "metadata": an object of keys and values';
  }
  return metadata as Record<string, unknown>;
}

function acknowledge(wire: Wire, applied: string[], refused: string[], mode: string, live: string[]): void {
  wire.send({ type: "metadata_ack", applied: Object.fromEntries(applied.map((key) => [key, true])) });
  if (refused.length > 0) {
    wire.error(
      `not applied: ${refused.join(", ")}; a running ${mode} session can change only ${live.join(", ")} ` +
        "(to change others, finalize, close and create a new session)",
    );
  }
}

class SpeechSession implements ModeHandler {
  private readonly pipeline: TranslationPipeline;
  private oddByte: number | undefined;
  private warnedOdd = false;

  constructor(
    private readonly plan: SessionPlan,
    deps: SocketDeps,
    private readonly wire: Wire,
  ) {
    const { registry } = deps;
    const route = registry.translationRoute(plan.sourceLanguage, plan.targetLanguage)!;
    const tts = plan.audioOutputEnabled ? registry.synthesizer(plan.targetLanguage) : undefined;
    this.pipeline = new TranslationPipeline({
      vad: registry.vad,
      asr: registry.recognizer(plan.sourceLanguage)!,
      sourceLanguage: plan.sourceLanguage,
      translate: (text, context) => translateAlong(route, text, context),
      speak: tts
        ? (text) => renderSpeech(tts, { text, language: plan.targetLanguage, voice: plan.voice })
        : undefined,
      finalizeMode: plan.finalizeMode,
      context: plan.context,
    });
    void this.forwardEvents();
  }

  onAudio(bytes: Buffer): void {
    let data = bytes;
    if (this.oddByte !== undefined) {
      data = Buffer.concat([Buffer.of(this.oddByte), bytes]);
      this.oddByte = undefined;
    }
    if (data.length % 2 === 1) {
      // Keep the stream aligned: the stray byte is the first half of the next frame's first sample.
      this.oddByte = data[data.length - 1];
      data = data.subarray(0, data.length - 1);
      if (!this.warnedOdd) {
        this.warnedOdd = true;
        this.wire.error(
          `audio frame of ${bytes.length} bytes is not a whole number of PCM16 samples; ` +
            "the odd byte is carried into the next frame (send whole 2-byte samples)",
        );
      }
    }
    this.pipeline.pushAudio(bytesToInt16(new Uint8Array(data.buffer, data.byteOffset, data.byteLength)));
  }

  onMessage(type: string, message: Record<string, unknown>): void {
    if (type === "finalize") {
      this.pipeline.finalize();
    } else if (type === "update_metadata") {
      const metadata = metadataOf(message);
      if (typeof metadata === "string") return this.wire.error(metadata);
      const applied: string[] = [];
      const refused: string[] = [];
      for (const [key, value] of Object.entries(metadata)) {
        if (key !== "context") {
          refused.push(key);
          continue;
        }
        const problem =
          typeof value !== "string"
            ? "context must be a string"
            : validationMessage(() => checkContext(value));
        if (problem) {
          this.wire.error(problem);
          continue;
        }
        this.pipeline.setContext(value as string);
        applied.push(key);
      }
      acknowledge(this.wire, applied, refused, "speech", ["context"]);
    } else if (type === "speak") {
      this.wire.error("speak is only accepted in mode=tts sessions");
    }
  }

  async close(): Promise<void> {
    await this.pipeline.close();
  }

  private async forwardEvents(): Promise<void> {
    for await (const event of this.pipeline.events) this.forward(event);
  }

  private forward(event: PipelineEvent): void {
    if (event.type === "audio") return this.wire.audio(event.samples);
    if (event.type === "error") {
      this.wire.error(event.message);
      if (event.fatal) this.wire.close(4500, "internal error");
      return;
    }
    const { plan } = this;
    this.wire.send({
      type: event.type === "original" ? "original_transcript" : "translated_transcript",
      text: event.text,
      ...(event.type === "translated"
        ? { translated_text: event.text, original_text: event.originalText }
        : {}),
      correlation_id: event.segmentId,
      is_final: event.isFinal,
      source_language: plan.sourceLanguage,
      target_language: plan.targetLanguage,
      detected_language: plan.sourceLanguage,
      timestamp: Date.now() / 1000,
      ...(plan.modelName === "relay-2" ? { start_ms: event.startMs, end_ms: event.endMs } : {}),
    });
  }
}

class TextToSpeechSession implements ModeHandler {
  private voice: Voice;
  private language: LanguageCode;
  /** `speak` requests are rendered one after another so their audio never interleaves. */
  private queue: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(
    plan: SessionPlan,
    private readonly deps: SocketDeps,
    private readonly wire: Wire,
  ) {
    this.voice = plan.voice;
    this.language = plan.targetLanguage;
  }

  onAudio(): void {
    this.wire.error("binary audio frames are not accepted in a mode=tts session; send speak messages");
  }

  onMessage(type: string, message: Record<string, unknown>): void {
    if (type === "speak") this.speak(message);
    else if (type === "update_metadata") this.updateMetadata(message);
    else if (type === "finalize")
      this.wire.error("finalize applies to speech sessions; this is a mode=tts session");
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.queue;
  }

  private updateMetadata(message: Record<string, unknown>): void {
    const metadata = metadataOf(message);
    if (typeof metadata === "string") return this.wire.error(metadata);
    const applied: string[] = [];
    const refused: string[] = [];
    for (const [key, value] of Object.entries(metadata)) {
      if (key === "voiceId" || key === "targetLanguage") {
        const problem = this.applySticky(
          key === "voiceId" ? value : undefined,
          key === "targetLanguage" ? value : undefined,
        );
        if (problem) this.wire.error(problem);
        else applied.push(key);
      } else {
        refused.push(key);
      }
    }
    acknowledge(this.wire, applied, refused, "tts", ["voiceId", "targetLanguage"]);
  }

  /** Validates and applies a voice and/or language change; returns the problem, if any. */
  private applySticky(voiceId: unknown, language: unknown): string | undefined {
    if (voiceId !== undefined && typeof voiceId !== "string" && typeof voiceId !== "number") {
      return "voiceId must be a string or number";
    }
    if (language !== undefined && typeof language !== "string") return "language must be a string";
    let voice = this.voice;
    let lang = this.language;
    const problem = validationMessage(() => {
      if (voiceId !== undefined) voice = resolveVoice(voiceId as string | number);
      if (language !== undefined) {
        lang = primaryLanguage("language", language as string);
        checkVoiceOutput(this.deps.registry, "language", lang);
      }
    });
    if (problem) return problem;
    this.voice = voice;
    this.language = lang;
    return undefined;
  }

  private speak(message: Record<string, unknown>): void {
    const { text, voiceId, language, correlation_id: correlationId } = message;
    if (typeof text !== "string" || text.trim() === "")
      return this.wire.error('speak needs "text": a non-empty string');
    if (text.length > MAX_SPEAK_CHARS) {
      return this.wire.error(`speak text is ${text.length} characters long; the limit is ${MAX_SPEAK_CHARS}`);
    }
    if (correlationId !== undefined && typeof correlationId !== "string") {
      return this.wire.error("correlation_id must be a string");
    }
    const problem = this.applySticky(voiceId, language);
    if (problem) return this.wire.error(problem);
    const request = { text, language: this.language, voice: this.voice };
    const tts = this.deps.registry.synthesizer(request.language)!;
    this.queue = this.queue.then(async () => {
      if (this.closed) return;
      if (correlationId !== undefined) this.wire.send({ type: "speak_ack", correlation_id: correlationId });
      try {
        for (const frame of await renderSpeech(tts, request)) this.wire.audio(frame);
      } catch (error) {
        this.wire.error(`speech synthesis failed: ${(error as Error).message}`);
      }
      this.wire.send({ type: "speech_end" });
    });
  }
}

function toBuffer(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}
