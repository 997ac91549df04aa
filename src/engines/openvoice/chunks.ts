/**
 * Converting a sentence in pieces, so its first audio comes after the first piece's conversion, not
 * the whole sentence's (the converter takes 0.7–0.9 s of 2 cores per second of speech: a 4 s
 * sentence would otherwise wait about 3 s). Each piece is converted with context on both sides — the converter's
 * convolutions and flows see a few hundred milliseconds around each sample — and neighbouring
 * pieces are cross-faded over a short span inside their shared context, so no seam is heard.
 *
 * Hand-written because it is the product's timing: no library splits audio for a model this way.
 */

export interface ChunkPlan {
  /** Samples converted (the piece and its context), [from, to). */
  readonly from: number;
  readonly to: number;
  /** Samples this piece speaks, [start, end): its own span, with the cross-fades at its edges. */
  readonly start: number;
  readonly end: number;
}

export interface ChunkSettings {
  /** The first piece (short: it decides the first audio's latency). */
  readonly first: number;
  /** Every later piece (longer: fewer passes). */
  readonly next: number;
  /** Context converted on each side of a piece. */
  readonly context: number;
  /** Half the cross-fade between neighbouring pieces (≤ context). */
  readonly fade: number;
  /** Piece boundaries fall on multiples of this (the converter's hop). */
  readonly step: number;
}

/**
 * The pieces of `length` samples: boundaries at `first`, then every `next`, a last remainder
 * shorter than half a piece joining the piece before it. Piece k speaks from its boundary − fade
 * (0 for the first) to the next boundary − fade (the end for the last); the 2·fade samples around
 * each inner boundary are spoken by both neighbours and cross-faded.
 */
export function planChunks(length: number, settings: ChunkSettings): ChunkPlan[] {
  const snap = (n: number) => Math.max(settings.step, Math.round(n / settings.step) * settings.step);
  const [first, next] = [snap(settings.first), snap(settings.next)];
  const bounds = [0];
  for (let at = first; at < length; at += next) bounds.push(at);
  if (bounds.length > 1 && length - bounds.at(-1)! < next / 2) bounds.pop();
  bounds.push(length);
  return bounds.slice(0, -1).map((from, k) => {
    const to = bounds[k + 1]!;
    const last = k === bounds.length - 2;
    return {
      from: Math.max(0, from - settings.context),
      to: Math.min(length, to + settings.context),
      start: k === 0 ? 0 : from - settings.fade,
      end: last ? length : to - settings.fade,
    };
  });
}

/**
 * Stitches converted pieces in order: `push` takes a piece's converted samples (for [from, to) of
 * its plan) and returns what can be spoken now, cross-faded with the previous piece's overlap.
 */
export class ChunkStitcher {
  /** The previous piece's output over the cross-fade span at the start of the next piece. */
  private held: Float32Array | undefined;

  constructor(private readonly fade: number) {}

  push(plan: ChunkPlan, next: ChunkPlan | undefined, converted: Float32Array): Float32Array {
    const at = (sample: number) => sample - plan.from;
    const spoken = converted.slice(at(plan.start), at(plan.end));
    const held = this.held;
    if (held) {
      // Linear cross-fade: the previous piece fades out as this one fades in.
      for (let i = 0; i < held.length && i < spoken.length; i++) {
        const weight = (i + 0.5) / held.length;
        spoken[i] = held[i]! * (1 - weight) + spoken[i]! * weight;
      }
    }
    this.held = next ? converted.slice(at(plan.end), at(plan.end + 2 * this.fade)) : undefined;
    return spoken;
  }
}
