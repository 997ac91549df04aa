/**
 * The "recognizing" stage: every speech span decoded from the 16 kHz speech file, after settling the
 * source language when asked for "auto". Separate because it owns the recognizer streams and the
 * cache that keeps spans decoded while choosing the language from being decoded twice.
 */
import type { SessionContext } from "../../core/glossary.js";
import { spellHypothesis } from "../../core/glossary-spelling.js";
import { open, type FileHandle } from "node:fs/promises";
import type { EngineRegistry } from "../../engines/routing/registry.js";
import type { AsrEngine, LanguageCode } from "../../core/contracts.js";
import { mapLimit } from "./concurrency.js";
import { energyOf, type Energy } from "../media/energy.js";
import { chooseSourceLanguage } from "./language-detection.js";
import { readPcm16, SEGMENT_PAD_SEC } from "./segments.js";
import { SPEECH_RATE, type SpeechAudio } from "../media/speech-audio.js";
import type { Span } from "./timeline.js";
import { recognizerFor } from "../../engines/routing/recognizer-choice.js";

/** Audio written to the recognizer per call (1 s). */
const ASR_CHUNK = 16_000;

/** A span to recognize, with the label of its speaker when the speakers were followed. */
export type SpeechSpan = Span & { readonly speaker?: string };

export interface Recognized {
  readonly startSec: number;
  readonly endSec: number;
  readonly speaker?: string;
  readonly text: string;
  /** The language the recognizer heard, when it identifies languages (asked with "auto"). */
  readonly language?: LanguageCode;
  /** The recognizer's confidence in the words (0-1), when it computes one. */
  readonly confidence?: number;
  /** Energy of the span's audio (for matching the dub's level to the original dialogue). */
  readonly energy: Energy;
}

export async function recognizeAll(
  registry: EngineRegistry,
  candidates: readonly LanguageCode[],
  audio: SpeechAudio,
  spans: readonly SpeechSpan[],
  options: {
    concurrency: number;
    targetLang: LanguageCode;
    /** Whether the language is to be found ("auto"), rather than named by the caller. */
    identify: boolean;
    onLanguage: (language: LanguageCode) => void;
    onProgress: (fraction: number) => void;
    context: SessionContext;
    signal?: AbortSignal;
  },
): Promise<{ language: LanguageCode; recognized: Recognized[] }> {
  const pcm = { levelled: await open(audio.levelled, "r"), original: await open(audio.original, "r") };
  try {
    // Segments decoded while choosing the language are not decoded twice.
    const cache = new Map<string, Recognized>();
    const recognize = async (lang: LanguageCode, index: number): Promise<Recognized> => {
      const key = `${lang}:${index}`;
      let result = cache.get(key);
      if (!result) {
        result = await recognizeSpan(
          recognizerFor(registry, lang)!,
          lang,
          pcm,
          spans[index]!,
          options.context,
        );
        cache.set(key, result);
      }
      return result;
    };
    // No candidates: speech in a language that cannot be dubbed is to be refused, not taken for one.
    const identifier = options.identify ? recognizerFor(registry, "auto") : undefined;
    const identify = identifier
      ? async (index: number) =>
          (await recognizeSpan(identifier, "auto", pcm, spans[index]!, options.context)).language
      : undefined;
    // A named language is one candidate, taken as named; "auto" is listened to.
    const language = options.identify
      ? await chooseSourceLanguage(candidates, options.targetLang, spans.length, recognize, identify)
      : candidates[0]!;
    options.onLanguage(language);
    let done = 0;
    const recognized = await mapLimit(
      spans,
      options.concurrency,
      async (_, index) => {
        const result = await recognize(language, index);
        options.onProgress(++done / spans.length);
        return result;
      },
      options.signal,
    );
    return { language, recognized };
  } finally {
    await Promise.all([pcm.levelled.close(), pcm.original.close()]);
  }
}

/**
 * Recognizes one padded span. With word timings the segment is tightened to the words (plus the
 * padding, never beyond the VAD span), which makes subtitles tighter and leaves the following
 * silence to the dub.
 */
async function recognizeSpan(
  asr: AsrEngine,
  language: LanguageCode | "auto",
  pcm: { readonly levelled: FileHandle; readonly original: FileHandle },
  span: SpeechSpan,
  context: SessionContext,
): Promise<Recognized> {
  if (asr.capabilities.sampleRate !== SPEECH_RATE) {
    throw new Error(`${asr.info.id} reads ${asr.capabilities.sampleRate} Hz audio; dubbing feeds 16 kHz`);
  }
  const startSample = Math.floor(span.startSec * SPEECH_RATE);
  const endSample = Math.ceil(span.endSec * SPEECH_RATE);
  // Heard levelled; the energy is the original dialogue's, which the dub's level follows.
  const audio = await readPcm16(pcm.levelled, startSample, endSample);
  const stream = await asr.createStream({ language, context: context.text, glossary: context.glossary });
  let hypothesis;
  try {
    for (let i = 0; i < audio.length; i += ASR_CHUNK) await stream.write(audio.subarray(i, i + ASR_CHUNK));
    hypothesis = spellHypothesis(await stream.finish(), context.glossary);
  } catch (error) {
    stream.abort();
    throw error;
  }
  const text = hypothesis.text.trim();
  const first = hypothesis.words[0];
  const last = hypothesis.words.at(-1);
  const origin = startSample / SPEECH_RATE;
  let startSec = span.startSec;
  let endSec = span.endSec;
  if (first && last) {
    const wordStart = Math.max(span.startSec, origin + first.startMs / 1000 - SEGMENT_PAD_SEC);
    const wordEnd = Math.min(span.endSec, origin + last.endMs / 1000 + SEGMENT_PAD_SEC);
    if (wordEnd > wordStart) [startSec, endSec] = [wordStart, wordEnd];
  }
  return {
    startSec,
    endSec,
    ...(span.speaker !== undefined ? { speaker: span.speaker } : {}),
    text,
    ...(hypothesis.language ? { language: hypothesis.language } : {}),
    ...(hypothesis.confidence !== undefined ? { confidence: hypothesis.confidence } : {}),
    energy: energyOf(await readPcm16(pcm.original, startSample, endSample), 1 / 32768),
  };
}
