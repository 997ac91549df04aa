import { int16ToFloat32 } from "../../audio/pcm.js";
import { concatPcm } from "../../audio/pcm.js";
import type { SpeakerChange, SpeakerTracker } from "../../speakers/tracker.js";
import type { VoiceChooser } from "../../speakers/voice-choice.js";
import type { TimedWindow } from "../frames.js";

/**
 * Speech handed to the voice chooser at a time (250 ms). Small, so the first voice decision lands as
 * soon as about 0.5 s of the speaker's voiced speech has been heard (profiles pool pieces until
 * then), before their first line is spoken.
 */
const PROFILE_CHUNK_SAMPLES = 4_000;

/**
 * Stage 3, speaker split: who is currentSpeaker in the open utterance. Every window goes to the speaker
 * tracker (src/speakers/tracker.ts), which reports a change of voice inside the utterance; the
 * utterance's audio is kept meanwhile, so recognition can split it at the change (see
 * `UtteranceRecognition`). The speech of each speaker also goes to the voice chooser, which matches
 * a library voice to it. Without a tracker or a voice chooser, the parts they need are skipped.
 */
export class SpeakerSplit {
  /** The speaker of the speech being recognized, as the tracker last decided. */
  currentSpeaker: string | undefined;
  /** The utterance's audio, kept while the tracker may split it (bounded by the longest utterance). */
  private audio: TimedWindow[] = [];
  /** Speech not yet handed to the voice chooser (its speaker is not decided yet, or it is short). */
  private unobserved: TimedWindow[] = [];

  constructor(
    private readonly tracker: SpeakerTracker | undefined,
    private readonly voices: VoiceChooser | undefined,
  ) {}

  /** Whether transcripts carry speaker labels. */
  get labelling(): boolean {
    return this.tracker !== undefined;
  }

  /** Session sample before which the utterance's speech has its speaker for good. */
  get settledBeforeSample(): number {
    return this.tracker ? this.tracker.settledBefore : Infinity;
  }

  /** A new utterance, or the part of one after a change, beginning with `windows` (already tracked). */
  begin(windows: TimedWindow[]): void {
    this.audio = windows;
    this.unobserved = this.voices ? [...windows] : [];
  }

  /** A window of the utterance; returns the change of speaker it revealed, if any. */
  async track(window: TimedWindow): Promise<SpeakerChange | undefined> {
    if (this.voices) this.unobserved.push(window);
    if (!this.tracker) return undefined;
    this.audio.push(window);
    const change = await this.tracker.push(int16ToFloat32(window.pcm), window.startSample);
    this.currentSpeaker = this.tracker.current.speaker;
    return change;
  }

  /** The utterance ended: its last run gets the tracker's final decision. */
  async endUtterance(): Promise<void> {
    if (this.tracker) this.currentSpeaker = (await this.tracker.endUtterance()).speaker;
  }

  /** After a window's transcripts are out, so measuring the voice never delays them. */
  observeWhileSpeaking(): void {
    if (this.tracker?.current.decided !== false) this.observe(PROFILE_CHUNK_SAMPLES);
  }

  /**
   * Hands the utterance's speech to the voice chooser, under the current speaker, once at least
   * `minSamples` of it has gathered (speech before `beforeSample` only, when given).
   */
  observe(minSamples: number, beforeSample = Infinity): void {
    if (!this.voices) return;
    const taken = this.unobserved.filter((window) => window.startSample < beforeSample);
    if (taken.reduce((sum, window) => sum + window.pcm.length, 0) < Math.max(1, minSamples)) return;
    this.unobserved = this.unobserved.filter((window) => window.startSample >= beforeSample);
    this.voices.observe(this.currentSpeaker, concatPcm(taken.map((window) => window.pcm)));
  }

  /** The utterance's audio before `cutSample`. */
  audioBefore(cutSample: number): Int16Array {
    return concatPcm(
      this.audio
        .filter((window) => window.startSample < cutSample)
        .map((window) => window.pcm.subarray(0, cutSample - window.startSample)),
    );
  }

  /** The utterance's windows from `cutSample` on, including the part of the window it falls in. */
  audioFrom(cutSample: number): TimedWindow[] {
    return this.audio
      .filter((window) => window.startSample + window.pcm.length > cutSample)
      .map((window) =>
        window.startSample >= cutSample
          ? window
          : { startSample: cutSample, pcm: window.pcm.subarray(cutSample - window.startSample) },
      );
  }
}
