import { OUTPUT_FRAME_SAMPLES } from "@relay-translate/client/protocol";

/** Output speech is sent as standalone frames of about 80 ms (1920 samples at 24 kHz): the protocol's. */
export { OUTPUT_FRAME_SAMPLES, OUTPUT_SAMPLE_RATE } from "@relay-translate/client/protocol";

/**
 * Cuts audio arriving in chunks of any length into standalone frames of `frameSamples`: `push`
 * returns the frames completed so far, `flush` the remainder (unpadded) once the audio has ended.
 * Frames are copies (byte offset 0), never views of the chunks.
 */
export class Framer {
  private pending = new Float32Array(0);

  constructor(private readonly frameSamples = OUTPUT_FRAME_SAMPLES) {}

  push(chunk: Float32Array): Float32Array[] {
    let samples = chunk;
    if (this.pending.length > 0) {
      samples = new Float32Array(this.pending.length + chunk.length);
      samples.set(this.pending);
      samples.set(chunk, this.pending.length);
    }
    const frames: Float32Array[] = [];
    let start = 0;
    for (; start + this.frameSamples <= samples.length; start += this.frameSamples) {
      frames.push(samples.slice(start, start + this.frameSamples));
    }
    this.pending = samples.slice(start);
    return frames;
  }

  /** The last, shorter frame (none when the audio ended on a frame boundary). */
  flush(): Float32Array[] {
    const rest = this.pending;
    this.pending = new Float32Array(0);
    return rest.length > 0 ? [rest] : [];
  }
}

/** Splits a clip into frames of `frameSamples`; the last frame carries the remainder, unpadded. */
export function frameAudio(samples: Float32Array, frameSamples = OUTPUT_FRAME_SAMPLES): Float32Array[] {
  const framer = new Framer(frameSamples);
  return [...framer.push(samples), ...framer.flush()];
}
