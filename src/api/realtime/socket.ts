// The protocol's bounds on `speak` live in the SDK, so clients keep to the same numbers. The
// waiting bound means a client flooding speaks cannot grow the process without bound.
import { MAX_SPEAK_CHARACTERS, MAX_WAITING_SPEAKS } from "@relay-translate/client/protocol";
import type { FastifyBaseLogger } from "fastify";
import { ignoredTermsNotice } from "../../core/glossary.js";
import type { RawData, WebSocket } from "ws";
import type { EngineRegistry } from "../../engines/routing/registry.js";
import type { LanguageCode, Voice } from "../../core/contracts.js";
import { languagePlan } from "../../pipeline/language-plan.js";
import { createLivePipeline } from "../../pipeline/session-pipeline.js";
import { renderSpeech, type SpeechRequest } from "../../pipeline/speech-output.js";
import type {
  PipelineEvent,
  PipelineObserver,
  TranslationPipeline,
} from "../../pipeline/translation-pipeline.js";
import { Pcm16Input, SocketWire, toBuffer } from "../../wire/socket-wire.js";
import { transcriptMessage } from "../../wire/transcript-message.js";
import {
  checkContext,
  characterCount,
  checkVoiceOutput,
  planSession,
  primaryLanguage,
  resolveVoice,
  validationMessage,
  type SessionPlan,
} from "./session-params.js";
import { CLOSE_CODES } from "../../sessions/capacity.js";
import type { ClaimedSession, RealtimeSessions } from "./sessions.js";

/**
 * The WebSocket adapter: translates wire frames to pipeline calls and pipeline events to wire
 * frames. All speech logic lives in the pipeline.
 */

export interface SocketDeps {
  readonly registry: EngineRegistry;
  readonly sessions: RealtimeSessions;
  readonly workerId: string;
  readonly log: FastifyBaseLogger;
  /** The service's metrics: how sessions end, and the pipeline's timings. */
  readonly observer?: SessionObserver;
  /** A session with no audio and no message for `idleMs` is closed (4408); any session after `maxDurationMs` (4409). */
  readonly timeouts: SessionTimeouts;
}

export interface SessionTimeouts {
  readonly idleMs: number;
  readonly maxDurationMs: number;
}

