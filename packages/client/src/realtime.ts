import type { ClientMessage, ServerMessage } from "./messages.js";
import { requestJson } from "./errors.js";

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

/** Session metadata (the query parameters of GET /v1/session), e.g. `{ sourceLanguage: "en", targetLanguage: "es" }`. */
export type SessionParams = Readonly<Record<string, string | number | boolean>>;

export interface CloseInfo {
  readonly code: number;
  readonly reason: string;
}

const OPEN = 1;

/** `GET /v1/session`: a pre-signed `ws_url`, valid for 60 s. */
export function createSession(options: ClientOptions, params: SessionParams = {}): Promise<SessionInfo> {
  const query = new URLSearchParams(
    Object.entries(params).map(([key, value]): [string, string] => [key, String(value)]),
  );
  return requestJson<SessionInfo>(options.baseUrl, options.apiKey, "GET", `/v1/session?${query}`);
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

  /** Creates a session with `params` and connects to it; resolves once the server is ready. */
  static async open(options: ClientOptions, params: SessionParams = {}): Promise<RealtimeSession> {
    return RealtimeSession.connect((await createSession(options, params)).ws_url, options);
  }

  /** Connects to a `ws_url`; resolves with the session once its `ready` message arrived. */
  static async connect(
    wsUrl: string,
    options: Omit<ClientOptions, "baseUrl"> = {},
  ): Promise<RealtimeSession> {
    const WebSocketClass = await webSocketClass(options as ClientOptions);
    const socket = new WebSocketClass(wsUrl);
    socket.binaryType = "arraybuffer";
    // Frames can arrive together: what follows `ready` before the session exists is kept for it.
    const made: { session?: RealtimeSession } = {};
    const early: unknown[] = [];
    socket.addEventListener("message", (event: { data: unknown }) => {
      if (made.session) made.session.receive(event.data);
      else early.push(event.data);
    });
    const ready = await new Promise<Extract<ServerMessage, { session_id: string }>>((resolve, reject) => {
      socket.addEventListener("message", (event: { data: unknown }) => {
        if (made.session || typeof event.data !== "string") return;
        const message = JSON.parse(event.data) as ServerMessage;
        if (message.type === "ready" && "session_id" in message) resolve(message);
      });
      socket.addEventListener("close", (event: { code: number; reason: string }) =>
        reject(new Error(`the session socket closed before it was ready (${event.code} ${event.reason})`)),
      );
      socket.addEventListener("error", () => reject(new Error(`cannot connect to ${new URL(wsUrl).origin}`)));
    });
    const session = new RealtimeSession(socket, ready, options.maxBufferedMessages ?? 256);
    made.session = session;
    for (const data of early.slice(early.findIndex((data) => typeof data === "string") + 1))
      session.receive(data);
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

  /** Changes session parameters; the server answers with `metadata_ack`. */
  updateMetadata(metadata: Extract<ClientMessage, { type: "update_metadata" }>["metadata"]): void {
    this.send({ type: "update_metadata", metadata });
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
    this.queue.push(JSON.parse(data) as ServerMessage);
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
