/**
 * Level handling ahead of the VAD and the recognizer: an automatic gain control for PCM16 16 kHz
 * mono. Silero VAD and PocketSphinx miss speech from quiet microphones (peaks near -50 dBFS), so
 * quiet speech is brought up toward a target level; loud input is left as it is.
 *
 * Every 10 ms block (the control rate; the gain is interpolated per sample in between):
 * - the block's RMS level is measured (digital silence is skipped: it says nothing about the mic);
 * - the noise floor is the quietest block of the last second (minimum statistics);
 * - a block at least 10 dB above the floor (and above -80 dBFS, a few LSBs) counts as speech, and
 *   only speech moves the speech level, an envelope of the syllable peaks (fast attack, 3 dB/s
 *   release);
 * - the gain heads for `TARGET_LEVEL_DBFS - speech level`, between 0 dB (it never attenuates: loud
 *   input passes unchanged) and `MAX_GAIN_DB`, and back to 0 dB while the speech level is not 15 dB
 *   clear of the floor. It rises at most 200 dB/s and only on speech (never on noise or silence),
 *   and falls at most 600 dB/s.
 * A peak limiter (instant attack, 50 ms release) keeps boosted samples within -1 dBFS, so nothing is
 * ever clipped; it never takes the gain below 0 dB.
 *
 * No causal detector can tell the first moments of a noise that starts suddenly from speech: such a
 * noise is boosted until the floor has caught up with it (at most a second), then let go. Likewise
 * the onset of a loud talker's first syllable may be raised a few dB before the level is known.
 *
 * Streaming: state is kept across calls, a sample's output depends only on it and the samples
 * before it (no lookahead, no added latency), so any chunking gives the same output. The cost is a
 * few operations per sample and one logarithm and one power per block.
 */

const SAMPLE_RATE = 16_000;
/** Control block: 10 ms. */
const BLOCK = SAMPLE_RATE / 100;
const BLOCKS_PER_SECOND = SAMPLE_RATE / BLOCK;

/**
 * Level the speech envelope (10 ms RMS of syllable peaks) is brought to: that of well-recorded read
 * speech (the LibriVox clips' syllables reach -21 … -14 dBFS, their peaks -14 … -5 dBFS), with headroom.
 */
export const TARGET_LEVEL_DBFS = -20;
/**
 * Ceiling: +40 dB brings speech peaking at -50 dBFS (the quietest laptop microphones we aim to serve)
 * to the target (peaks near -10 dBFS). Quieter input peaks below about 100 LSBs: more gain would
 * mostly lift microphone hiss and int16 quantisation noise toward speech level.
 */
export const MAX_GAIN_DB = 40;
/**
 * Boosting needs the speech level this far above the noise floor, so a noise taken for speech (one
 * that just started) is let go once the floor has caught up with it.
 */
const MIN_SPEECH_OVER_FLOOR_DB = 15;
/** A block this far above the noise floor is taken for speech. */
const SPEECH_OVER_FLOOR_DB = 10;
/** Quieter blocks (about 3 LSB RMS) are never taken for speech: there is nothing left to recover. */
const MIN_SPEECH_DBFS = -80;
/** The noise floor is the quietest block of the last 1 s (minimum statistics), kept as 4 × 250 ms. */
const FLOOR_SPANS = 4;
const FLOOR_SPAN_BLOCKS = 25;
/** Share of the distance the speech level moves per block toward a louder block (about 15 ms). */
const LEVEL_ATTACK = 0.5;
const LEVEL_RELEASE_DB = 3 / BLOCKS_PER_SECOND;
/** Gain slew limits: rising brings a quiet talker up within ~0.2 s of their first syllable. */
const GAIN_UP_DB = 200 / BLOCKS_PER_SECOND;
const GAIN_DOWN_DB = 600 / BLOCKS_PER_SECOND;
/** Boosted samples stay within -1 dBFS. */
const LIMIT = 32_767 * 10 ** (-1 / 20);
/** Per-sample recovery of the limiter toward no reduction (50 ms time constant). */
const LIMITER_RELEASE = 1 - Math.exp(-1 / (0.05 * SAMPLE_RATE));

