/** Subtitle files (SubRip and WebVTT) from dubbing segments. Lines are not wrapped. */

export interface SubtitleSegment {
  readonly startSec: number;
  readonly endSec: number;
  readonly speaker?: string;
  readonly text: string;
  readonly translatedText: string;
}

export type SubtitleTrack = "original" | "translated";

/** HH:MM:SS<sep>mmm; hours grow past two digits for very long media rather than wrapping. */
function timestamp(seconds: number, separator: "," | "."): string {
  const totalMs = Math.max(0, Math.round(seconds * 1000));
  const ms = totalMs % 1000;
  const totalSec = Math.floor(totalMs / 1000);
  const pad = (value: number, width = 2): string => String(value).padStart(width, "0");
  return `${pad(Math.floor(totalSec / 3600))}:${pad(Math.floor(totalSec / 60) % 60)}:${pad(totalSec % 60)}${separator}${pad(ms, 3)}`;
}

interface Cue {
  readonly start: number;
  readonly end: number;
  readonly speaker: string | undefined;
  readonly text: string;
}

export interface SubtitleOptions {
  /** Name each cue's speaker, where known. */
  readonly speakers?: boolean;
}

/** Cues with text, in time order; a blank line inside a cue would end it, so line breaks collapse. */
function cues(segments: readonly SubtitleSegment[], track: SubtitleTrack): Cue[] {
  return segments
    .map((segment) => ({
      start: segment.startSec,
      // A cue must end after it starts (1 ms at least once rounded).
      end: Math.max(segment.endSec, segment.startSec + 0.001),
      speaker: segment.speaker,
      text: (track === "original" ? segment.text : segment.translatedText).replace(/\s*\n\s*/g, "\n").trim(),
    }))
    .filter((cue) => cue.text !== "")
    .sort((a, b) => a.start - b.start);
}

/** SubRip has no speaker markup: a named speaker opens the cue as "1: ". */
export function toSrt(
  segments: readonly SubtitleSegment[],
  track: SubtitleTrack,
  options: SubtitleOptions = {},
): string {
  return cues(segments, track)
    .map((cue, i) => {
      const text = options.speakers && cue.speaker !== undefined ? `${cue.speaker}: ${cue.text}` : cue.text;
      return `${i + 1}\n${timestamp(cue.start, ",")} --> ${timestamp(cue.end, ",")}\n${text}\n`;
    })
    .join("\n");
}

/** WebVTT cue text is markup: `&`, `<` and `>` are escaped, and "-->" cannot appear. */
function escapeVtt(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/** A named speaker is a WebVTT voice span (`<v 1>…</v>`), which players show or style. */
export function toWebVtt(
  segments: readonly SubtitleSegment[],
  track: SubtitleTrack,
  options: SubtitleOptions = {},
): string {
  const body = cues(segments, track)
    .map((cue) => {
      const text = escapeVtt(cue.text);
      const voiced =
        options.speakers && cue.speaker !== undefined ? `<v ${escapeVtt(cue.speaker)}>${text}</v>` : text;
      return `${timestamp(cue.start, ".")} --> ${timestamp(cue.end, ".")}\n${voiced}\n`;
    })
    .join("\n");
  return body ? `WEBVTT\n\n${body}` : "WEBVTT\n";
}
