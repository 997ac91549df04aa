/**
 * Online speaker diarization: who is speaking, decided as the speech arrives, with labels that
 * stay the same for a person for the whole session ("1", "2", …). Used by every surface: live
 * sessions label transcripts with it, dubbing splits and labels its lines with it.
 *
 * The unit is a run: the speech of one utterance, or of the part of it since the voice last
 * changed. Speech arrives in blocks of 0.5 s, each turned into a voiceprint by the speaker engine
 * (src/core/contracts.ts), so any engine (the embedded MFCC one, a speaker-embedding network) fits.
 *
 *   - A run is labelled with the nearest known speaker once it holds 0.5 s of speech, tentatively:
 *     the label may still change. It is decided when its distance to that speaker falls below the
 *     engine's `sameSpeakerBelow` for 1.5 s of speech, or, past 1.5 s of speech and further than
 *     `newSpeakerAbove` from everyone, as a new speaker. A run decided for a known speaker stays
 *     theirs (another voice after it is a change, below).
 *     Short utterances that never get there keep the nearest speaker: a new person is never made
 *     out of less than 1.5 s of speech (one- or two-word replies would split one person in two).
 *   - Inside a long run, the last 2 s are compared with the run before them every 0.5 s. When two
 *     checks in a row find another voice, the run is split at the block boundary where the two
 *     sides differ most and the rest becomes a new run: a change of speaker without a pause.
 *   - Pitch counts beside the engine's voiceprint: a run whose median F0 is a man's while a
 *     speaker's is a woman's, or the reverse, far apart (PITCH_APART_SEMITONES), is not that
 *     speaker however near the voiceprints, and such a gap inside a run is a change of voice.
 *     Voiceprints that hear the room and microphone as much as the person (MFCC statistics) merged
 *     a man at 100 Hz into a woman at 204 Hz.
 *   - A run's speech joins its speaker's voiceprint (and pitch) when the run ends, so speakers
 *     sharpen as the session goes on and a run is never compared with itself.
 *   - Speech is settled (`settledBefore`) once its run is decided and it lies before the earliest
 *     point a later change could split the run at: its label is then final, and live sessions
 *     make words final only there.
 *
 * Hand-written because this is the product: no maintained JavaScript library does online
 * diarization, and the decisions (when to trust a label, when to split) are the service's own.
 */
import type { SpeakerEngine, Voiceprint } from "../core/contracts.js";
import { PITCH_STEP_SECONDS, voicedPitches } from "../voices/voice-features.js";

const BLOCK_SECONDS = 0.5;
/** A run gets a tentative label from this much speech… */
const TENTATIVE_SECONDS = 0.5;
/** …decided for a known speaker from this much (shorter stretches of two voices can look alike)… */
const SAME_SPEAKER_SECONDS = 1.5;
/** …and may become a new speaker only from this much. */
const NEW_SPEAKER_SECONDS = 1.5;
/** Speech at the end of a run compared with what came before it, for changes inside a run. */
const CHANGE_WINDOW_BLOCKS = 4;
/** The run before the window must hold this much speech for the comparison to mean anything. */
const CHANGE_CONTEXT_SECONDS = 1.5;
/** Consecutive checks that must find another voice before a run is split. */
const CHANGE_CONFIRMATIONS = 2;
/** Runs with less speech than this do not update their speaker's voiceprint. */
const LEARN_SECONDS = 0.5;
/** Speakers one session can have; past it, new voices take the nearest label (a bounded table). */
export const MAX_SPEAKERS = 16;
/**
 * Two stretches are two people when one's median F0 lies in the men's range (below 155 Hz), the
 * other's in the women's (above 165 Hz; Baken 2000), and more than 7 semitones apart. A man and a
 * woman of the test speech lie 10–15 semitones apart; between one speaker's 1.5 s stretches the
 * gap reaches 5 semitones, and 7 for the expressive LJSpeech reader (whose stretches all lie in
 * the women's range). A man who keeps a woman's pitch for seconds (shouting) may be taken for
 * another person.
 */
const PITCH_APART_SEMITONES = 7;
const MEN_BELOW_HZ = 155;
const WOMEN_ABOVE_HZ = 165;
/** Pitches are compared only between stretches with this much voiced speech each. */
const PITCH_VOICED_SECONDS = 0.3;
/** F0 is counted in half-semitone bins from 60 Hz up to 400 Hz, the range voice-features.ts reads. */
const PITCH_FLOOR_HZ = 60;
const PITCH_BINS_PER_SEMITONE = 2;
const PITCH_BINS = Math.ceil(12 * Math.log2(400 / PITCH_FLOOR_HZ) * PITCH_BINS_PER_SEMITONE) + 1;

