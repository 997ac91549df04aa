/** PCM16 ↔ float conversions used at the edges of the pipeline. */

export function int16ToFloat32(pcm: Int16Array): Float32Array {
  const out = new Float32Array(pcm.length);
  for (let i = 0; i < pcm.length; i++) out[i] = pcm[i]! / 32768;
  return out;
}

/** Views little-endian PCM16 bytes as samples, copying when the buffer is unaligned. */
export function bytesToInt16(bytes: Uint8Array): Int16Array {
  const count = bytes.byteLength >> 1;
  if (bytes.byteOffset % 2 === 0) return new Int16Array(bytes.buffer, bytes.byteOffset, count);
  // A plain Uint8Array copy: `slice` on a Node Buffer would be a view of its whole pool.
  return new Int16Array(Uint8Array.prototype.slice.call(bytes, 0, count * 2).buffer);
}

/** Little-endian float32 bytes of `samples` (the wire format of translated speech). */
export function float32ToBytes(samples: Float32Array): Buffer {
  return Buffer.from(samples.buffer, samples.byteOffset, samples.byteLength);
}

/**
 * Reassembles PCM16 samples from binary frames of any length: a frame ending in half a sample
 * keeps that byte for the start of the next frame, so the stream stays aligned.
 */
export class Pcm16Assembler {
  private carry: number | undefined;

  /** The whole samples available; `misaligned` when this frame did not end on a sample boundary. */
  push(bytes: Uint8Array): { samples: Int16Array; misaligned: boolean } {
    let data = bytes;
    if (this.carry !== undefined) {
      data = new Uint8Array(bytes.length + 1);
      data[0] = this.carry;
      data.set(bytes, 1);
      this.carry = undefined;
    }
    const misaligned = data.length % 2 === 1;
    if (misaligned) {
      this.carry = data[data.length - 1];
      data = data.subarray(0, data.length - 1);
    }
    return { samples: bytesToInt16(data), misaligned };
  }
}

/** The pieces of one signal joined into `out` (as long as all of them). */
function joinInto<T extends Int16Array | Float32Array>(out: T, pieces: readonly T[]): T {
  let offset = 0;
  for (const piece of pieces) {
    out.set(piece, offset);
    offset += piece.length;
  }
  return out;
}

const lengthOf = (pieces: readonly ArrayLike<number>[]) =>
  pieces.reduce((sum, piece) => sum + piece.length, 0);

/** PCM16 pieces of one signal joined into one array. */
export function concatPcm(pieces: readonly Int16Array[]): Int16Array {
  return joinInto(new Int16Array(lengthOf(pieces)), pieces);
}

/** Float pieces of one signal joined into one array. */
export function concatFloat32(pieces: readonly Float32Array[]): Float32Array {
  return joinInto(new Float32Array(lengthOf(pieces)), pieces);
}
