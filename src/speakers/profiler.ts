/**
 * The voice profile of one live speaker, built from their utterances as they arrive (the speaker
 * voices of src/speakers/voice-choice.ts): measured with voice-features.ts until it is settled.
 */
import {
  analyzeVoice,
  summarizeVoice,
  type VoiceAnalysis,
  type VoiceFeatures,
} from "../voices/voice-features.js";
import { ANALYSIS_RATE as RATE } from "../audio/signal.js";

/** Voiced speech after which a speaker gets a first profile, and after which it is final. */
const FIRST_PROFILE_SECONDS = 0.5;
const LOCK_SECONDS = 4;
/** Pieces shorter than this are buffered (syllable detection needs some context)… */
const MIN_CHUNK_SECONDS = 0.5;
/** …and at most this much (plus a short tail) is analyzed per call; the rest waits for the next. */
const MAX_CHUNK_SECONDS = 2;

/**
 * Accumulates one live speaker's utterances (PCM16 16 kHz). First profile after >= 0.5 s voiced
 * speech; after >= 4 s voiced it locks and stops analyzing (bounded CPU).
 *
 * `observe` takes utterances or any pieces of them. A piece under 0.5 s waits to be joined with the
 * next one unless it could complete the first profile; a call analyzes at most 2.5 s of audio
 * (≤ ~12 ms of CPU) and leaves the rest for the next call; once locked it does nothing (a speaker
 * costs ~50 ms of CPU in all).
 */
export class SpeakerProfiler {
  private readonly parts: VoiceAnalysis[] = [];
  private pending: Int16Array[] = [];
  private pendingSamples = 0;
  private voiced = 0;
  private current: VoiceFeatures | undefined;
  private done = false;

  observe(pcm: Int16Array): void {
    if (this.done || pcm.length === 0) return;
    this.pending.push(pcm);
    this.pendingSamples += pcm.length;
    // Before the first profile, analyze as soon as the pending audio could complete it.
    const couldProfile = !this.current && this.voiced + this.pendingSamples / RATE >= FIRST_PROFILE_SECONDS;
    if (this.pendingSamples < MIN_CHUNK_SECONDS * RATE && !couldProfile) return;

    const audio = new Int16Array(this.pendingSamples);
    let offset = 0;
    for (const piece of this.pending) {
      audio.set(piece, offset);
      offset += piece.length;
    }
    // A tail shorter than MIN_CHUNK joins this slice rather than waiting on its own.
    const end =
      audio.length - MAX_CHUNK_SECONDS * RATE < MIN_CHUNK_SECONDS * RATE
        ? audio.length
        : MAX_CHUNK_SECONDS * RATE;
    this.pending = end < audio.length ? [audio.subarray(end)] : [];
    this.pendingSamples = audio.length - end;

    const part = analyzeVoice(
      Float32Array.from(audio.subarray(0, end), (sample) => sample / 32768),
      RATE,
    );
    this.parts.push(part);
    this.voiced += part.voicedSeconds;
    if (this.voiced >= FIRST_PROFILE_SECONDS) this.current = summarizeVoice(this.parts);
    if (this.voiced >= LOCK_SECONDS) {
      this.done = true;
      this.pending = [];
      this.pendingSamples = 0;
    }
  }

  get profile(): VoiceFeatures | undefined {
    return this.current;
  }

  get locked(): boolean {
    return this.done;
  }
}
