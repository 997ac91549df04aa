/** The dubbing media pipeline as a library (no HTTP, no storage): see `dubMedia`. */
export { dubMedia, type DubOptions, type DubResult } from "./stages/dub.js";
export { DUB_SAMPLE_RATE } from "./stages/synthesis.js";
export { assertDubbable, assertDurationWithin, MIN_INPUT_DURATION_SEC } from "./media/input-checks.js";
export { DUB_STAGES, overallProgress, type DubStage } from "./stages/progress.js";
export { type DubSegment } from "./stages/translation.js";
export {
  MediaTooLongError,
  MediaTooShortError,
  MediaToolError,
  UnsupportedFormatError,
  UnsupportedLanguageError,
} from "./media/errors.js";
export {
  isAcceptedFormat,
  mediaBinaries,
  probe,
  runFfmpeg,
  runFfprobe,
  setMediaBinaries,
  type MediaBinaries,
  type MediaInfo,
} from "./media/ffmpeg.js";
export { toSrt, toWebVtt, type SubtitleSegment, type SubtitleTrack } from "./stages/subtitles.js";
export {
  DEFAULT_DUCK_OPTIONS,
  DEFAULT_FIT_OPTIONS,
  fitClip,
  fitTimeline,
  type ClipPlacement,
  type FitOptions,
  type FitStrategy,
} from "./stages/timeline.js";
