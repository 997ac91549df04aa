/**
 * bzip2 decompression for model archives (unpack.ts): the `bzip2` program where it is installed,
 * otherwise unbzip2-stream's JavaScript decoder driven one block at a time, so that output is only
 * produced as fast as it is consumed (its own stream wrapper decodes every block it has input for in
 * one loop: a small archive of highly compressible blocks would fill memory before anything could
 * stop it). The decoder's internal files are used, so the package is pinned to one version.
 */
import { spawn } from "node:child_process";
import { createReadStream } from "node:fs";
import { createRequire } from "node:module";
import { findOnPath } from "../../../os/programs.js";

/** The bzip2 data is damaged, truncated, or not bzip2 at all. */
export class CorruptBzip2 extends Error {}

/** The bit reader of unbzip2-stream: `bits(n)` reads n bits, `bits(null)` skips to a byte boundary. */
interface BitReader {
  (count: number | null): number;
  /** Bytes started on so far. */
  bytesRead: number;
}

/** unbzip2-stream's decoder (lib/bzip2.js), one block per call, with CRC checks. */
interface Bzip2Decoder {
  /** Reads a stream header ("BZh1"…"BZh9"): the block size, in 100 kB. */
  header(bits: BitReader): number;
  /** Decodes one block into `write`, returning the running stream CRC, or null at end of stream. */
  decompress(
    bits: BitReader,
    write: (byte: number) => void,
    buffer: Int32Array,
    size: number,
    streamCrc: number,
  ): number | null;
}

const require = createRequire(import.meta.url);
const decoder = require("unbzip2-stream/lib/bzip2.js") as Bzip2Decoder;
const bitIterator = require("unbzip2-stream/lib/bit_iterator.js") as (
  next: () => Buffer | undefined,
) => BitReader;

/**
 * Compressed input kept ahead of the decoder: one block must be wholly in memory before it is
 * decoded (the decoder is synchronous). Encoders keep a block under ~0.93 MB; a crafted one (every
 * symbol at the 20-bit maximum) stays under 2.3 MB, so no valid block is cut short.
 */
const BZIP2_READ_AHEAD = 3 * 1024 * 1024;

/**
 * Decodes bzip2 (one stream or several concatenated, as `bzip2` writes and reads them) block by
 * block, each block's output yielded before the next is decoded. unbzip2-stream's own stream wrapper
 * is not used: it decodes every block it has input for in one synchronous loop, so a few kilobytes of
 * blocks that each expand to 45 MB (the bzip2 maximum) would be materialised all at once, whatever the
 * consumer's limits (measured: a 3 kB archive, 5.6 GB of memory).
 */
/** The archive's tar stream: through `bzip2 -dc` where the program is installed, else in JavaScript. */
export async function* decompressed(
  archive: string,
  signal: AbortSignal | undefined,
): AsyncGenerator<Buffer> {
  const program = findOnPath("bzip2");
  if (!program) {
    const input = createReadStream(archive, { highWaterMark: 1024 * 1024 });
    try {
      yield* bunzip2(input, signal);
    } finally {
      input.destroy();
    }
    return;
  }
  const child = spawn(program, ["-dc", archive], { stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  // Its first line says what is wrong ("Data integrity error when decompressing."); advice follows.
  child.stderr.setEncoding("utf8").on("data", (text: string) => (stderr = (stderr + text).slice(0, 500)));
  const exited = new Promise<number | null>((resolve) => child.once("close", (code) => resolve(code)));
  child.once("error", () => undefined);
  try {
    for await (const chunk of child.stdout) yield chunk as Buffer;
    const code = await exited;
    if (code !== 0) throw new CorruptBzip2(stderr.trim().split("\n")[0] || `bzip2 exited with ${code}`);
  } finally {
    // Stopped early (a bound passed, a refusal, cancellation): the program goes too.
    if (child.exitCode === null) child.kill("SIGKILL");
  }
}

async function* bunzip2(
  input: AsyncIterable<Buffer>,
  signal: AbortSignal | undefined,
): AsyncGenerator<Buffer> {
  const chunks: Buffer[] = [];
  let received = 0;
  let ended = false;
  const source = input[Symbol.asyncIterator]();
  // Made once there is input: it takes its first buffer at once.
  let bits: BitReader | undefined;
  const unread = () => received - (bits?.bytesRead ?? 0);
  let work = new Int32Array(0);
  let streamCrc: number | null = null;
  for (;;) {
    signal?.throwIfAborted();
    while (!ended && unread() < BZIP2_READ_AHEAD) {
      const next = await source.next();
      if (next.done) ended = true;
      else if (next.value.length > 0) {
        chunks.push(next.value);
        received += next.value.length;
      }
    }
    if (unread() <= 0) break;
    bits ??= bitIterator(() => chunks.shift());
    const output = new BlockOutput();
    try {
      if (streamCrc === null) {
        const blockSize = decoder.header(bits) * 100_000;
        if (work.length !== blockSize) work = new Int32Array(blockSize);
        streamCrc = 0;
        continue;
      }
      streamCrc = decoder.decompress(bits, output.write, work, work.length, streamCrc);
    } catch (error) {
      throw new CorruptBzip2(bzip2Problem(error), { cause: error });
    }
    // null: the end-of-stream record (its CRC checked); another stream may follow.
    if (output.length > 0) yield output.take();
  }
  if (streamCrc !== null) throw new CorruptBzip2("it ends early");
}

/** What unbzip2-stream's error says, in words for a user (some of its messages are jokes). */
function bzip2Problem(error: unknown): string {
  // The bit reader runs off the end of its input with a TypeError.
  if (error instanceof TypeError) return "it ends early";
  const message = error instanceof Error ? error.message : String(error);
  if (/magic number|not a bzip archive/iu.test(message)) return "no bzip2 header";
  if (/crc/iu.test(message)) return "checksum mismatch: the data is damaged";
  return "the data is damaged";
}

/** A block's output, byte by byte, into one buffer (a block decodes to at most ~46.6 MB). */
class BlockOutput {
  private buffer = Buffer.allocUnsafe(1024 * 1024);
  length = 0;

  readonly write = (byte: number): void => {
    if (this.length === this.buffer.length) {
      const grown = Buffer.allocUnsafe(this.buffer.length * 2);
      this.buffer.copy(grown);
      this.buffer = grown;
    }
    this.buffer[this.length++] = byte;
  };

  take(): Buffer {
    return this.buffer.subarray(0, this.length);
  }
}
