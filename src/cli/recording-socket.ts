import WebSocket from "ws";
import { HttpError } from "@relay-translate/client";
import { request } from "./network.js";

/**
 * The CLI's session socket: it records every message and frame of the session, with arrival
 * times, for one-shot commands that report on a whole session (and for the tests and benchmarks,
 * which measure it). Applications use the SDK (@relay-translate/client), whose buffer is bounded.
 */

export interface SessionInfo {
  readonly session_id: string;
  readonly ws_url: string;
  readonly expires_in: number;
  readonly model_version_id: string;
}

export { HttpError } from "@relay-translate/client";

/** `GET /v1/session` with the given metadata (every parameter becomes session metadata). */
export async function createSession(
  baseUrl: string,
  apiKey: string,
  params: Record<string, string> = {},
): Promise<SessionInfo> {
  const url = new URL("/v1/session", baseUrl);
  for (const [key, value] of Object.entries(params)) url.searchParams.set(key, value);
  const response = await request(url, { headers: { authorization: `Bearer ${apiKey}` } });
  const body: unknown = await response.json().catch(() => undefined);
  if (!response.ok) throw new HttpError(response.status, body);
  return body as SessionInfo;
}

export type ServerMessage = { readonly type: string; readonly [key: string]: unknown };

export interface Received {
  readonly at: number;
  readonly message?: ServerMessage;
  readonly audio?: Float32Array;
}

/**
 * A text frame as a message; one that is not a relay message (not JSON, no `type`) becomes an
 * `error` saying so, which the commands report as they do the server's own, rather than a crash.
 */
function parseMessage(text: string): ServerMessage {
  try {
    const message = JSON.parse(text) as ServerMessage | null;
    if (typeof message?.type === "string") return message;
  } catch {
    // Reported below.
  }
  const shown = text.length > 80 ? `${text.slice(0, 80)}…` : text;
  return {
    type: "error",
    error: `the server sent a frame that is not a relay message: ${JSON.stringify(shown)}`,
  };
}

export class RealtimeSocket {
  /** Every JSON message and audio frame received, in order, with its arrival time (performance.now()). */
  readonly received: Received[] = [];
  closeCode: number | undefined;
  closeReason = "";
  private readonly waiters = new Set<() => void>();

  private constructor(private readonly ws: WebSocket) {
    ws.on("message", (data, isBinary) => {
      const buffer = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
      const at = performance.now();
      if (isBinary) {
        const aligned = new Float32Array(buffer.byteLength / 4);
        new Uint8Array(aligned.buffer).set(buffer);
        this.received.push({ at, audio: aligned });
      } else {
        this.received.push({ at, message: parseMessage(buffer.toString("utf8")) });
      }
      this.wake();
    });
    ws.on("close", (code, reason) => {
      this.closeCode = code;
      this.closeReason = reason.toString();
      this.wake();
    });
    ws.on("error", () => this.wake());
  }

  /** Opens the socket; rejects with the HTTP status when the handshake is refused. */
  static connect(wsUrl: string): Promise<RealtimeSocket> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(wsUrl);
      const socket = new RealtimeSocket(ws);
      ws.once("open", () => resolve(socket));
      ws.once("unexpected-response", (_request, response) => {
        reject(new HttpError(response.statusCode ?? 0, undefined));
        ws.terminate();
      });
      ws.once("error", reject);
    });
  }

  get messages(): ServerMessage[] {
    return this.received.flatMap((r) => (r.message ? [r.message] : []));
  }

  get audioFrames(): Float32Array[] {
    return this.received.flatMap((r) => (r.audio ? [r.audio] : []));
  }

  get isOpen(): boolean {
    return this.ws.readyState === WebSocket.OPEN;
  }

  sendAudio(pcm: Int16Array): void {
    this.ws.send(Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength), { binary: true });
  }

  sendRaw(data: Buffer | string, binary: boolean): void {
    this.ws.send(data, { binary });
  }

  send(message: Record<string, unknown>): void {
    this.ws.send(JSON.stringify(message));
  }

  finalize(): void {
    this.send({ type: "finalize" });
  }

  /** Streams PCM16 16 kHz audio in `chunkMs` frames, paced at `speed` × real time (Infinity: no pacing). */
  async stream(pcm: Int16Array, { chunkMs = 20, speed = 1 } = {}): Promise<void> {
    const chunk = chunkMs * 16;
    const started = performance.now();
    for (let offset = 0; offset < pcm.length; offset += chunk) {
      if (!this.isOpen) return;
      this.sendAudio(pcm.subarray(offset, Math.min(pcm.length, offset + chunk)));
      const due = started + (offset + chunk) / 16 / speed;
      const wait = due - performance.now();
      if (Number.isFinite(wait) && wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }

  /** Resolves with the first received message matching `predicate` (searching what arrived already). */
  async waitFor(predicate: (message: ServerMessage) => boolean, timeoutMs = 30_000): Promise<ServerMessage> {
    return this.waitUntil(() => this.messages.find(predicate), timeoutMs, true);
  }

  /** Resolves once nothing has arrived for `quietMs` (the server has finished what it was sending). */
  async settle(quietMs = 1000, timeoutMs = 30_000): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const last = this.received.at(-1)?.at ?? 0;
      const quietFor = performance.now() - last;
      if (quietFor >= quietMs || this.closeCode !== undefined) return;
      if (performance.now() > deadline) throw new Error(`still receiving after ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, quietMs - quietFor));
    }
  }

  /** Resolves when the socket has closed, with the close code. */
  async closed(timeoutMs = 30_000): Promise<number> {
    return this.waitUntil(() => this.closeCode, timeoutMs);
  }

  /** Stops reading from the network (the server sees a slow reader) until `resume`. */
  pause(): void {
    this.ws.pause();
  }

  resume(): void {
    this.ws.resume();
  }

  close(code = 1000): void {
    this.ws.close(code);
  }

  terminate(): void {
    this.ws.terminate();
  }

  private wake(): void {
    for (const waiter of this.waiters) waiter();
  }

  private waitUntil<T>(probe: () => T | undefined, timeoutMs: number, failOnClose = false): Promise<T> {
    return new Promise((resolve, reject) => {
      const recent = () => JSON.stringify(this.messages.slice(-5));
      const check = () => {
        const value = probe();
        if (value !== undefined) {
          cleanup();
          resolve(value);
        } else if (failOnClose && this.closeCode !== undefined) {
          cleanup();
          reject(
            new Error(`socket closed (${this.closeCode} ${this.closeReason}); last messages: ${recent()}`),
          );
        }
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(new Error(`timed out after ${timeoutMs} ms; last messages: ${recent()}`));
      }, timeoutMs);
      const cleanup = () => {
        clearTimeout(timer);
        this.waiters.delete(check);
      };
      this.waiters.add(check);
      check();
    });
  }
}