export interface SessionObserver {
  /** `by`: which side closed; `code`: the close code that side sent (any number a client chooses). */
  closed(code: number, by: "server" | "client"): void;
  readonly pipeline: PipelineObserver;
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

export function serveSessionSocket(socket: WebSocket, pending: ClaimedSession, socketDeps: SocketDeps): void {
  // Every log line of the session names it.
  const deps = { ...socketDeps, log: socketDeps.log.child({ session: pending.sessionId }) };
  const { sessions, registry, log } = deps;
  const wire = new SocketWire(socket, () => sessions.audioDropped());
  // ws closes the socket itself when a client breaks the protocol (1009: message too big, ...).
  let protocolCode: number | undefined;
  socket.on("error", (error) => {
    if ((error as { code?: string }).code?.startsWith("WS_ERR_")) protocolCode = wsStatusCode(error);
  });
  socket.once("close", (code: number) => {
    const serverCode = wire.closeCode ?? protocolCode;
    deps.observer?.closed(serverCode ?? code, serverCode === undefined ? "client" : "server");
  });
  let ended = false;
  const live = {
    id: pending.sessionId,
    accountId: pending.accountId,
    close(code: number, reason: string, message?: string) {
      if (message !== undefined) wire.error(message);
      wire.close(code, reason);
    },
  };
  if (!pending.withinAccountBound) {
    live.close(
      CLOSE_CODES.accountLimit,
      "account session limit reached",
      `this account already has ${sessions.perAccount} live sessions (open session sockets and rooms; ` +
        "the limit); close one of them, then create a new session",
    );
    return;
  }
  if (!sessions.open(live)) {
    sessions.ended(live);
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
  const { idleMs, maxDurationMs } = deps.timeouts;
  // The client's audio and messages count as activity (not pings: client libraries send those by
  // themselves), and so does the server still working for it: results still being sent, audio not
  // yet recognized, a tts session's speaks still being rendered. A loaded server can be more than
  // the idle period behind a client that sent its audio and now waits for the results.
  let activity = 0;
  const idle = setTimeout(function closeIfIdle() {
    const seen = activity;
    // Decided after the I/O phase: what a client sent while the process was busy is read first.
    setImmediate(() => {
      if (activity !== seen) return;
      if (handler.busy) return void idle.refresh();
      live.close(
        CLOSE_CODES.idle,
        "idle",
        `no audio and no message for ${idleMs / 1000} s; the session is closed (create a new one to continue)`,
      );
    });
  }, idleMs);
  const maxDuration = setTimeout(
    () =>
      live.close(
        CLOSE_CODES.maxDuration,
        "maximum session length",
        `the session reached its maximum length of ${maxDurationMs / 1000} s; create a new session to continue`,
      ),
    maxDurationMs,
  );
  const handler =
    plan.mode === "tts"
      ? new TextToSpeechSession(plan, deps, wire, () => idle.refresh(), pending.accountId)
      : new SpeechSession(plan, deps, wire, () => idle.refresh(), pending.accountId);
  if (plan.mode === "tts") wire.send({ type: "ready", mode: "tts" });

  socket.on("message", (data: RawData, isBinary: boolean) => {
    activity++;
    idle.refresh();
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
      log.error({ err: error }, "session failed");
      wire.close(4500, "internal error");
    }
  });

  const finish = () => {
    if (ended) return;
    ended = true;
    clearTimeout(idle);
    clearTimeout(maxDuration);
    sessions.ended(live);
    void handler.close();
  };
  socket.on("close", finish);
  socket.on("error", (error) => {
    log.debug({ err: error, session: pending.sessionId }, "session socket error");
    finish();
  });
}

/**
 * The close code ws sent for a protocol violation: ws keeps it on the error under its
 * `status-code` symbol; 1002 (protocol error) if that ever changes.
 */
function wsStatusCode(error: Error): number {
  const symbol = Object.getOwnPropertySymbols(error).find((key) => key.description === "status-code");
  const code = symbol && (error as unknown as Record<symbol, unknown>)[symbol];
  return typeof code === "number" ? code : 1002;
}

interface ModeHandler {
  /** Work the client is waiting for without sending anything (audio not yet recognized, speaks): not idle. */
  readonly busy: boolean;
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

function acknowledge(
  wire: SocketWire,
  applied: string[],
  refused: string[],
  mode: string,
  live: string[],
  notices: { code: string; message: string }[] = [],
): void {
  wire.send({
    type: "metadata_ack",
    applied: Object.fromEntries(applied.map((key) => [key, true])),
    ...(notices.length > 0 ? { notices } : {}),
  });
  if (refused.length > 0) {
    wire.error(
      `not applied: ${refused.join(", ")}; a running ${mode} session can change only ${live.join(", ")} ` +
        "(to change others, finalize, close and create a new session)",
    );
  }
}

class SpeechSession implements ModeHandler {
  private readonly pipeline: TranslationPipeline;
  private readonly input: Pcm16Input;

  private readonly log: FastifyBaseLogger;

  constructor(
    private readonly plan: SessionPlan,
    deps: SocketDeps,
    private readonly wire: SocketWire,
    /** Told when a result is sent: the idle period starts again. */
    private readonly onResult: () => void,
    account: string,
  ) {
    this.log = deps.log;
    this.input = new Pcm16Input((warning) => wire.error(warning));
    this.pipeline = createLivePipeline(deps.registry, {
      plan: languagePlan({
        sourceLanguage: plan.sourceLanguage,
        targetLanguage: plan.targetLanguage,
        ...(plan.languageHints ? { languageHints: plan.languageHints } : {}),
        twoWay: plan.twoWay,
        sourceLanguageLabel: plan.sourceLanguageLabel,
        targetLanguageLabel: plan.targetLanguageLabel,
      }),
      finalizeMode: plan.finalizeMode,
      pace: plan.pace,
      context: plan.context,
      voice: plan.audioOutputEnabled
        ? plan.cloneVoices
          ? "clone"
          : plan.matchVoices
            ? { auto: plan.voice }
            : plan.voice
        : undefined,
      labelSpeakers: plan.modelName === "relay-2",
      ...(deps.observer ? { observer: deps.observer.pipeline } : {}),
      account,
    });
    // A notice, never an `error`: right after `ready`, an error means the session was refused.
    if (this.pipeline.ignoredTerms > 0)
      wire.send({
        type: "notice",
        ...ignoredTermsNotice(this.pipeline.ignoredTerms),
        timestamp: Date.now() / 1000,
      });
    void this.forwardEvents();
  }

  get busy(): boolean {
    return this.pipeline.working;
  }

  onAudio(bytes: Buffer): void {
    this.pipeline.pushAudio(this.input.push(bytes));
  }

