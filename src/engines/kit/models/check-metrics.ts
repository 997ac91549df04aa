/**
 * The scores `relay models check` (src/cli/models-check.ts) measures installed models with, and the
 * limits it holds them to: word error rate for the voice → recognizer round trip, chrF for
 * translation, each compared with what the model's publishers report.
 *
 * The limits catch a model that is broken (a damaged or wrong file, a wrong language, a wiring
 * fault such as a wrong sample rate), not one that is a few points worse than published: the check
 * runs a few sentences, not a test set, and on text other than the published figures'.
 */

/** A published score of a translation direction (a catalogue entry states them; `check` compares). */
export interface MtQuality {
  /** "en-es". */
  readonly direction: string;
  readonly metric: "BLEU" | "chrF" | "COMET";
  readonly value: number;
  readonly testSet: string;
  /** URL. */
  readonly source: string;
}

/** Words of a transcript for scoring: lower case, no punctuation ("Don't stop." → don't, stop). */
export function scoringWords(text: string): string[] {
  return text
    .normalize("NFKC")
    .toLowerCase()
    .replace(/[‘’ʼ]/gu, "'")
    .replace(/[^\p{L}\p{N}\p{M}']+/gu, " ")
    .split(" ")
    .map((word) => word.replace(/^'+|'+$/gu, ""))
    .filter(Boolean);
}

/** Substitutions + deletions + insertions turning `reference` into `hypothesis` (word lists). */
export function wordEdits(reference: readonly string[], hypothesis: readonly string[]): number {
  return prefixWordEdits(reference, hypothesis).at(-1)!;
}

/**
 * The edits turning `reference` into each prefix of `hypothesis`: entry j is for hypothesis[0..j).
 * The first `freeLeading` words of the hypothesis may be left unmatched at no cost (the whisper
 * streaming policy's decode may hear the end of a word before the words it aligns on).
 */
export function prefixWordEdits(
  reference: readonly string[],
  hypothesis: readonly string[],
  freeLeading = 0,
): number[] {
  const row = Array.from({ length: hypothesis.length + 1 }, (_, j) => Math.max(0, j - freeLeading));
  for (let i = 1; i <= reference.length; i++) {
    let diagonal = row[0]!;
    row[0] = i;
    for (let j = 1; j <= hypothesis.length; j++) {
      const above = row[j]!;
      row[j] = Math.min(
        above + 1,
        row[j - 1]! + 1,
        diagonal + (reference[i - 1] === hypothesis[j - 1] ? 0 : 1),
      );
      diagonal = above;
    }
  }
  return row;
}

/**
 * Corpus word error rate in percent: every sentence's edits over every reference word (so a long
 * sentence weighs more, as in the published LibriSpeech figures). Above 100 when the hypotheses
 * insert more words than the references have.
 */
export function wordErrorRate(references: readonly string[], hypotheses: readonly string[]): number {
  if (references.length !== hypotheses.length) throw new Error("as many hypotheses as references");
  let edits = 0;
  let words = 0;
  references.forEach((reference, i) => {
    const wanted = scoringWords(reference);
    edits += wordEdits(wanted, scoringWords(hypotheses[i]!));
    words += wanted.length;
  });
  return words === 0 ? 0 : (100 * edits) / words;
}

/** chrF's character n-gram orders (1 to 6) and β (recall weighs β² = 4 times precision): chrF2. */
const CHRF_ORDER = 6;
const CHRF_BETA = 2;

/** Each order's n-gram counts of one text, whitespace removed, by Unicode code point. */
function charNgrams(text: string): Map<string, number>[] {
  const chars = Array.from(text.replace(/\s+/gu, ""));
  return Array.from({ length: CHRF_ORDER }, (_, i) => {
    const n = i + 1;
    const counts = new Map<string, number>();
    for (let start = 0; start + n <= chars.length; start++) {
      const gram = chars.slice(start, start + n).join("");
      counts.set(gram, (counts.get(gram) ?? 0) + 1);
    }
    return counts;
  });
}

/**
 * Corpus chrF2 on a 0–100 scale, as sacrebleu computes it by default (`sacrebleu -m chrf`, version
 * 2: char order 6, word order 0, β 2, case kept, whitespace removed, no epsilon smoothing). Written
 * here rather than taken from a library; test/unit/check-metrics.test.ts checks it against
 * sacrebleu's own published examples and worked cases.
 *
 * 1. Each sentence: remove all whitespace, then count the character n-grams of each order n = 1…6
 *    in hypothesis and reference; the matches of an order are Σ min(hypothesis count, reference
 *    count) over its n-grams.
 * 2. Corpus: add up, per order, the hypothesis n-grams, reference n-grams and matches of every
 *    sentence (the sums are not per-sentence averages).
 * 3. Per order with n-grams on both sides: precision = matches / hypothesis n-grams, recall =
 *    matches / reference n-grams. Average precision and recall over those orders (an order neither
 *    side is long enough for does not count).
 * 4. chrF = (1 + β²)·P·R / (β²·P + R), × 100; 0 when P + R = 0.
 */
export function chrF(references: readonly string[], hypotheses: readonly string[]): number {
  if (references.length !== hypotheses.length) throw new Error("as many hypotheses as references");
  const totals = Array.from({ length: CHRF_ORDER }, () => ({ hypothesis: 0, reference: 0, matches: 0 }));
  references.forEach((reference, i) => {
    const wanted = charNgrams(reference);
    const got = charNgrams(hypotheses[i]!);
    for (let order = 0; order < CHRF_ORDER; order++) {
      const total = totals[order]!;
      for (const [gram, count] of got[order]!) {
        total.hypothesis += count;
        total.matches += Math.min(count, wanted[order]!.get(gram) ?? 0);
      }
      for (const count of wanted[order]!.values()) total.reference += count;
    }
  });
  let precision = 0;
  let recall = 0;
  let orders = 0;
  for (const { hypothesis, reference, matches } of totals) {
    if (hypothesis === 0 || reference === 0) continue;
    precision += matches / hypothesis;
    recall += matches / reference;
    orders++;
  }
  if (orders === 0) return 0;
  precision /= orders;
  recall /= orders;
  if (precision + recall === 0) return 0;
  const beta2 = CHRF_BETA ** 2;
  return (100 * (1 + beta2) * precision * recall) / (beta2 * precision + recall);
}

/** A recognizer's published word error rates (%), on LibriSpeech's two test sets. */
export interface PublishedWer {
  readonly testClean: number;
  readonly testOther: number;
  readonly source: string;
}

/**
 * Published WER of the streaming recognizers, by catalogue name: the figures the catalogue's
 * description quotes (src/engines/sherpa-onnx/catalogue.ts; a unit test keeps the two in step).
 */
export const PUBLISHED_WER: Readonly<Record<string, PublishedWer>> = {
  "streaming-zipformer-en": {
    testClean: 3.1,
    testOther: 7.8,
    source: "LibriSpeech test-clean / test-other, as src/engines/sherpa-onnx/catalogue.ts states them",
  },
};

/**
 * Round trips measured on real weights, for a recognizer the check may use whose LibriSpeech
 * test-other figure it has no source for: whisper base, the default model, which hears the voices
 * when no streaming recognizer is pulled.
 */
export const MEASURED_ROUND_TRIP_WER: Readonly<
  Record<string, { readonly wer: number; readonly source: string }>
> = {
  "whisper base": {
    wer: 4.0,
    source:
      "piper-en_US-joe-medium read back by whisper base on data/check/speech-en.txt, both real weights: " +
      "1.3–4.0 % over runs (VITS's noise), the highest taken (test/integration/piper-voice-real.test.ts, 2026-12-02)",
  },
};

/**
 * The limit from a measured round trip: 2 × its WER + 15 points (23 % for 4.0 %). A dozen
 * sentences move a real voice's figure by a few points; a broken voice is far above it.
 */
export function measuredWerLimit(measured: { readonly wer: number }): number {
  return 2 * measured.wer + 15;
}

/**
 * The round trip's WER limit: 3 × the published test-other WER + 10 points (33.4 % for 7.8 %).
 * Test-other rather than test-clean because the round trip stacks the voice's errors (a word said
 * unclearly, a word stressed oddly) on the recognizer's, and synthetic speech is outside the
 * recognizer's LibriSpeech training; × 3 + 10 leaves room for that and for a dozen sentences'
 * noise, while a broken voice or recognizer (noise, wrong language, wrong sample rate) is far above
 * it, at 80–100 % and more.
 */
export function werLimit(published: PublishedWer): number {
  return 3 * published.testOther + 10;
}

/** The lowest chrF a translation direction passes with, and why. */
export interface ChrfFloor {
  readonly floor: number;
  /** Where the floor comes from, for the table's notes. */
  readonly basis: string;
}

/** Points below a published chrF that still pass. */
const BELOW_PUBLISHED_CHRF = 15;
/** Points the translation must beat the untranslated source by. */
const ABOVE_UNTRANSLATED = 10;
/** Target languages written without spaces: BLEU there is not on words, and may exceed chrF. */
const UNSPACED_TARGETS = new Set(["ja", "ko", "zh"]);

/**
 * The chrF floor of one direction (`"en-es"`) of a model, from the figures its catalogue entry
 * publishes and `untranslatedChrf`, the chrF the untranslated source text itself scores against the
 * references (names, numbers and cognates match across languages):
 *
 * - chrF published for the direction: that chrF − 15 (sacrebleu 1.x printed chrF on a 0–1 scale:
 *   a published value ≤ 1 is read as a fraction);
 * - only BLEU published (FLORES-101 devtest preferred, the benchmark the shipped sentences come
 *   from): chrF ≥ that BLEU. chrF is well above BLEU for a target written with spaces — 20 to 30
 *   points on FLORES (Apertium en→es: BLEU 12.0, chrF 44.1; neural en→es ≈ BLEU 27, chrF 55) — so a
 *   chrF below the published BLEU is 20 points or more below what the model should score: a
 *   conservative floor. Not applied to ja, ko, zh targets, whose BLEU is on characters or morphemes;
 * - in every case, at least the untranslated source's chrF + 10: a model that does no better than
 *   leaving the text as it is (an echo, the wrong target language) is broken even where nothing is
 *   published.
 */
export function chrfFloor(
  quality: readonly MtQuality[],
  direction: string,
  untranslatedChrf: number,
): ChrfFloor {
  const own = quality.filter((q) => q.direction === direction);
  const copyFloor = untranslatedChrf + ABOVE_UNTRANSLATED;
  const copyBasis = `untranslated source ${untranslatedChrf.toFixed(1)} + ${ABOVE_UNTRANSLATED}`;
  const withCopy = (floor: number, basis: string): ChrfFloor =>
    copyFloor > floor ? { floor: copyFloor, basis: copyBasis } : { floor, basis };
  const chrf = own.find((q) => q.metric === "chrF");
  if (chrf) {
    const value = chrf.value <= 1 ? chrf.value * 100 : chrf.value;
    return withCopy(
      value - BELOW_PUBLISHED_CHRF,
      `published chrF ${value.toFixed(1)} (${chrf.testSet}) − ${BELOW_PUBLISHED_CHRF}`,
    );
  }
  const target = direction.split("-")[1] ?? "";
  const bleus = own.filter((q) => q.metric === "BLEU");
  const bleu = bleus.find((q) => q.testSet.startsWith("FLORES")) ?? bleus[0];
  if (bleu && !UNSPACED_TARGETS.has(target)) {
    return withCopy(bleu.value, `only BLEU published: chrF ≥ BLEU ${bleu.value} (${bleu.testSet})`);
  }
  return {
    floor: copyFloor,
    basis: `${bleu ? "only BLEU published, not comparable for this script" : "nothing published"}: ${copyBasis}`,
  };
}
