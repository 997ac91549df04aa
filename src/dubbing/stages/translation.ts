/**
 * The "translating" stage: each recognized line translated along the routes of src/engines/routing/translator.ts, with
 * the lines before it as history. Separate because it is where recognized speech becomes the job's segments
 * (times rounded to the millisecond, original and translated text), which later stages voice.
 */
import type { SessionContext } from "../../core/glossary.js";
import type { LanguageCode } from "../../core/contracts.js";
import { TranslationHistory } from "../../core/translation-history.js";
import { type Translator } from "../../engines/routing/translator.js";
import type { Recognized } from "./recognition.js";

export interface DubSegment {
  readonly startSec: number;
  readonly endSec: number;
  /** Its speaker's label ("1", "2", …), the same for all of one person's lines. */
  readonly speaker?: string;
  readonly text: string;
  readonly translatedText: string;
  /** The library voice that dubs it (set once voices are chosen). */
  readonly voiceId?: number;
}

/**
 * Lines are translated in order, each with the lines before it and their translations as history:
 * the context policy of live sessions (src/core/translation-history.ts), so an engine that uses
 * context gets the same kind of context whichever surface calls it.
 */
export async function translateAll(
  translator: Translator,
  language: LanguageCode,
  speech: readonly Recognized[],
  options: {
    onProgress: (fraction: number) => void;
    context: SessionContext;
    signal?: AbortSignal;
    account?: string;
  },
): Promise<DubSegment[]> {
  const history = new TranslationHistory();
  const segments: DubSegment[] = [];
  for (const [i, line] of speech.entries()) {
    options.signal?.throwIfAborted();
    const call = {
      from: language,
      text: line.text,
      context: options.context.text,
      glossary: options.context.glossary,
      previous: history.recent,
      ...(options.account === undefined ? {} : { account: options.account }),
    };
    const translatedText = (await translator.translate(call, options.signal)).trim();
    history.record(line.text, translatedText);
    segments.push({
      startSec: roundMs(line.startSec),
      endSec: roundMs(line.endSec),
      ...(line.speaker !== undefined ? { speaker: line.speaker } : {}),
      text: line.text,
      translatedText,
    });
    options.onProgress((i + 1) / speech.length);
  }
  return segments;
}

const roundMs = (seconds: number): number => Math.round(seconds * 1000) / 1000;
