import type { RawData, WebSocket } from "ws";
import { float32ToBytes, Pcm16Assembler } from "../audio/pcm.js";
import { errorFrame } from "./error-frame.js";
import type { ServerMessage } from "./messages.js";

/** While more than this is queued to a slow client, translated-speech frames are dropped. */
const AUDIO_DROP_BUFFERED_BYTES = 1 << 20;
/** A client this far behind on transcripts too is disconnected (1008) rather than buffered without bound. */
const MAX_BUFFERED_BYTES = 8 << 20;

/**
 * Outgoing frames of one client socket (session or room participant), with the slow-reader policy
 * applied: speech is dropped first, transcripts never, and a client that stops reading is closed.
 */
export class SocketWire {
  /** The code this side closed the socket with, once it did (undefined: open, or closed by the client). */
  closeCode: number | undefined;

  /** `onAudioDropped`: told of each speech frame skipped (for counting). */
  constructor(
    private readonly socket: WebSocket,
    private readonly onAudioDropped: () => void = () => undefined,
  ) {}

  send(message: ServerMessage): void {
    const { socket } = this;
    if (socket.readyState !== socket.OPEN) return;
    if (socket.bufferedAmount > MAX_BUFFERED_BYTES) {
      this.close(1008, "client is not reading; too much data queued");
      return;
    }
    socket.send(JSON.stringify(message));
  }

  /** `correlationId`: the segment or `speak` the error concerns, sent as `correlation_id`. */
  error(message: string, correlationId?: string): void {
    this.send(errorFrame(message, { correlationId }));
  }

  close(code: number, reason: string): void {
    if (this.socket.readyState !== this.socket.OPEN) return;
    this.closeCode = code;
    this.socket.close(code, reason);
  }

  /** Speech frames are skipped while the client lags (transcripts are never dropped). */
  audio(samples: Float32Array): void {
    this.binary(float32ToBytes(samples));
  }

  /** A frame as another process sent it (a forwarded connection): speech if binary, else a message. */
  forwarded(data: Buffer, isBinary: boolean): void {
    if (isBinary) {
      this.binary(data);
      return;
    }
    const { socket } = this;
    if (socket.readyState !== socket.OPEN) return;
    if (socket.bufferedAmount > MAX_BUFFERED_BYTES)
      this.close(1008, "client is not reading; too much data queued");
    else socket.send(data, { binary: false });
  }

  private binary(bytes: Uint8Array): void {
    const { socket } = this;
    if (socket.readyState !== socket.OPEN) return;
    if (socket.bufferedAmount > AUDIO_DROP_BUFFERED_BYTES) {
      this.onAudioDropped();
      return;
    }
    socket.send(bytes, { binary: true });
  }
}

export function toBuffer(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}

/**
 * PCM16 input of one client socket (session or room participant): whole samples from binary frames
 * of any length, and one warning, the first time a frame ends in half a sample.
 */
export class Pcm16Input {
  private readonly assembler = new Pcm16Assembler();
  private warned = false;

  constructor(private readonly warn: (message: string) => void) {}

  push(data: RawData | Uint8Array): Int16Array {
    const bytes = data instanceof Uint8Array ? data : toBuffer(data);
    const { samples, misaligned } = this.assembler.push(bytes);
    if (misaligned && !this.warned) {
      this.warned = true;
      this.warn(misalignedAudioMessage(bytes.length));
    }
    return samples;
  }
}

export function misalignedAudioMessage(frameBytes: number): string {
  return (
    `audio frame of ${frameBytes} bytes is not a whole number of PCM16 samples; ` +
    "the odd byte is carried into the next frame (send whole 2-byte samples)"
  );
}
