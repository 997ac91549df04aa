/**
 * Resolving a source language of "auto" by listening to the first few segments. Separate from
 * recognition proper: it decides which recogniser the whole file is decoded with, and its rules
 * (voting, the letter-count heuristic) are a policy of their own.
 */
import type { LanguageCode } from "../engines/types.js";
import { UnsupportedLanguageError } from "./errors.js";

/** Segments tried with each candidate recogniser when the source language is "auto". */
const DETECTION_SEGMENTS = 3;

/**
 * Resolves "auto". With a recogniser that identifies languages (whisper.cpp, a remote Whisper),
 * the first few segments are identified and the most frequent candidate language wins; speech
 * identified only as languages that cannot be dubbed into the target is refused
 * (UnsupportedLanguageError) rather than taken for another language. Without one, one candidate (one recogniser language that can
 * reach the target) is the answer without listening, and with several a heuristic stands in for
 * identification: each candidate's recogniser decodes the first few segments, and the language
 * whose recogniser produced the most letters wins (ties: the earlier configured language). A
 * recogniser given speech in another language still emits words from its own vocabulary, so the
 * heuristic separates languages only roughly; callers who know the language should say so (the
 * service refuses "auto" without an identifier).
 */
export async function chooseSourceLanguage(
  candidates: readonly LanguageCode[],
  targetLang: LanguageCode,
  segmentCount: number,
  recognize: (lang: LanguageCode, index: number) => Promise<{ readonly text: string }>,
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
        `the speech was identified as ${[...others].join(", ")}, which cannot be dubbed into "${targetLang}" ` +
          `with the configured engines (possible source languages: ${candidates.join(", ")})`,
      );
    }
  }
  if (candidates.length === 1) return candidates[0]!;
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
