import { INPUT_SAMPLE_RATE } from "@relay-translate/client/protocol";
import { AutomaticGain } from "../../audio/level.js";
import { int16ToFloat32 } from "../../audio/pcm.js";
import type { VadEngine } from "../../core/contracts.js";
import type { AudioFrame, ControlFrame, FlushFrame, SpeechFrame, TimedWindow } from "../frames.js";
import { BoundedQueue } from "../../core/queue.js";
import { SpeechSegmenter, type SegmenterEvent, type SegmenterOptions } from "../segmenter.js";

export const SAMPLES_PER_MS = INPUT_SAMPLE_RATE / 1000;

export interface AudioIntakeOptions {
  readonly vad: VadEngine;
  readonly segmenter: Omit<SegmenterOptions, "windowMs">;
  /** Audio kept from before speech onset so the first phoneme is not clipped. */
  readonly preRollMs: number;
  /** Audio waiting for recognition beyond this is dropped (the server is falling behind). */
  readonly maxBacklogMs: number;
  /** How long `finalize` waits for audio frames still in flight. */
  readonly finalizeWaitMs: number;
  /** Called for every input chunk dropped at the bound, and once per episode of drops. */
  readonly onDropped: (seconds: number, firstOfEpisode: boolean) => void;
}

/**
 * Stage 1, audio intake: input audio in, speech out. Brings the level up (src/audio/level.ts), cuts
 * the audio into VAD windows, delimits utterances (src/pipeline/segmenter.ts) and keeps a pre-roll
 * from before each onset. The input queue is bounded by `maxBacklogMs` of audio; see `push` for its
 * drop rule. Control frames (flush, end, cancel) always get in.
 */
