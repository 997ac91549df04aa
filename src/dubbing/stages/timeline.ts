/**
 * Pure timing decisions of the dub: where each dubbed clip plays, how much it is time-compressed
 * or stretched, when it is cut, and where the original audio is ducked. No I/O here.
 */

export interface FitOptions {
  /** Compression applied before a clip may run into the following silence (speech still sounds natural). */
  readonly maxNaturalTempo: number;
  /** Hard bound on compression; beyond it the clip is trimmed. */
  readonly maxTempo: number;
  /** Shorter clips are slowed at most this far to fill their segment, otherwise they just end early. */
  readonly minTempo: number;
  /** Fade applied over the end of a trimmed clip so the cut does not click. */
  readonly trimFadeSec: number;
}

export const DEFAULT_FIT_OPTIONS: FitOptions = {
  maxNaturalTempo: 1.3,
  maxTempo: 1.6,
  minTempo: 0.9,
  trimFadeSec: 0.06,
};

/** Tempo changes closer to 1 than this are not worth a pass through the time-stretcher. */
const TEMPO_SNAP = 0.01;

export interface SlotInput {
  /** The original speech segment. */
  readonly startSec: number;
  readonly endSec: number;
  /** Length of the dubbed clip at its natural speed. */
  readonly clipSec: number;
}

/**
 * How a clip is fitted:
 * - "natural": fits in the segment (possibly slowed down, at most to `minTempo`);
 * - "compressed": sped up (≤ `maxNaturalTempo`) to fit the segment;
 * - "overflow": sped up to `maxNaturalTempo` and running into the silence after the segment;
 * - "overflow-compressed": sped up beyond `maxNaturalTempo` (≤ `maxTempo`) to fit up to the next segment;
 * - "trimmed": even at `maxTempo` it would not fit, so it is cut at the next segment (with a fade).
 */
export type FitStrategy = "natural" | "compressed" | "overflow" | "overflow-compressed" | "trimmed";

export interface ClipPlacement {
  readonly startSec: number;
  /** The latest end allowed: the next segment's start, or the end of the media. */
  readonly slotEndSec: number;
  /** Playback speed factor (ffmpeg `atempo`): > 1 is faster/shorter, < 1 slower/longer. */
  readonly tempo: number;
  /** Length played after the tempo change (and the trim); never beyond `slotEndSec`. */
  readonly durationSec: number;
  readonly trimmed: boolean;
  /** Fade at the end of the played part (0 unless trimmed). */
  readonly fadeOutSec: number;
  readonly strategy: FitStrategy;
}

/** Fits one clip into [startSec, slotEndSec). The slot is the segment plus the silence after it. */
export function fitClip(
  input: SlotInput,
  slotEndSec: number,
  options: FitOptions = DEFAULT_FIT_OPTIONS,
): ClipPlacement {
  const { startSec, clipSec } = input;
  const slot = Math.max(0, slotEndSec - startSec);
  const natural = Math.min(slot, Math.max(0, input.endSec - startSec));
  const place = (tempo: number, durationSec: number, strategy: FitStrategy): ClipPlacement => {
    const trimmed = strategy === "trimmed";
    return {
      startSec,
      slotEndSec,
      tempo,
      durationSec: Math.min(durationSec, slot),
      trimmed,
      fadeOutSec: trimmed ? Math.min(options.trimFadeSec, slot) : 0,
      strategy,
    };
  };
  if (clipSec <= 0) return place(1, 0, "natural");

  // Tempo that makes the clip exactly as long as the original segment.
  const toNatural = natural > 0 ? clipSec / natural : Infinity;
  if (toNatural <= 1) {
    let tempo = Math.max(options.minTempo, toNatural);
    if (tempo > 1 - TEMPO_SNAP) tempo = 1;
    return place(tempo, clipSec / tempo, "natural");
  }
  if (toNatural <= options.maxNaturalTempo) return place(toNatural, natural, "compressed");

  // At the natural bound it is still longer than the segment: let it run into the following silence.
  if (clipSec / options.maxNaturalTempo <= slot) {
    return place(options.maxNaturalTempo, clipSec / options.maxNaturalTempo, "overflow");
  }
  const toSlot = slot > 0 ? clipSec / slot : Infinity;
  if (toSlot <= options.maxTempo) return place(toSlot, slot, "overflow-compressed");
  return place(options.maxTempo, slot, "trimmed");
}

