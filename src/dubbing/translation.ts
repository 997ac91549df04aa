/**
 * The "translating" stage: each recognized line translated along the chosen route, with its
 * neighbours as context. Separate because it is where recognized speech becomes the job's segments
 * (times rounded to the millisecond, original and translated text), which later stages voice.
 */
import { translateAlong, type TranslationRoute } from "../engines/registry.js";
import { mapLimit } from "./concurrency.js";
import type { Recognized } from "./recognition.js";

export interface DubSegment {
  readonly startSec: number;
  readonly endSec: number;
  readonly text: string;
  readonly translatedText: string;
}

export async function translateAll(
  routes: readonly TranslationRoute[],
  speech: readonly Recognized[],
  options: { onProgress: (fraction: number) => void; signal?: AbortSignal },
): Promise<DubSegment[]> {
  let translatedCount = 0;
  const translations = await mapLimit(
    speech,
    4,
    async (_, i) => {
      const translated = await translateSegment(routes, speech, i);
      options.onProgress(++translatedCount / speech.length);
      return translated;
    },
    options.signal,
  );
  return speech.map((s, i) => ({
    startSec: roundMs(s.startSec),
    endSec: roundMs(s.endSec),
    text: s.text,
    translatedText: translations[i]!,
  }));
}

/** Context for the MT engine: the previous and next segments' texts. */
async function translateSegment(
  routes: readonly TranslationRoute[],
  segments: readonly Recognized[],
  index: number,
): Promise<string> {
  const context = [segments[index - 1]?.text, segments[index + 1]?.text].filter(Boolean).join(" ");
  return (await translateAlong(routes, { text: segments[index]!.text, context })).trim();
}

const roundMs = (seconds: number): number => Math.round(seconds * 1000) / 1000;
