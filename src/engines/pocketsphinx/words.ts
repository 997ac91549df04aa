import type { Hypothesis, WordTiming } from "../../core/contracts.js";

/** PocketSphinx computes one feature frame every 10 ms (`-frate 100`). */
export const FRAME_MS = 10;

/** One segment of the decoder's word segmentation, frames inclusive (as `ps_seg_frames` reports them). */
export interface Segment {
  readonly word: string;
  readonly startFrame: number;
  readonly endFrame: number;
  /** Posterior probability of the word (0-1); 1 where the search kept no lattice. */
  readonly posterior?: number;
}

/**
 * Sentence markers (`<s>`, `</s>`, `<sil>`), noise words (`[NOISE]`, `++BREATH++`) and the empty `<null>`
 * are search artefacts, not speech.
 */
export function isFiller(word: string): boolean {
  return word === "" || word.startsWith("<") || word.startsWith("[") || word.startsWith("+");
}

/** Drops the alternate-pronunciation suffix the dictionary adds to variants ("the(2)" → "the"). */
export function baseWord(word: string): string {
  return word.replace(/\(\d+\)$/, "");
}

/** Words of a hypothesis string without fillers or pronunciation suffixes. */
export function cleanText(hyp: string | null): string {
  if (hyp === null) return "";
  return hyp
    .split(/\s+/)
    .filter((word) => !isFiller(word))
    .map(baseWord)
    .join(" ");
}

/**
 * Converts a segmentation to word timings in ms from the first sample of the utterance. Frames are
 * inclusive, so a word ends where its last frame ends; times are clamped to the audio actually written
 * because the last frame may extend past it.
 */
export function segmentsToWords(segments: readonly Segment[], durationMs: number): WordTiming[] {
  const words: WordTiming[] = [];
  let previousEnd = 0;
  for (const segment of segments) {
    if (isFiller(segment.word)) continue;
    const endMs = Math.min(durationMs, (segment.endFrame + 1) * FRAME_MS);
    const startMs = Math.min(endMs, Math.max(previousEnd, segment.startFrame * FRAME_MS));
    words.push({ word: baseWord(segment.word), startMs, endMs });
    previousEnd = endMs;
  }
  return words;
}

/**
 * Builds a hypothesis whose text always matches its words: the segmentation and `ps_get_hyp` come from
 * the same search, but only the hypothesis string is available when no segmentation is.
 */
export function toHypothesis(
  hyp: string | null,
  segments: readonly Segment[],
  durationMs: number,
): Hypothesis {
  const words = segmentsToWords(segments, durationMs);
  if (words.length === 0) return { text: cleanText(hyp), words };
  return { text: words.map((w) => w.word).join(" "), words, ...confidenceOf(segments) };
}

/** The mean posterior of the words (not fillers), when the decoder reported posteriors. */
function confidenceOf(segments: readonly Segment[]): { confidence?: number } {
  const posteriors = segments.filter((s) => !isFiller(s.word)).map((s) => s.posterior);
  if (posteriors.length === 0 || posteriors.some((p) => p === undefined)) return {};
  return { confidence: posteriors.reduce((sum: number, p) => sum + p!, 0) / posteriors.length };
}