  onMessage(type: string, message: Record<string, unknown>): void {
    if (type === "finalize") {
      this.pipeline.finalize();
    } else if (type === "update_metadata") {
      const metadata = metadataOf(message);
      if (typeof metadata === "string") return this.wire.error(metadata);
      const applied: string[] = [];
      const refused: string[] = [];
      const notices: { code: string; message: string }[] = [];
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
        const ignored = this.pipeline.setContext(value as string);
        if (ignored > 0) notices.push(ignoredTermsNotice(ignored));
        applied.push(key);
      }
      acknowledge(this.wire, applied, refused, "speech", ["context"], notices);
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
    this.onResult();
    if (event.type === "audio") return this.wire.audio(event.samples);
    if (event.type === "finalized")
      return this.wire.send({ type: "finalized", timestamp: Date.now() / 1000 });
    if (event.type === "error") {
      // Logged as well as sent: an operator sees engines failing under sessions.
      this.log[event.fatal ? "error" : "warn"]({ segment: event.segmentId }, `pipeline: ${event.message}`);
      this.wire.error(event.message, event.segmentId);
      if (event.fatal) this.wire.close(4500, "internal error");
      return;
    }
    const { plan } = this;
    this.wire.send(
      transcriptMessage(event, {
        sourceLanguage: plan.sourceLanguage,
        targetLanguage: plan.targetLanguage,
        timings: plan.modelName === "relay-2",
        voiceIds: plan.matchVoices,
      }),
    );
  }
}

class TextToSpeechSession implements ModeHandler {
  private voice: Voice;
  private language: LanguageCode;
  /** `speak` requests are rendered one after another so their audio never interleaves. */
  private queue: Promise<void> = Promise.resolve();
  /** Accepted `speak` requests whose `speech_end` has not been sent yet. */
  private pending = 0;
  private closed = false;
  /** Fired on close: cancels the synthesis running. */
  private readonly cancellation = new AbortController();

  constructor(
    plan: SessionPlan,
    private readonly deps: SocketDeps,
    private readonly wire: SocketWire,
    /** Told when a speak's speech is done: the idle period starts again. */
    private readonly onSpoken: () => void,
    /** Whose session (`SynthesisRequest.account`). */
    private readonly account: string,
  ) {
    this.voice = plan.voice;
    this.language = plan.targetLanguage;
  }

  get busy(): boolean {
    return this.pending > 0;
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
    this.cancellation.abort(new Error("the session was closed"));
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
    if (correlationId !== undefined && typeof correlationId !== "string") {
      return this.wire.error("correlation_id must be a string");
    }
    // Every refusal names the speak it refuses.
    const refuse = (problem: string) => this.wire.error(problem, correlationId);
    if (typeof text !== "string" || text.trim() === "")
      return refuse('speak needs "text": a non-empty string');
    const length = characterCount(text);
    if (length > MAX_SPEAK_CHARACTERS) {
      return refuse(`speak text is ${length} characters long; the limit is ${MAX_SPEAK_CHARACTERS}`);
    }
    // Checked before the voice or language is applied: a refused speak changes nothing.
    if (this.pending >= MAX_WAITING_SPEAKS) {
      return refuse(
        `${MAX_WAITING_SPEAKS} speak requests are already waiting; send more after their speech_end`,
      );
    }
    const problem = this.applySticky(voiceId, language);
    if (problem) return refuse(problem);
    const request = { text, language: this.language, voice: this.voice, account: this.account };
    this.pending++;
    this.queue = this.queue.then(async () => {
      if (!this.closed) await this.render(request, correlationId);
      this.pending--;
    });
  }

  /** One `speak`: `speak_ack` (with a correlation_id), its audio frames, then `speech_end`. */
  private async render(request: SpeechRequest, correlationId: string | undefined): Promise<void> {
    if (correlationId !== undefined) this.wire.send({ type: "speak_ack", correlation_id: correlationId });
    try {
      const tts = this.deps.registry.synthesizer(request.language)!;
      // Frames go out as the engine produces them (all at once from engines that do not stream).
      for await (const frame of renderSpeech(tts, request, this.cancellation.signal)) this.wire.audio(frame);
    } catch (error) {
      // A synthesis cancelled by close() did not fail.
      if (!this.closed)
        this.wire.error(`speech synthesis failed: ${(error as Error).message}`, correlationId);
    }
    this.wire.send({ type: "speech_end" });
    this.onSpoken();
  }
}
