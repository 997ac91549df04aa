import type { ClientMessage, ServerMessage } from "./messages.js";
import { ConnectionError, requestJson, shownUrl } from "./errors.js";

/**
 * The real-time interface for applications, in Node (20+) and browsers: create a session, open its
 * socket, send PCM16 audio, iterate over the server's messages (typed, bounded), hear the
 * translated speech through `onAudio`, and send `finalize`, `update_metadata` and `speak`.
 */

export interface SessionInfo {
  readonly session_id: string;
  readonly ws_url: string;
  readonly expires_in: number;
  readonly model_version_id: string;
}

/** The parts of the WebSocket API this client uses: browsers', Node 22's, or the `ws` package's. */
export interface WebSocketLike {
  binaryType: string;
  readonly readyState: number;
  send(data: string | ArrayBufferLike | ArrayBufferView): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: "open" | "message" | "close" | "error", listener: (event: never) => void): void;
}
export type WebSocketConstructor = new (url: string) => WebSocketLike;

export interface ClientOptions {
  /** The service, e.g. `https://translate.example.com`. */
  readonly baseUrl: string;
  readonly apiKey?: string;
  /** A WebSocket implementation; by default the platform's, or the `ws` package on Node 20. */
  readonly WebSocket?: WebSocketConstructor;
  /**
   * Messages kept until read (default 256). Beyond it the oldest interim transcripts are dropped
   * first, then the oldest messages of any kind; `dropped` counts them.
   */
  readonly maxBufferedMessages?: number;
}

/**
 * Session metadata: the query parameters of `GET /v1/session`, each optional (the server's default
 * in brackets), e.g. `{ sourceLanguage: "en", targetLanguage: "es" }`. Combinations the service
 * cannot serve are refused when the session starts: `open()` rejects with a SessionError.
 */
export interface SessionParams {
  /** ISO 639-1 code of the speech (a regional tag counts by its language) [en], or "auto" (relay-2): detected per utterance. */
  readonly sourceLanguage?: string;
  /** With `sourceLanguage: "auto"`: the languages listened for (a list, or comma-separated). */
  readonly languageHints?: string | readonly string[];
  /** The language to translate into [es]. */
  readonly targetLanguage?: string;
  /** true: translated speech and transcripts [true]; false: transcripts only. */
  readonly audioOutputEnabled?: boolean;
  /** A voice id of `GET /v1/voices`, or "auto" (relay-2): each speaker gets a voice like theirs. */
  readonly voiceId?: number | `${number}` | "auto";
  /**
   * The default voice's gender when `voiceId` is not set [male]; "clone" (beyond the spec): each
   * speaker in their own voice where the service has a tone colour model, else a library voice like theirs.
   */
  readonly voiceType?: "male" | "female" | "clone";
  /** relay-2 adds speakers, utterance times, `voiceId: "auto"` and `sourceLanguage: "auto"` [relay-1]. */
  readonly modelName?: "relay-1" | "relay-2";
  /** stable: growing finals as words settle [stable]; sentence: one final per sentence. */
  readonly finalizeMode?: "stable" | "sentence";
  /** The two languages are a pair: each utterance goes into the other one [false]. */
  readonly twoWay?: boolean;
  /** Names and jargon to expect, up to 2000 characters. */
  readonly context?: string;
  /** How the translator is told the source language (e.g. a dialect). */
  readonly sourceLanguageLabel?: string;
  /** How the translator is told the target language (a register or persona). */
  readonly targetLanguageLabel?: string;
  /** s2tt: speech in [s2tt]; tts: text in (`speak()`), speech out. */
  readonly mode?: "s2tt" | "tts";
}

export interface CloseInfo {
  readonly code: number;
  readonly reason: string;
}

/**
 * The server ended a session before it started: its message (the `error` frame of a refused
 * session, e.g. a language the configured engines do not serve), or what the close says.
 */
export class SessionError extends Error {
  override readonly name = "SessionError";

  constructor(
    message: string,
    readonly close: CloseInfo,
  ) {
    super(message);
  }
}

const OPEN = 1;

/** The parameters as the wire carries them: set keys only, lists comma-separated. */
function metadataOf(params: SessionParams): Record<string, string | number | boolean> {
  return Object.fromEntries(
    Object.entries(params)
      .filter(([, value]) => value !== undefined)
      .map(([key, value]) => [key, Array.isArray(value) ? value.join(",") : value]),
  ) as Record<string, string | number | boolean>;
}