export interface SpeakerDecision {
  /** The run's label: "1", "2", … */
  readonly speaker: string;
  /** False while the label may still change. */
  readonly decided: boolean;
}

export interface SpeakerChange extends SpeakerDecision {
  /** The voice changed here: session position (samples) where the new run starts. */
  readonly atSample: number;
  /** The label of the run that ended there. */
  readonly before: string;
}

/**
 * Speech as the tracker compares it: the engine's voiceprint and a histogram of voiced F0, which
 * pools by adding, as voiceprints do.
 */
interface Stretch {
  readonly print: Voiceprint;
  readonly pitch: Uint32Array;
}

interface Block extends Stretch {
  readonly startSample: number;
  readonly endSample: number;
}

interface Speaker {
  readonly label: string;
  voice: Stretch;
}

interface Nearest {
  readonly speaker: Speaker;
  readonly distance: number;
  /** Their pitches are too far apart for one person. */
  readonly apart: boolean;
}

export class SpeakerTracker {
  /** Known speakers; their voiceprints exclude the current run. */
  private readonly speakers: Speaker[] = [];
  private blocks: Block[] = [];
  private pending: Float32Array[] = [];
  private pendingSamples = 0;
  private pendingStart = 0;
  private run: Stretch | undefined;
  private label: string | undefined;
  private decided = false;
  private flagged = 0;
  /** Speech of an utterance has been pushed since the last `endUtterance`. */
  private inUtterance = false;
  /** The current run is near its speaker (not merely the nearest): only then does it teach the speaker. */
  private matched = false;
  /** After a change of voice inside an utterance: the speaker the new run cannot be. */
  private excluded: string | undefined;
  /** The speaker the current run made (its voiceprint is the run's), if it made one. */
  private founder: Speaker | undefined;
  /** The last call in line (see `inTurn`). */
  private turn: Promise<unknown> = Promise.resolve();
  private readonly blockSamples: number;
  private readonly threshold: number;
  private readonly newSpeakerAbove: number;

  /** `signal` cancels the voiceprints still being made (a dub that was cancelled). */
  constructor(
    private readonly engine: SpeakerEngine,
    private readonly signal?: AbortSignal,
  ) {
    this.blockSamples = Math.round(BLOCK_SECONDS * engine.capabilities.sampleRate);
    this.threshold = engine.capabilities.sameSpeakerBelow;
    this.newSpeakerAbove = engine.capabilities.newSpeakerAbove;
  }

  /**
   * The label of the current (or last) run. Before any speech has been analyzed it is "1": the
   * session's first voice is speaker 1 whoever it is.
   */
  get current(): SpeakerDecision {
    return { speaker: this.label ?? "1", decided: this.decided };
  }

  /**
   * Session position (samples) before which the current utterance's speech has its label for good:
   * its run is decided, and a change of voice found later splits the run only after this point.
   * -Infinity while the run's label may still change.
   */
  get settledBefore(): number {
    if (!this.inUtterance) return Infinity;
    if (!this.decided) return -Infinity;
    // The earliest block a later check can split at (see checkChange): checks look back one block
    // more than their window, and never split off the run's first block.
    const earliest = Math.max(1, this.blocks.length - CHANGE_WINDOW_BLOCKS);
    return earliest < this.blocks.length
      ? this.blocks[earliest]!.startSample
      : (this.blocks.at(-1)?.endSample ?? this.pendingStart);
  }

  /** Labels handed out so far. */
  get count(): number {
    return this.speakers.length;
  }

  /**
   * Speech of the current utterance, in order (samples in [-1, 1] at the engine's rate), starting
   * at session position `atSample`. Returns a change when the voice changed inside the utterance.
   */
  push(samples: Float32Array, atSample: number): Promise<SpeakerChange | undefined> {
    return this.inTurn(() => this.pushNow(samples, atSample));
  }

  /** Ends the utterance: its last run is labelled for good. */
  endUtterance(): Promise<SpeakerDecision> {
    return this.inTurn(() => this.endUtteranceNow());
  }

  /**
   * Runs `work` after every call made before it: voiceprints are asynchronous (an engine may run in
   * another process), and speech must reach the runs in the order it was spoken.
   */
  private inTurn<T>(work: () => Promise<T>): Promise<T> {
    const result = this.turn.then(work);
    this.turn = result.catch(() => undefined);
    return result;
  }

