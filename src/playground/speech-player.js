// Translated speech in the browser, for the playground and the meeting page: float32 frames at the
// protocol's output rate, played back to back; `onPlayed(samples)` is told of each frame queued.
import { OUTPUT_SAMPLE_RATE } from "/sdk/protocol.js";

export class SpeechPlayer {
  constructor(onPlayed = () => {}) {
    this.onPlayed = onPlayed;
    this.context = new AudioContext({ sampleRate: OUTPUT_SAMPLE_RATE });
    this.next = 0;
  }

  play(samples) {
    if (samples.length === 0) return;
    const buffer = this.context.createBuffer(1, samples.length, OUTPUT_SAMPLE_RATE);
    buffer.copyToChannel(samples, 0);
    const source = this.context.createBufferSource();
    source.buffer = buffer;
    source.connect(this.context.destination);
    this.next = Math.max(this.next, this.context.currentTime);
    source.start(this.next);
    this.next += buffer.duration;
    this.onPlayed(samples.length);
  }

  close() {
    void this.context.close();
  }
}
