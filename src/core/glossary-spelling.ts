import type { Hypothesis } from "./contracts.js";
import { spellAsGlossary, type Glossary } from "./glossary.js";

/**
 * A recognizer's hypothesis with the glossary's spelling of its terms ("okrs" → "OKRs"), in the text
 * and in the timed words alike (a term keeps its number of words, so they stay aligned).
 */
export function spellHypothesis(hypothesis: Hypothesis, glossary: Glossary): Hypothesis {
  if (glossary.terms.length === 0) return hypothesis;
  const text = spellAsGlossary(hypothesis.text, glossary);
  if (hypothesis.words.length === 0) return text === hypothesis.text ? hypothesis : { ...hypothesis, text };
  const spelled = spellAsGlossary(hypothesis.words.map((word) => word.word).join(" "), glossary).split(" ");
  const words =
    spelled.length === hypothesis.words.length
      ? hypothesis.words.map((word, i) => (spelled[i] === word.word ? word : { ...word, word: spelled[i]! }))
      : hypothesis.words;
  return { ...hypothesis, text, words };
}