const FULL_SCALE_SQUARED = 32_768 * 32_768;

export class AutomaticGain {
  /** Gain (linear) at the current sample and its per-sample step within the block. */
  private gain = 1;
  private step = 0;
  private gainDb = 0;
  /** Limiter factor (≤ 1) applied on top of `gain`. */
  private limiter = 1;
  private blockFill = 0;
  private blockSumSquares = 0;
  /** Quietest block level of each of the last `FLOOR_SPANS` spans, the current one at `span`. */
  private readonly spanMinima = new Array<number>(FLOOR_SPANS).fill(Infinity);
  private span = 0;
  private spanBlocks = 0;
  /** Undefined until the first speech block. */
  private speechDb: number | undefined;

  /** Returns the levelled copy of `pcm` (same length); `pcm` is not modified. */
  process(pcm: Int16Array): Int16Array {
    const out = new Int16Array(pcm.length);
    for (let i = 0; i < pcm.length; i++) {
      if (this.blockFill === BLOCK) this.endBlock();
      const x = pcm[i]!;
      this.blockSumSquares += x * x;
      this.blockFill++;
      this.gain += this.step;
      const peak = Math.abs(x) * this.gain * this.limiter;
      if (peak > LIMIT) this.limiter = LIMIT / (Math.abs(x) * this.gain);
      out[i] = Math.round(x * Math.max(1, this.gain * this.limiter));
      this.limiter += (1 - this.limiter) * LIMITER_RELEASE;
    }
    return out;
  }

  /** Updates floor, speech level and gain from the block just completed; sets the next block's ramp. */
  private endBlock(): void {
    const sumSquares = this.blockSumSquares;
    this.blockFill = 0;
    this.blockSumSquares = 0;
    let speech = false;
    // Digital silence says nothing about the microphone's noise: it moves nothing.
    if (sumSquares > 0) {
      const db = 10 * Math.log10(sumSquares / BLOCK / FULL_SCALE_SQUARED);
      // Against the floor before this block (none yet on the first: not speech).
      speech = db >= MIN_SPEECH_DBFS && db >= this.floorDb + SPEECH_OVER_FLOOR_DB;
      this.recordFloor(db);
      if (speech) {
        const level = this.speechDb ?? db;
        this.speechDb =
          db > level ? level + LEVEL_ATTACK * (db - level) : Math.max(db, level - LEVEL_RELEASE_DB);
      }
    }
    let wantedDb = 0;
    if (this.speechDb !== undefined && this.speechDb >= this.floorDb + MIN_SPEECH_OVER_FLOOR_DB)
      wantedDb = Math.max(0, Math.min(TARGET_LEVEL_DBFS - this.speechDb, MAX_GAIN_DB));
    // The gain never rises on noise or silence.
    const upDb = speech ? GAIN_UP_DB : 0;
    this.gainDb += Math.max(-GAIN_DOWN_DB, Math.min(upDb, wantedDb - this.gainDb));
    this.step = (10 ** (this.gainDb / 20) - this.gain) / BLOCK;
  }

  /** The noise floor in dBFS (Infinity before the first non-silent block). */
  private get floorDb(): number {
    return Math.min(...this.spanMinima);
  }

  private recordFloor(blockDb: number): void {
    if (this.spanBlocks === FLOOR_SPAN_BLOCKS) {
      this.span = (this.span + 1) % FLOOR_SPANS;
      this.spanMinima[this.span] = Infinity;
      this.spanBlocks = 0;
    }
    this.spanBlocks++;
    this.spanMinima[this.span] = Math.min(this.spanMinima[this.span]!, blockDb);
  }
}
