/**
 * Resolving a source language of "auto" by listening to the first few segments. Separate from
 * recognition proper: it decides which recognizer the whole file is decoded with, and its rules
 * (voting, the confidence check, the letter-count heuristic) are a policy of their own.
 */
import type { LanguageCode } from "../../core/contracts.js";
import { UnsupportedLanguageError } from "../media/errors.js";

/** Segments tried with each candidate recognizer when the source language is "auto". */
const DETECTION_SEGMENTS = 3;

/**
 * Below this mean word confidence (the recognizer's posterior, pooled over the sampled segments)
 * speech is taken not to be in the only language the recognizers know. The score separates
 * languages poorly: through this pipeline PocketSphinx en-us scores English clips 0.35-0.86 and
 * German, French, Spanish, Portuguese and Mandarin clips 0.24-0.59 (`npm run bench:language-check`,
 * docs/benchmarks.md), so the threshold sits under every English clip (English is never refused)
 * and catches only speech the recognizer evidently cannot follow; the rest is dubbed as English.
 */
export const MIN_CONFIDENCE = 0.3;

/** What the language check reads of a recognized segment. */
export interface Heard {
  readonly text: string;
  /** The recognizer's confidence in the words (0-1), when it computes one. */
  readonly confidence?: number;
}

/**
 * Resolves "auto". With a recognizer that identifies languages (whisper.cpp, a remote Whisper),
 * the first few segments are identified and the most frequent candidate language wins; speech
 * identified only as languages that cannot be dubbed into the target is refused
 * (UnsupportedLanguageError) rather than taken for another language. Without one, a single
 * candidate (recognizers of one language) is checked: its recognizer's confidence over the first
 * few segments must reach MIN_CONFIDENCE, or the speech is evidently in another language and is
 * refused, never dubbed from garbage. With several candidates a heuristic stands in for
 * identification: each candidate's recognizer decodes the first few segments, and the language
 * whose recognizer produced the most letters wins (ties: the earlier configured language).
 */
export async function chooseSourceLanguage(
  candidates: readonly LanguageCode[],
  targetLang: LanguageCode,
  segmentCount: number,
  recognize: (lang: LanguageCode, index: number) => Promise<Heard>,
  identify: ((index: number) => Promise<LanguageCode | undefined>) | undefined,
): Promise<LanguageCode> {
  if (segmentCount === 0) return candidates[0]!;
  const sampled = Math.min(DETECTION_SEGMENTS, segmentCount);
  if (identify) {
    const votes = new Map<LanguageCode, number>();
    const others = new Set<LanguageCode>();
    for (let i = 0; i < sampled; i++) {
      const heard = await identify(i);
      if (heard && candidates.includes(heard)) votes.set(heard, (votes.get(heard) ?? 0) + 1);
      else if (heard) others.add(heard);
    }
    const [winner] = [...votes].sort((a, b) => b[1] - a[1]);
    if (winner) return winner[0];
    if (others.size > 0) {
      throw new UnsupportedLanguageError(
        `the speech was identified as ${[...others].join(", ")}, which cannot be ` +
          `dubbed into "${targetLang}" with the configured engines (possible source languages: ${candidates.join(", ")})`,
      );
    }
  }
  if (candidates.length === 1) {
    const only = candidates[0]!;
    if (!identify) {
      const heard: Heard[] = [];
      for (let i = 0; i < sampled; i++) heard.push(await recognize(only, i));
      const confidence = pooledConfidence(heard);
      if (confidence !== undefined && confidence < MIN_CONFIDENCE) {
        throw new UnsupportedLanguageError(
          `source_lang "auto" was taken to be "${only}", the only language the ` +
            `configured recognizers know, but the speech does not sound like it (confidence ` +
            `${confidence.toFixed(2)}, below ${MIN_CONFIDENCE}); name the spoken language in source_lang ` +
            `if this server can recognize it, or add a recognizer that identifies languages ` +
            `(e.g. the whisper.cpp model: npx relay models pull base)`,
        );
      }
    }
    return only;
  }
  let best = candidates[0]!;
  let bestScore = -1;
  for (const lang of candidates) {
    let score = 0;
    for (let i = 0; i < sampled; i++) {
      score += (await recognize(lang, i)).text.replace(/[^\p{L}]/gu, "").length;
    }
    if (score > bestScore) [best, bestScore] = [lang, score];
  }
  return best;
}

/**
 * The mean confidence of the segments' words, each segment weighted by its word count; undefined
 * when no segment with words has a confidence (nothing to judge by: the language is not refused).
 */
export function pooledConfidence(heard: readonly Heard[]): number | undefined {
  let words = 0;
  let sum = 0;
  for (const { text, confidence } of heard) {
    const count = text.split(/\s+/u).filter(Boolean).length;
    if (confidence === undefined || count === 0) continue;
    words += count;
    sum += confidence * count;
  }
  return words > 0 ? sum / words : undefined;
}