export class AudioIntake {
  private readonly input: BoundedQueue<AudioFrame | ControlFrame>;
  private readonly level = new AutomaticGain();
  private readonly vadStream;
  private readonly segmenter: SpeechSegmenter;
  private readonly windowSamples: number;
  private readonly window: Int16Array;
  private windowFill = 0;
  /** Windows preceding speech onset, newest last. */
  private readonly preRoll: Int16Array[] = [];
  private readonly preRollWindows: number;
  /** An utterance is open (from the VAD's onset to its end or a flush). */
  private speaking = false;
  /**
   * The silence flush ended the utterance while the segmenter was still counting its trailing
   * silence: the segmenter goes on counting until it would have ended it (see `closingWindow`).
   */
  private closing = false;
  private received = 0;
  private processed = 0;
  /** Audio was dropped in the current backlog episode (it ends when the backlog has drained). */
  private dropping = false;
  private finalizeTimer: NodeJS.Timeout | undefined;
  private silenceTimer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly options: AudioIntakeOptions) {
    this.vadStream = options.vad.createStream();
    this.windowSamples = options.vad.capabilities.windowSamples;
    this.window = new Int16Array(this.windowSamples);
    const windowMs = this.windowSamples / SAMPLES_PER_MS;
    this.segmenter = new SpeechSegmenter({ ...options.segmenter, windowMs });
    this.preRollWindows = Math.ceil(options.preRollMs / windowMs);
    this.input = new BoundedQueue(options.maxBacklogMs * SAMPLES_PER_MS, (frame) =>
      frame.kind === "audio" ? frame.pcm.length : 0,
    );
  }

  /** Samples received so far. */
  get receivedSamples(): number {
    return this.received;
  }

  /** Samples processed so far (the session position of the audio recognized up to now). */
  get processedSamples(): number {
    return this.processed;
  }

  /**
   * Audio received is not yet recognized, or a flush is due (a `finalize`, an utterance ending in
   * the silence after the last audio): the stage has work in hand.
   */
  get working(): boolean {
    return !this.input.idle || this.finalizeTimer !== undefined || this.silenceTimer !== undefined;
  }

  /**
   * Queues audio. Never blocks. Drop rule: a chunk that would take the backlog (audio received and
   * not yet taken by recognition) past `maxBacklogMs` is dropped whole, and reported.
   */
  push(pcm: Int16Array): void {
    if (this.stopped || pcm.length === 0) return;
    this.cancelSilence();
    this.received += pcm.length;
    if (this.input.offer({ kind: "audio", pcm })) return;
    // Once per episode: until the backlog has drained, audio accepted between drops is no news.
    this.options.onDropped(pcm.length / (SAMPLES_PER_MS * 1000), !this.dropping);
    this.dropping = true;
  }

  /** A flush once audio still in flight has arrived. Repeated calls coalesce. */
  finalize(): void {
    if (this.stopped || this.finalizeTimer) return;
    this.finalizeTimer = setTimeout(() => {
      this.finalizeTimer = undefined;
      this.input.force({ kind: "flush", reason: "finalize" });
    }, this.options.finalizeWaitMs);
  }

  /**
   * Upstream, from recognition: the recognizer heard the end of the utterance and finished it, so
   * the segmenter starts over (the next speech opens a new utterance).
   */
  utteranceEnded(): void {
    this.segmenter.reset();
    this.preRoll.length = 0;
    this.speaking = false;
    this.closing = false;
  }

  /** No more input: what was received is carried through, then the stage ends. */
  end(): void {
    this.stop();
    this.input.force({ kind: "flush", reason: "end" });
    this.input.force({ kind: "end" });
    this.input.close();
  }

  /** Stops at once: queued audio is dropped. */
  cancel(): void {
    this.stop();
    this.input.clear();
    this.input.force({ kind: "cancel" });
    this.input.close();
  }

  /** The stage's loop: hands each speech frame to `next` and waits for it (recognition's pace). */
  async run(next: (frame: SpeechFrame) => Promise<void>): Promise<void> {
    for await (const frame of this.input) {
      if (frame.kind === "cancel") return;
      if (frame.kind === "end") continue;
      if (frame.kind === "flush") {
        // "silence" only finishes an utterance still ending (unless a flush closed it first).
        if (frame.reason !== "silence" || this.ending) await next(this.flush(frame.reason));
        continue;
      }
      await this.consume(this.level.process(frame.pcm), next);
      if (this.input.size === 0) {
        this.dropping = false;
        this.awaitSilence();
      }
    }
  }

  private stop(): void {
    this.stopped = true;
    clearTimeout(this.finalizeTimer);
    this.finalizeTimer = undefined;
    this.cancelSilence();
  }

  /**
   * All audio received is processed. If the utterance was ending (trailing silence), no audio
   * arriving counts as the silence going on: a client that stops sending after about 300 ms of
   * zeros (or any silence) instead of sending `finalize` still gets its finals, once the silence
   * has lasted as long as the segmenter's end silence. Audio arriving first cancels this.
   */
  private awaitSilence(): void {
    const remainingMs = this.segmenter.silenceToEndMs;
    if (!this.ending || remainingMs === undefined || this.stopped) return;
    this.silenceTimer = setTimeout(() => {
      this.silenceTimer = undefined;
      this.input.force({ kind: "flush", reason: "silence" });
    }, remainingMs);
  }

  /** The open utterance is in its trailing silence. */
  private get ending(): boolean {
    return this.speaking && this.segmenter.silenceToEndMs !== undefined;
  }

  private cancelSilence(): void {
    clearTimeout(this.silenceTimer);
    this.silenceTimer = undefined;
  }

  private async consume(pcm: Int16Array, next: (frame: SpeechFrame) => Promise<void>): Promise<void> {
    let offset = 0;
    while (offset < pcm.length) {
      const take = Math.min(this.windowSamples - this.windowFill, pcm.length - offset);
      this.window.set(pcm.subarray(offset, offset + take), this.windowFill);
      this.windowFill += take;
      offset += take;
      if (this.windowFill === this.windowSamples) {
        this.windowFill = 0;
        await this.consumeWindow(this.window.slice(), next);
      }
    }
  }

  private async consumeWindow(pcm: Int16Array, next: (frame: SpeechFrame) => Promise<void>): Promise<void> {
    const startSample = this.processed;
    this.processed += pcm.length;
    const event = this.segmenter.update(await this.vadStream.probability(int16ToFloat32(pcm)));
    if (this.closing && this.closingWindow(pcm, event) === "kept") return;
    if (!this.speaking) {
      // An onset: the segmenter's start, or speech resuming in the utterance the silence flush ended.
      if (!this.segmenter.inUtterance) {
        this.keepAsPreRoll(pcm);
        return;
      }
      const preRoll = this.preRoll.splice(0);
      const onset = startSample - preRoll.length * this.windowSamples;
      const windows: TimedWindow[] = preRoll.map((window, i) => ({
        startSample: onset + i * this.windowSamples,
        pcm: window,
      }));
      this.speaking = true;
      await next({ kind: "speech-start", startSample: onset, preRoll: windows });
    }
    if (event === "end") this.speaking = false;
    await next({ kind: "speech", window: { startSample, pcm }, ending: event === "end" });
  }

  /**
   * A window after the silence flush ended an utterance whose trailing silence the segmenter was
   * still counting. Until the segmenter ends it, the window is kept as pre-roll (as recognition no
   * longer takes it); at that end the pre-roll starts over, just as after an utterance that ended
   * in the audio. So where the next utterance starts, and its pre-roll, are the same whether or not
   * the timer fired. Speech before that end opens a new utterance with this window: the segmenter
   * counts it in the utterance it had, recognition in a new one.
   */
  private closingWindow(pcm: Int16Array, event: SegmenterEvent): "kept" | "resumed" {
    if (event === undefined && this.segmenter.silenceToEndMs === undefined) {
      this.closing = false;
      return "resumed";
    }
    if (event === "end") {
      this.closing = false;
      this.preRoll.length = 0;
      return "kept";
    }
    this.keepAsPreRoll(pcm);
    return "kept";
  }

  private keepAsPreRoll(pcm: Int16Array): void {
    this.preRoll.push(pcm);
    if (this.preRoll.length > this.preRollWindows) this.preRoll.shift();
  }

  /**
   * Cuts the input here. On `finalize` or the end, audio short of a VAD window still counts (it ends
   * the utterance) and the segmenter starts over. The silence flush keeps that audio in the window
   * and lets the segmenter count the silence on (`closingWindow`): whether that timer fired depends
   * on when audio arrived (a client or a server held up for a few hundred ms), and the VAD's
   * windows, and so the next utterance's bounds and its recognition, must not.
   */
  private flush(reason: FlushFrame["reason"]): SpeechFrame {
    const cut = reason !== "silence";
    const tail =
      cut && this.speaking && this.windowFill > 0 ? this.window.slice(0, this.windowFill) : undefined;
    if (cut) {
      this.processed += this.windowFill;
      this.windowFill = 0;
      this.segmenter.reset();
    }
    this.closing = !cut && this.segmenter.inUtterance;
    this.preRoll.length = 0;
    this.speaking = false;
    return { kind: "flush", reason, tail };
  }
}
