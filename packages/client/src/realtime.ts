import type { ClientMessage, ServerMessage } from "./messages.js";
import { ConnectionError, ProtocolError, requestJson, shownUrl } from "./errors.js";

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

/**
 * The largest frame taken from the service: its biggest are transcripts of a few kB and 80 ms of
 * speech (7.5 kB). A bigger one closes the socket (1009) rather than being held in memory. Set on
 * the `ws` sockets the SDK opens in Node; browsers apply their own bounds.
 */
export const MAX_FRAME_BYTES = 1 << 20;

export interface ClientOptions {
  /** The service, e.g. `https://translate.example.com`. */
  readonly baseUrl: string;
  readonly apiKey?: string;
  /**
   * A WebSocket implementation; by default the `ws` package in Node (its frames bounded by
   * MAX_FRAME_BYTES; Node's own WebSocket takes frames of any size), the platform's elsewhere.
   */
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
  /**
   * Beyond the spec: catch-up [catch-up]: translated speech gets faster (up to `maxSpeedup`) while
   * the listener is behind, so a long turn is heard soon after it ends; natural: never faster.
   */
  readonly pace?: "catch-up" | "natural";
  /** Beyond the spec: the fastest translated speech, times the voice's natural rate, 1–1.6 [1.15]. */
  readonly maxSpeedup?: number;
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

/** The session's socket: the application's WebSocket class, else `ws` in Node, else the platform's. */
async function openSocket(url: string, options: Omit<ClientOptions, "baseUrl">): Promise<WebSocketLike> {
  if (options.WebSocket) return new options.WebSocket(url);
  const platform = (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
  const inNode =
    typeof (globalThis as { process?: { versions?: { node?: unknown } } }).process?.versions?.node ===
    "string";
  if (platform && !inNode) return new platform(url);
  // Browsers never get here: they have a WebSocket and no `process` (bundlers also map `ws` away).
  const { WebSocket } = await import("ws");
  return new WebSocket(url, { maxPayload: MAX_FRAME_BYTES }) as unknown as WebSocketLike;
}

/**
 * Why an open socket failed, where the platform says: `ws` names the frame it refused (browsers
 * give no reason, and the close says the rest).
 */
function brokenProtocol(
  wsUrl: string,
  event: Parameters<typeof connectFailure>[0],
): ProtocolError | undefined {
  const { code, message } = event.error ?? {};
  if (code === "WS_ERR_UNSUPPORTED_MESSAGE_LENGTH")
    return new ProtocolError(
      `${shownUrl(wsUrl)} sent a frame over MAX_FRAME_BYTES (${MAX_FRAME_BYTES} bytes)`,
    );
  return typeof message === "string" ? new ProtocolError(`${shownUrl(wsUrl)}: ${message}`) : undefined;
}

/** Up to this many characters of a bad frame are shown in its ProtocolError. */
const SHOWN_FRAME_CHARACTERS = 80;

/** A text frame as a server message, or the ProtocolError saying what came instead. */
function parseFrame(data: string, wsUrl: string): ServerMessage | ProtocolError {
  let parsed: unknown;
  try {
    parsed = JSON.parse(data);
  } catch {
    // Reported below with the frame's beginning.
  }
  if (typeof (parsed as { type?: unknown } | null)?.type === "string") return parsed as ServerMessage;
  const shown = data.length > SHOWN_FRAME_CHARACTERS ? `${data.slice(0, SHOWN_FRAME_CHARACTERS)}…` : data;
  return new ProtocolError(
    `${shownUrl(wsUrl)} sent a frame that is not a relay message: ${JSON.stringify(shown)}`,
  );
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
  /**
   * Called when the service breaks the protocol on an open session: a frame that is not a relay
   * message (skipped; the session goes on), or one over MAX_FRAME_BYTES (the socket is then closed,
   * with 1009 to the server). Unset, the error is written with `console.warn`: it never ends the
   * process.
   */
  onError: ((error: ProtocolError) => void) | undefined;
  readonly closed: Promise<CloseInfo>;

  private constructor(
    private readonly wsUrl: string,
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
    const socket = await openSocket(wsUrl, options);
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
        const message = typeof event.data === "string" ? parseFrame(event.data, wsUrl) : undefined;
        if (message instanceof ProtocolError) {
          // Not relay speaking: nothing that follows can be trusted (1002: protocol error).
          socket.close(1002, "not a relay message");
          return reject(message);
        }
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
        if (opened) {
          // The close that follows ends the session; `ws` says why first (a frame over MAX_FRAME_BYTES).
          const failure = brokenProtocol(wsUrl, event);
          if (failure && made.session) made.session.report(failure);
          else if (failure) reject(failure);
          return;
        }
        const url = shownUrl(wsUrl);
        reject(
          new ConnectionError(`cannot connect to ${url}: ${connectFailure(event)}`, url, {
            cause: event.error ?? event,
          }),
        );
      });
    });
    const session = new RealtimeSession(wsUrl, socket, ready, options.maxBufferedMessages ?? 256);
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
    const message = parseFrame(data, this.wsUrl);
    if (message instanceof ProtocolError) return this.report(message);
    this.onMessage?.(message);
    this.queue.push(message);
    if (this.queue.length > this.maxBuffered) {
      const interim = this.queue.findIndex((m) => "is_final" in m && m.is_final === false);
      this.queue.splice(interim >= 0 ? interim : 0, 1);
      this.dropped++;
    }
    this.wake();
  }

  private report(error: ProtocolError): void {
    if (this.onError) this.onError(error);
    else console.warn(`relay: ${error.message}`);
  }

  private wake(): void {
    for (const resolve of this.waiting.splice(0)) resolve();
  }
}
