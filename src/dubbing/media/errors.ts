/**
 * Errors of the dubbing pipeline. The input-related ones are typed so a caller can tell "the
 * customer's file cannot be dubbed" (a client error) from an internal failure.
 */

/** The input is not media ffmpeg can read, or it lacks what dubbing needs (an audio track). */
export class UnsupportedFormatError extends Error {
  override readonly name = "UnsupportedFormatError";
}

export class MediaTooShortError extends Error {
  override readonly name = "MediaTooShortError";
  constructor(
    readonly durationSec: number,
    readonly minDurationSec: number,
  ) {
    super(`the input is ${durationSec.toFixed(2)} s long; dubbing needs at least ${minDurationSec} s`);
  }
}

export class MediaTooLongError extends Error {
  override readonly name = "MediaTooLongError";
  constructor(
    readonly durationSec: number,
    readonly maxDurationSec: number,
  ) {
    super(`the input is ${durationSec.toFixed(1)} s long; the limit is ${maxDurationSec} s`);
  }
}

/** An ffmpeg/ffprobe run failed; `stderrTail` holds the end of what the program reported. */
export class MediaToolError extends Error {
  override readonly name = "MediaToolError";
  constructor(
    message: string,
    readonly program: string,
    readonly exitCode: number | null,
    readonly stderrTail: string,
  ) {
    super(stderrTail ? `${message}: ${stderrTail}` : message);
  }
}

/** The configured engines cannot serve the requested languages (no recognizer, route or voice). */
export class UnsupportedLanguageError extends Error {
  override readonly name = "UnsupportedLanguageError";
}

/**
 * `text` with every absolute file path (plain or `file:`) cut to its last component, for messages
 * that leave the server: ffmpeg and system errors quote the paths of the work files they touched.
 * URLs are left alone (their path follows a host, not a separator at a word's start).
 */
export function withoutPaths(text: string): string {
  return text.replace(/(?<=^|[\s'"`(=,[])(?:file:)?(?:\/[^\s/'"`),\]]+)+\/?/gu, (found) => {
    const last = found.replace(/\/$/u, "").split("/").at(-1);
    return last ?? "";
  });
}