  private async pushNow(samples: Float32Array, atSample: number): Promise<SpeakerChange | undefined> {
    if (!this.inUtterance) {
      // A new utterance may be anyone's: until its speech is heard, the last label is only a guess.
      this.inUtterance = true;
      this.decided = false;
    }
    if (this.pendingSamples === 0) this.pendingStart = atSample;
    this.pending.push(samples);
    this.pendingSamples += samples.length;
    let change: SpeakerChange | undefined;
    while (this.pendingSamples >= this.blockSamples)
      change = (await this.addBlock(this.takeBlock())) ?? change;
    return change;
  }

  private async endUtteranceNow(): Promise<SpeakerDecision> {
    if (this.pendingSamples > 0) await this.addBlock(this.takeBlock(), true);
    if (this.run) this.decide(true);
    this.closeRun();
    this.inUtterance = false;
    return this.current;
  }

  private takeBlock(): { samples: Float32Array; startSample: number } {
    const take = Math.min(this.blockSamples, this.pendingSamples);
    const samples = new Float32Array(take);
    let filled = 0;
    while (filled < take) {
      const piece = this.pending[0]!;
      const used = Math.min(piece.length, take - filled);
      samples.set(piece.subarray(0, used), filled);
      filled += used;
      if (used === piece.length) this.pending.shift();
      else this.pending[0] = piece.subarray(used);
    }
    const startSample = this.pendingStart;
    this.pendingSamples -= take;
    this.pendingStart += take;
    return { samples, startSample };
  }

  private async addBlock(
    { samples, startSample }: { samples: Float32Array; startSample: number },
    last = false,
  ): Promise<SpeakerChange | undefined> {
    let print: Voiceprint;
    try {
      print = await this.engine.voiceprint(samples, this.signal);
    } catch (error) {
      if (this.signal?.aborted) throw error;
      // An engine in another process may be busy or restarting: the block is left out, as silence
      // is, and labels go on from the rest of the speech rather than ending the session.
      return undefined;
    }
    if (print.speechSeconds === 0) return undefined;
    const pitch = pitchHistogram(voicedPitches(samples, this.engine.capabilities.sampleRate));
    const block = { startSample, endSample: startSample + samples.length, print, pitch };
    this.blocks.push(block);
    this.run = this.run ? this.merge(this.run, block) : block;
    const change = last ? undefined : this.checkChange();
    if (change) return change;
    this.decide(false);
    return undefined;
  }

  /** Labels the current run (see the module comment); `final`: the run has ended. */
  private decide(final: boolean): void {
    const run = this.run!;
    if (this.founder) {
      // The run made its speaker: it is that speaker, whose voiceprint grows with it.
      this.founder.voice = run;
      this.decided = true;
      return;
    }
    if (this.speakers.length === 0) {
      // The session's first voice is speaker 1: there is no one else it could be.
      this.found(run);
      return;
    }
    const nearest = this.nearest(run);
    if (!nearest) {
      // After a change of voice with only the earlier speaker known: someone new.
      if (this.speakers.length < MAX_SPEAKERS) return this.found(run);
      return;
    }
    // A run decided for a known speaker stays theirs (a new voice inside it is a change of speaker,
    // found by checkChange); until then it may move to another speaker or found one.
    if (this.decided && this.matched) return;
    this.matched = !nearest.apart && nearest.distance < this.threshold;
    if (this.matched) {
      this.label = nearest.speaker.label;
      this.decided = final || run.print.speechSeconds >= SAME_SPEAKER_SECONDS;
    } else if (
      (nearest.apart || nearest.distance > this.newSpeakerAbove) &&
      run.print.speechSeconds >= NEW_SPEAKER_SECONDS &&
      this.speakers.length < MAX_SPEAKERS
    ) {
      this.found(run);
    } else if (
      final ||
      run.print.speechSeconds >= TENTATIVE_SECONDS ||
      this.label === undefined ||
      this.label === this.excluded
    ) {
      this.label = nearest.speaker.label;
      this.decided = final;
    }
  }

  private found(run: Stretch): void {
    this.founder = { label: String(this.speakers.length + 1), voice: run };
    this.speakers.push(this.founder);
    this.label = this.founder.label;
    this.decided = true;
  }

  /**
   * The nearest known speaker, other than the one the voice just changed from: among those whose
   * pitch is not apart from the run's when there are any.
   */
  private nearest(run: Stretch): Nearest | undefined {
    let best: Nearest | undefined;
    for (const speaker of this.speakers) {
      if (speaker.label === this.excluded) continue;
      const candidate = {
        speaker,
        distance: this.engine.distance(run.print, speaker.voice.print),
        apart: pitchesApart(run.pitch, speaker.voice.pitch),
      };
      const nearer =
        !best || (candidate.apart === best.apart ? candidate.distance < best.distance : best.apart);
      if (nearer) best = candidate;
    }
    return best;
  }

