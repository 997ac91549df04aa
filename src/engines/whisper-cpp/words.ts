import type { WordTiming } from "../../core/contracts.js";

/** A timed piece of a transcript as whisper.cpp returns it (times in ms from the start of the audio). */
export interface TimedSegment {
  readonly text: string;
  readonly t0: number;
  readonly t1: number;
}

interface CharTime {
  readonly start: number;
  readonly end: number;
}

/**
 * Times every character of the segments' concatenated text. The engine asks whisper.cpp for one segment
 * per token (`maxLen: 1` with token timestamps), so a segment is usually a token; a segment holding
 * several words (a binding or model that only gives segment timings) has its time spread over its
 * visible characters in proportion to their number, which is the best estimate without token times.
 * Whitespace takes no time, so a word starts where its first token starts.
 */
function characterTimes(segments: readonly TimedSegment[]): CharTime[] {
  const times: CharTime[] = [];
  let previous = 0;
  for (const { text, t0, t1 } of segments) {
    const chars = Array.from(text);
    const start = Math.max(t0, previous);
    const end = Math.max(t1, start);
    const visible = chars.filter((c) => /\S/u.test(c)).length;
    let done = 0;
    for (const c of chars) {
      // One entry per UTF-16 code unit, so that string indices map directly.
      const at = visible === 0 ? start : start + ((end - start) * done) / visible;
      const isVisible = /\S/u.test(c);
      if (isVisible) done++;
      const time = { start: at, end: isVisible ? start + ((end - start) * done) / visible : at };
      for (let unit = 0; unit < c.length; unit++) times.push(time);
    }
    previous = end;
  }
  return times;
}

/**
 * Word timings for `text` (the whole transcript) from whisper.cpp's timed segments. Words are the
 * whitespace-separated pieces of `text`, as the pipeline splits them.
 *
 * The segments' texts normally concatenate to `text` exactly. When a token ends inside a multi-byte
 * UTF-8 character (byte-level BPE does that in Chinese, Japanese, emoji…), the addon hands each piece
 * over as U+FFFD and the concatenation differs from `text`, whose bytes were joined before decoding;
 * positions are then mapped proportionally, which stays within a token or two.
 *
 * The result is clamped to [0, durationMs] and made monotonic (each word starts no earlier than the
 * previous one ends).
 */
export function wordTimings(
  text: string,
  segments: readonly TimedSegment[],
  durationMs: number,
): WordTiming[] {
  const matches = [...text.matchAll(/\S+/gu)];
  if (matches.length === 0) return [];
  const timeline = characterTimes(segments.length > 0 ? segments : [{ text, t0: 0, t1: durationMs }]);
  const joinedLength = timeline.length;
  const exact = segments.map((s) => s.text).join("") === text;
  const scale = joinedLength / text.length;
  const entry = (index: number): CharTime =>
    timeline[Math.min(Math.max(index, 0), joinedLength - 1)] ?? { start: 0, end: 0 };
  /** Time span of `text` characters [first, end) on the segments' timeline. */
  const span = (first: number, end: number): { start: number; end: number } => {
    if (exact) return { start: entry(first).start, end: entry(end - 1).end };
    const from = Math.floor(first * scale);
    return { start: entry(from).start, end: entry(Math.max(Math.ceil(end * scale) - 1, from)).end };
  };
  const clamp = (ms: number): number => Math.min(Math.max(ms, 0), durationMs);
  const words: WordTiming[] = [];
  let previousEnd = 0;
  for (const match of matches) {
    const times = span(match.index, match.index + match[0].length);
    const startMs = Math.max(clamp(times.start), previousEnd);
    const endMs = Math.max(clamp(times.end), startMs);
    words.push({ word: match[0], startMs: round(startMs), endMs: round(endMs) });
    previousEnd = endMs;
  }
  return words;
}

function round(ms: number): number {
  return Math.round(ms * 10) / 10;
}

const OPENERS: Readonly<Record<string, string>> = { "[": "]", "(": ")" };

/**
 * Drops whisper's non-speech annotations — "[BLANK_AUDIO]", "[Music]", "(upbeat music)", "♪" — which
 * are not speech and must not be translated or spoken. An annotation spans from a word that
 * opens a bracket to the first word that closes it (trailing punctuation allowed); an unclosed bracket
 * is kept as text.
 */
export function dropAnnotations(words: readonly WordTiming[]): WordTiming[] {
  const kept: WordTiming[] = [];
  for (let i = 0; i < words.length; i++) {
    const word = words[i]!.word;
    if (/^[♪♫♬♩~\-–—.,!?]+$/u.test(word) && /[♪♫♬♩]/u.test(word)) continue;
    const close = OPENERS[word.charAt(0)];
    if (close !== undefined) {
      let end = -1;
      for (let j = i; j < words.length; j++) {
        const candidate = words[j]!.word.replace(/[.,!?;:]+$/u, "");
        if (candidate.endsWith(close) && (j > i || candidate.length > 1)) {
          end = j;
          break;
        }
      }
      if (end >= 0) {
        i = end;
        continue;
      }
    }
    kept.push(words[i]!);
  }
  return kept;
}
