import type { Voice } from "../core/contracts.js";

/**
 * Keeping pace with the speaker (docs/realtime-api.md, "Pace"). Spoken translations run longer than
 * the speech they translate, so a listener who hears every line in order falls further behind with
 * every sentence of a long turn. The pipeline knows what it has sent: each listener plays the
 * translated audio in order in real time from when it arrives (a WebSocket client, a room's track),
 * so the audio still to be heard is the backlog. Speech is made faster as the backlog grows, through
 * the voice's own rate (every TTS engine honours it: eSpeak NG's words per minute, Piper's and
 * Kokoro's length scale, Pico's speed), and each piece's leading and trailing engine silence is
 * replaced by the pause its punctuation asks for.
 */

export interface PaceOptions {
  /** The fastest speech relay may use, as a multiple of the voice's natural rate (1: never faster). */
  readonly maxSpeedup: number;
}

/**
 * How a session or room asks for it: `catch-up` (the default) speaks faster while a listener is
 * behind, `natural` never does.
 */
export const PACE_MODES = ["catch-up", "natural"] as const;
export type PaceMode = (typeof PACE_MODES)[number];
/**
 * The default fastest speech: 1.15× natural (never above 1.6×). Measured (docs/benchmarks.md,
 * "Intelligibility at the pace relay chose", Whisper base listening): eSpeak NG loses up to 0.8 WER
 * points at 1.15×, 3–5 at 1.25× and 13–17 at 1.5×; the Piper voice none up to 1.25×.
 */
export const DEFAULT_MAX_SPEEDUP = 1.15;
/** The range a client may ask for. */
export const MAX_SPEEDUP_RANGE = { min: 1, max: 1.6 } as const;

/** The pipeline's pace options for what a session or room asked; undefined: natural speed always. */
export function paceOf(mode: PaceMode, maxSpeedup = DEFAULT_MAX_SPEEDUP): PaceOptions | undefined {
  return mode === "natural" || maxSpeedup <= 1 ? undefined : { maxSpeedup };
}

/**
 * Backlog at or below which speech stays natural: about one short phrase, so a listener who keeps
 * up never hears sped-up speech.
 */
export const NATURAL_BACKLOG_S = 1.5;
/** Backlog above NATURAL_BACKLOG_S that brings the full speed-up (linear in between). */
export const FULL_SPEEDUP_BACKLOG_S = 4;
/**
 * Seconds one character of text waiting to be spoken is counted as (about 14 characters a second,
 * typical for the library's voices at rate 1): text queued behind the audio is backlog too, and
 * counting it speeds speech up before the queue grows long.
 */
export const SECONDS_PER_CHARACTER = 1 / 14;

/** The speed for speech that starts when the listener has `backlogSeconds` still to hear. */
export function speedFor(backlogSeconds: number, pace: PaceOptions): number {
  const over = (backlogSeconds - NATURAL_BACKLOG_S) / FULL_SPEEDUP_BACKLOG_S;
  const speed = 1 + Math.min(1, Math.max(0, over)) * (pace.maxSpeedup - 1);
  // Rounded so one speed spans many lines (engines may cache per rate) and logs read plainly.
  return Math.round(speed * 20) / 20;
}

/** `voice` spoken `speed` times faster than its natural rate. */
export function fasterVoice(voice: Voice, speed: number): Voice {
  return speed === 1 ? voice : { ...voice, timbre: { ...voice.timbre, rate: voice.timbre.rate * speed } };
}

/**
 * When one listener will have heard everything sent to them: each clip starts at the later of its
 * arrival and the end of the one before (they play in order, in real time).
 */
export class ListenerClock {
  /** performance.now() ms at which the audio sent so far ends. */
  private endsAt = 0;

  /** `seconds` of audio were sent at `nowMs`. */
  sent(seconds: number, nowMs: number): void {
    this.endsAt = Math.max(this.endsAt, nowMs) + seconds * 1000;
  }

  /** Seconds of audio sent and not heard yet at `nowMs`. */
  backlog(nowMs: number): number {
    return Math.max(0, this.endsAt - nowMs) / 1000;
  }

  /** Seconds the listener has heard nothing at `nowMs` (0 while they still hear audio). */
  silentFor(nowMs: number): number {
    return Math.max(0, nowMs - this.endsAt) / 1000;
  }
}

/** Below this a sample counts as silence (about −54 dBFS: engines' silence is digital or near it). */
const SILENCE_LEVEL = 0.002;
/** The pause after a piece that ends at a phrase boundary inside a sentence (a comma, a colon…). */
export const PHRASE_PAUSE_S = 0.12;
/** The pause after a piece that ends a sentence, and between one utterance's speech and the next's. */
export const SENTENCE_PAUSE_S = 0.3;
/** Sentence-final punctuation, with any closing quotes or brackets (as the sentence splitter reads it). */
const SENTENCE_END = /[.!?…。！？]["'”’»」』)\]]*$/u;
/** Punctuation that ends a phrase inside a sentence. */
const PHRASE_END = /[,;:—–、，；：]["'”’»」』)\]]*$/u;

/**
 * The pause a piece of text is followed by. A piece that ends neither a sentence nor a phrase (the
 * stabiliser commits a few words at a time, wherever its agreement ends) joins the next piece of its
 * utterance with no pause: speech is paused where its punctuation says, not where it was cut.
 */
export function pauseAfter(text: string): number {
  const end = text.trim();
  if (SENTENCE_END.test(end)) return SENTENCE_PAUSE_S;
  return PHRASE_END.test(end) ? PHRASE_PAUSE_S : 0;
}

/**
 * Trims the silence an engine puts before and after a piece of speech, streaming: `push` returns the
 * audio that is certainly not trailing silence (a silent run is held until speech follows it, so a
 * pause inside the piece is kept), `end` the pause that replaces the trailing silence. A piece may
 * start with a pause of its own (`leadFor()`, read when its first speech arrives).
 */
export class SilenceTrimmer {
  private started = false;
  private held: Float32Array[] = [];
  private lead = 0;

  constructor(
    private readonly sampleRate: number,
    private readonly leadFor: () => number = () => 0,
  ) {}

  /** The seconds of pause put before the first speech (0 until it arrived). */
  get leadSeconds(): number {
    return this.lead;
  }

  push(samples: Float32Array): Float32Array[] {
    let chunk = samples;
    let lead: Float32Array[] = [];
    if (!this.started) {
      const first = chunk.findIndex((s) => Math.abs(s) >= SILENCE_LEVEL);
      if (first < 0) return [];
      this.started = true;
      chunk = chunk.subarray(first);
      this.lead = this.leadFor();
      if (this.lead > 0) lead = [this.silence(this.lead)];
    }
    let last = chunk.length - 1;
    while (last >= 0 && Math.abs(chunk[last]!) < SILENCE_LEVEL) last--;
    if (last < 0) {
      this.held.push(chunk);
      return lead;
    }
    const out = [...lead, ...this.held, chunk.subarray(0, last + 1)];
    this.held = last + 1 < chunk.length ? [chunk.subarray(last + 1)] : [];
    return out;
  }

  /** The piece ended: `pauseSeconds` of silence (none when it held no speech at all). */
  end(pauseSeconds: number): Float32Array[] {
    this.held = [];
    if (!this.started) return [];
    return pauseSeconds > 0 ? [this.silence(pauseSeconds)] : [];
  }

  /** The piece held speech. */
  get spoke(): boolean {
    return this.started;
  }

  private silence(seconds: number): Float32Array {
    return new Float32Array(Math.round(seconds * this.sampleRate));
  }
}