  /** Two stretches that cannot be one person: pitches apart, or voiceprints beyond the threshold. */
  private differ(a: Stretch, b: Stretch): boolean {
    return pitchesApart(a.pitch, b.pitch) || this.engine.distance(a.print, b.print) >= this.threshold;
  }

  /**
   * Compares the run's last 2 s with the run before them; after two checks in a row that find
   * another voice, splits the run where its two sides differ most.
   */
  private checkChange(): SpeakerChange | undefined {
    const window = this.blocks.slice(-CHANGE_WINDOW_BLOCKS);
    const preceding = this.blocks.slice(0, -CHANGE_WINDOW_BLOCKS);
    if (window.length < CHANGE_WINDOW_BLOCKS || preceding.length === 0) return undefined;
    const earlier = this.pool(preceding);
    if (earlier.print.speechSeconds < CHANGE_CONTEXT_SECONDS) return undefined;
    if (!this.differ(this.pool(window), earlier)) {
      this.flagged = 0;
      return undefined;
    }
    if (++this.flagged < CHANGE_CONFIRMATIONS) return undefined;

    // The boundary: the block edge (leaving ≥ 1 s of speech on the new side) that best separates.
    let split = this.blocks.length - CHANGE_WINDOW_BLOCKS;
    let best = -Infinity;
    for (
      let at = Math.max(1, this.blocks.length - CHANGE_WINDOW_BLOCKS - 1);
      at <= this.blocks.length - 2;
      at++
    ) {
      const distance = this.engine.distance(
        this.pool(this.blocks.slice(0, at)).print,
        this.pool(this.blocks.slice(at)).print,
      );
      if (distance > best) [best, split] = [distance, at];
    }
    const tail = this.blocks.slice(split);
    this.run = this.pool(this.blocks.slice(0, split));
    this.decide(true);
    const before = this.label!;
    this.closeRun();
    this.blocks = tail;
    this.run = this.pool(tail);
    this.decided = false;
    this.excluded = before;
    this.decide(false);
    return { ...this.current, atSample: tail[0]!.startSample, before };
  }

  private pool(blocks: readonly Stretch[]): Stretch {
    return blocks.reduce((a, b) => this.merge(a, b));
  }

  private merge(a: Stretch, b: Stretch): Stretch {
    return {
      print: this.engine.merge(a.print, b.print),
      pitch: a.pitch.map((count, i) => count + b.pitch[i]!),
    };
  }

  /** The run ends: its speech joins its speaker's voiceprint (a founder's already is it). */
  private closeRun(): void {
    const run = this.run;
    const speaker = this.speakers.find(({ label }) => label === this.label);
    if (run && speaker && !this.founder && this.matched && run.print.speechSeconds >= LEARN_SECONDS)
      speaker.voice = this.merge(speaker.voice, run);
    this.founder = undefined;
    this.excluded = undefined;
    this.matched = false;
    this.run = undefined;
    this.blocks = [];
    this.flagged = 0;
    this.decided = true;
  }
}

// ---------------------------------------------------------------- pitch

function pitchHistogram(f0Hz: readonly number[]): Uint32Array {
  const counts = new Uint32Array(PITCH_BINS);
  for (const hz of f0Hz) {
    const bin = Math.round(12 * Math.log2(hz / PITCH_FLOOR_HZ) * PITCH_BINS_PER_SEMITONE);
    counts[Math.min(PITCH_BINS - 1, Math.max(0, bin))]! += 1;
  }
  return counts;
}

/** Median F0 in semitones above PITCH_FLOOR_HZ, or undefined with too little voiced speech. */
function medianSemitones(counts: Uint32Array): number | undefined {
  const total = counts.reduce((sum, count) => sum + count, 0);
  if (total * PITCH_STEP_SECONDS < PITCH_VOICED_SECONDS) return undefined;
  let below = 0;
  for (let bin = 0; bin < counts.length; bin++) {
    below += counts[bin]!;
    if (below >= total / 2) return bin / PITCH_BINS_PER_SEMITONE;
  }
  return undefined;
}

/** See PITCH_APART_SEMITONES. */
function pitchesApart(a: Uint32Array, b: Uint32Array): boolean {
  const [x, y] = [medianSemitones(a), medianSemitones(b)];
  if (x === undefined || y === undefined) return false;
  const [lower, higher] = x < y ? [x, y] : [y, x];
  return (
    higher - lower > PITCH_APART_SEMITONES &&
    lower < semitonesAboveFloor(MEN_BELOW_HZ) &&
    higher > semitonesAboveFloor(WOMEN_ABOVE_HZ)
  );
}

function semitonesAboveFloor(hz: number): number {
  return 12 * Math.log2(hz / PITCH_FLOOR_HZ);
}