/** `GET /v1/session`: a pre-signed `ws_url`, valid for 60 s. */
export function createSession(options: ClientOptions, params: SessionParams = {}): Promise<SessionInfo> {
  const query = new URLSearchParams(
    Object.entries(metadataOf(params)).map(([key, value]): [string, string] => [key, String(value)]),
  );
  return requestJson<SessionInfo>(options.baseUrl, options.apiKey, "GET", `/v1/session?${query}`);
}

/** Why a socket failed to connect, from its error event: `ws` gives the network's error, browsers nothing. */
function connectFailure(event: { error?: { code?: unknown; message?: unknown }; message?: unknown }): string {
  const detail = String(event.error?.code ?? event.error?.message ?? event.message ?? "connection failed");
  const status = /Unexpected server response: (\d+)/u.exec(detail)?.[1];
  if (status === "401") return "HTTP 401 (the ws_url is invalid or expired; create a new session)";
  return status ? `HTTP ${status}` : detail;
}

async function webSocketClass(options: ClientOptions): Promise<WebSocketConstructor> {
  if (options.WebSocket) return options.WebSocket;
  const platform = (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
  if (platform) return platform;
  // Node 20 has no WebSocket of its own; the import is never reached in browsers.
  const { WebSocket } = await import("ws");
  return WebSocket as unknown as WebSocketConstructor;
}

export class RealtimeSession implements AsyncIterable<ServerMessage> {
  /** Messages received and not yet read, oldest first. */
  private readonly queue: ServerMessage[] = [];
  private readonly waiting: (() => void)[] = [];
  private closeInfo: CloseInfo | undefined;
  /** Messages dropped because the application read too slowly. */
  dropped = 0;
  /** Called with each frame of translated speech (float32 mono, 24 kHz). */
  onAudio: ((samples: Float32Array<ArrayBuffer>) => void) | undefined;
  /**
   * Called with each message as it arrives, in order with `onAudio` (the iterator is read later, so
   * it cannot tell which audio came before a message, e.g. a `speech_end`). Messages are queued for
   * the iterator as well.
   */
  onMessage: ((message: ServerMessage) => void) | undefined;
  readonly closed: Promise<CloseInfo>;

  private constructor(
    private readonly socket: WebSocketLike,
    /** The first `ready` message: `session_id` and `worker_id`. */
    readonly ready: Extract<ServerMessage, { session_id: string }>,
    private readonly maxBuffered: number,
  ) {
    this.closed = new Promise((resolve) => {
      socket.addEventListener("close", (event: { code: number; reason: string }) => {
        this.closeInfo = { code: event.code, reason: event.reason };
        this.wake();
        resolve(this.closeInfo);
      });
    });
  }

  /**
   * Creates a session with `params` and connects to it; resolves once the server has accepted it,
   * rejects with a SessionError carrying the server's message when it refuses the parameters.
   */
  static async open(options: ClientOptions, params: SessionParams = {}): Promise<RealtimeSession> {
    return RealtimeSession.connect((await createSession(options, params)).ws_url, options);
  }

  /**
   * Connects to a `ws_url`; resolves with the session once the server has accepted it. A refused
   * session sends `ready`, then an `error` frame, then closes; an accepted one sends nothing until
   * asked, so the client asks: an empty `update_metadata`, whose `metadata_ack` (kept from the
   * application) can only come from a session that started.
   */
  static async connect(
    wsUrl: string,
    options: Omit<ClientOptions, "baseUrl"> = {},
  ): Promise<RealtimeSession> {
    const WebSocketClass = await webSocketClass(options as ClientOptions);
    const socket = new WebSocketClass(wsUrl);
    socket.binaryType = "arraybuffer";
    const made: { session?: RealtimeSession } = {};
    // What follows `ready` until the session exists, for it: frames can arrive together.
    const early: unknown[] = [];
    const ready = await new Promise<Extract<ServerMessage, { session_id: string }>>((resolve, reject) => {
      let opened = false;
      let ready: Extract<ServerMessage, { session_id: string }> | undefined;
      let accepted = false;
      let refusal: string | undefined;
      socket.addEventListener("open", () => (opened = true));
      socket.addEventListener("message", (event: { data: unknown }) => {
        if (made.session) return made.session.receive(event.data);
        if (accepted) return void early.push(event.data);
        const message =
          typeof event.data === "string" ? (JSON.parse(event.data) as ServerMessage) : undefined;
        if (message?.type === "error") refusal ??= message.error;
        if (!ready) {
          if (message?.type === "ready" && "session_id" in message) {
            ready = message;
            if (socket.readyState === OPEN)
              socket.send(JSON.stringify({ type: "update_metadata", metadata: {} } satisfies ClientMessage));
          }
          return;
        }
        if (message?.type !== "metadata_ack") return void early.push(event.data);
        accepted = true;
        resolve(ready);
      });
      socket.addEventListener("close", (event: { code: number; reason: string }) => {
        const close = { code: event.code, reason: event.reason };
        const described = `close ${close.code}${close.reason ? ` ${close.reason}` : ""}`;
        reject(new SessionError(refusal ?? `the session closed before it started (${described})`, close));
      });
      socket.addEventListener("error", (event: Parameters<typeof connectFailure>[0]) => {
        if (opened) return; // the close that follows says what happened
        const url = shownUrl(wsUrl);
        reject(
          new ConnectionError(`cannot connect to ${url}: ${connectFailure(event)}`, url, {
            cause: event.error ?? event,
          }),
        );
      });
    });
    const session = new RealtimeSession(socket, ready, options.maxBufferedMessages ?? 256);
    made.session = session;
    for (const data of early) session.receive(data);
    return session;
  }

  get isOpen(): boolean {
    return this.socket.readyState === OPEN;
  }

  /** PCM16 LE mono 16 kHz; 10–40 ms per frame is best. */
  sendAudio(pcm: Int16Array): void {
    if (this.isOpen) this.socket.send(new Uint8Array(pcm.buffer, pcm.byteOffset, pcm.byteLength));
  }

  /** Commits the current segment now (finals follow). */
  finalize(): void {
    this.send({ type: "finalize" });
  }

  /**
   * Changes session parameters; the server answers with `metadata_ack`. A running session changes
   * only some (speech: `context`; tts: `voiceId`, `targetLanguage`); an `error` names the others.
   */
  updateMetadata(metadata: SessionParams): void {
    this.send({ type: "update_metadata", metadata: metadataOf(metadata) });
  }

  /** mode=tts: speaks a line; `speak_ack` (with a correlation id), audio, then `speech_end` follow. */
  speak(
    text: string,
    options: { voiceId?: string | number; language?: string; correlationId?: string } = {},
  ): void {
    this.send({
      type: "speak",
      text,
      ...(options.voiceId !== undefined ? { voiceId: options.voiceId } : {}),
      ...(options.language !== undefined ? { language: options.language } : {}),
      ...(options.correlationId !== undefined ? { correlation_id: options.correlationId } : {}),
    });
  }

  send(message: ClientMessage): void {
    if (this.isOpen) this.socket.send(JSON.stringify(message));
  }

  close(code = 1000, reason = ""): void {
    this.socket.close(code, reason);
  }

  /** The next message, or undefined once the socket closed and everything was read. */
  async next(): Promise<ServerMessage | undefined> {
    for (;;) {
      const message = this.queue.shift();
      if (message) return message;
      if (this.closeInfo) return undefined;
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    }
  }

  /** Every server message in order, until the socket closes. */
  async *[Symbol.asyncIterator](): AsyncIterator<ServerMessage> {
    for (let message = await this.next(); message; message = await this.next()) yield message;
  }

  private receive(data: unknown): void {
    if (typeof data !== "string") {
      // A view (a Node Buffer) may share a larger, pooled buffer at any offset: copy out just its bytes.
      const view = data instanceof ArrayBuffer ? new Uint8Array(data) : (data as ArrayBufferView);
      const samples = new Float32Array(Math.floor(view.byteLength / 4));
      new Uint8Array(samples.buffer).set(new Uint8Array(view.buffer, view.byteOffset, samples.byteLength));
      this.onAudio?.(samples);
      return;
    }
    const message = JSON.parse(data) as ServerMessage;
    this.onMessage?.(message);
    this.queue.push(message);
    if (this.queue.length > this.maxBuffered) {
      const interim = this.queue.findIndex((m) => "is_final" in m && m.is_final === false);
      this.queue.splice(interim >= 0 ? interim : 0, 1);
      this.dropped++;
    }
    this.wake();
  }

  private wake(): void {
    for (const resolve of this.waiting.splice(0)) resolve();
  }
}
