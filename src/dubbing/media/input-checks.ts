/**
 * What makes an input dubbable, checked before any work: a plain media container with an audio
 * track, long enough to dub. Separate so callers can refuse an input early with the same rules the
 * pipeline applies.
 */
import { MediaTooLongError, MediaTooShortError, UnsupportedFormatError } from "./errors.js";
import { isAcceptedFormat, type MediaInfo } from "./ffmpeg.js";

/** Shorter inputs are refused: there is nothing meaningful to dub. */
export const MIN_INPUT_DURATION_SEC = 1;

/** For callers that limit input length (the pipeline itself has no maximum). */
export function assertDurationWithin(durationSec: number, maxDurationSec: number): void {
  if (durationSec > maxDurationSec) throw new MediaTooLongError(durationSec, maxDurationSec);
}

/**
 * Checks what `dubMedia` checks first: a plain media container (see `isAcceptedFormat`), an audio
 * track and at least `MIN_INPUT_DURATION_SEC`.
 */
export function assertDubbable(info: MediaInfo): void {
  if (!isAcceptedFormat(info.formatName)) {
    throw new UnsupportedFormatError(`the input's format (${info.formatName}) is not accepted for dubbing`);
  }
  if (!info.hasAudio) throw new UnsupportedFormatError("the input has no audio track");
  if (info.durationSec < MIN_INPUT_DURATION_SEC) {
    throw new MediaTooShortError(info.durationSec, MIN_INPUT_DURATION_SEC);
  }
}
