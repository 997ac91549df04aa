import { AudioFrame } from "@livekit/rtc-node";
import { OUTPUT_SAMPLE_RATE } from "@relay-translate/client/protocol";

/** relay's real-time audio: PCM16 mono 16 kHz in, float32 mono 24 kHz out (the protocol's). */
export { INPUT_SAMPLE_RATE, OUTPUT_SAMPLE_RATE } from "@relay-translate/client/protocol";
/** Frames handed to agents: 100 ms, as the agents' own plugins send. */
export const OUTPUT_FRAME_SAMPLES = OUTPUT_SAMPLE_RATE / 10;

/** A frame's samples as one channel (channels averaged), the layout relay reads. */
export function monoSamples(frame: AudioFrame): Int16Array {
  if (frame.channels === 1) return frame.data.subarray(0, frame.samplesPerChannel);
  const mono = new Int16Array(frame.samplesPerChannel);
  for (let i = 0; i < mono.length; i++) {
    let sum = 0;
    for (let c = 0; c < frame.channels; c++) sum += frame.data[i * frame.channels + c]!;
    mono[i] = Math.round(sum / frame.channels);
  }
  return mono;
}

/**
 * Cuts relay's speech (float32 frames of any length) into 100 ms PCM16 AudioFrames. The last frame
 * is held back until the next arrives or `flush`, so whoever reads can mark the final one.
 */
export class SpeechFramer {
  private pending = new Int16Array(OUTPUT_FRAME_SAMPLES);
  private filled = 0;

  push(samples: Float32Array): AudioFrame[] {
    const frames: AudioFrame[] = [];
    for (const sample of samples) {
      const clipped = Math.max(-1, Math.min(1, sample));
      this.pending[this.filled++] = Math.round(clipped < 0 ? clipped * 0x8000 : clipped * 0x7fff);
      if (this.filled === OUTPUT_FRAME_SAMPLES) frames.push(this.take());
    }
    return frames;
  }

  /** What is left, as a shorter frame (none if nothing is). */
  flush(): AudioFrame[] {
    return this.filled > 0 ? [this.take()] : [];
  }

  private take(): AudioFrame {
    const data = this.pending.slice(0, this.filled);
    this.filled = 0;
    return new AudioFrame(data, OUTPUT_SAMPLE_RATE, 1, data.length);
  }
}