/**
 * Fits every clip. `inputs` are the speech segments in time order (non-overlapping starts); each
 * clip may use the time up to the next segment's start, so two dubbed clips never overlap.
 */
export function fitTimeline(
  inputs: readonly SlotInput[],
  mediaDurationSec: number,
  options: FitOptions = DEFAULT_FIT_OPTIONS,
): ClipPlacement[] {
  return inputs.map((input, i) => {
    const next = inputs[i + 1];
    if (next && next.startSec < input.startSec) throw new Error("segments must be in time order");
    return fitClip(input, next ? next.startSec : Math.max(input.startSec, mediaDurationSec), options);
  });
}

// ---------------------------------------------------------------- ducking

export interface Span {
  readonly startSec: number;
  readonly endSec: number;
}

export interface DuckOptions {
  /** Gain applied to the original under dubbed speech, in dB (negative). */
  readonly gainDb: number;
  /** Length of the linear ramps before and after each ducked span. */
  readonly rampSec: number;
}

export const DEFAULT_DUCK_OPTIONS: DuckOptions = { gainDb: -15, rampSec: 0.08 };

/**
 * Sorted, merged spans. Spans closer than `minGapSec` are joined, so the original does not pop
 * back up for a moment between two dubbed clips (and the ramps of neighbours never overlap).
 */
export function mergeSpans(spans: readonly Span[], minGapSec: number): Span[] {
  const sorted = spans.filter((s) => s.endSec > s.startSec).sort((a, b) => a.startSec - b.startSec);
  const merged: { startSec: number; endSec: number }[] = [];
  for (const span of sorted) {
    const last = merged.at(-1);
    if (last && span.startSec - last.endSec < minGapSec) last.endSec = Math.max(last.endSec, span.endSec);
    else merged.push({ startSec: span.startSec, endSec: span.endSec });
  }
  return merged;
}

/** The ducking gain at time t for already merged spans (the reference for `duckingExpression`). */
export function duckingGain(
  spans: readonly Span[],
  t: number,
  options: DuckOptions = DEFAULT_DUCK_OPTIONS,
): number {
  const depth = 1 - 10 ** (options.gainDb / 20);
  let amount = 0;
  for (const { startSec, endSec } of spans) {
    // Trapezoid: 0 before start - ramp, 1 over [start, end], 0 after end + ramp.
    const a = startSec - options.rampSec;
    const b = endSec + options.rampSec;
    amount += Math.min(1, Math.max(0, Math.min(t - a, b - t) / options.rampSec));
  }
  return 1 - depth * Math.min(1, amount);
}

const num = (value: number): string => String(Math.round(value * 1000) / 1000);
/** `t - a` without a double minus when a is negative (a span starting within one ramp of 0). */
const minusConstant = (a: number): string => (a >= 0 ? `t-${num(a)}` : `t+${num(-a)}`);

/**
 * An ffmpeg expression (for `volume=volume='…':eval=frame`, variable `t` in seconds) that equals
 * `duckingGain` of the merged spans. Returns "1" without spans. When the expression would be longer
 * than `maxLength` (one argument of a process is limited to 128 KiB on Linux), spans are merged over
 * ever larger gaps until it fits: the original is then ducked through short pauses as well.
 */
export function duckingExpression(
  spans: readonly Span[],
  options: DuckOptions = DEFAULT_DUCK_OPTIONS,
  maxLength = 100_000,
): { expression: string; spans: Span[] } {
  let minGap = 2 * options.rampSec;
  for (;;) {
    const merged = mergeSpans(spans, minGap);
    if (merged.length === 0) return { expression: "1", spans: merged };
    const slope = num(1 / options.rampSec);
    const terms = merged.map(
      (s) =>
        `clip(min(${minusConstant(s.startSec - options.rampSec)},${num(s.endSec + options.rampSec)}-t)*${slope},0,1)`,
    );
    const depth = (1 - 10 ** (options.gainDb / 20)).toFixed(6);
    const expression = `1-${depth}*min(1,${terms.join("+")})`;
    if (expression.length <= maxLength) return { expression, spans: merged };
    minGap *= 2;
  }
}
