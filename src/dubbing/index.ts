/** The dubbing media pipeline as a library (no HTTP, no storage): see `dubMedia`. */
export {
  assertDubbable,
  assertDurationWithin,
  dubMedia,
  DUB_SAMPLE_RATE,
  DUB_STAGES,
  MIN_INPUT_DURATION_SEC,
  overallProgress,
  type DubOptions,
  type DubResult,
  type DubSegment,
  type DubStage,
} from "./dub.js";
export {
  MediaTooLongError,
  MediaTooShortError,
  MediaToolError,
  UnsupportedFormatError,
  UnsupportedLanguageError,
} from "./errors.js";
export {
  isAcceptedFormat,
  mediaBinaries,
  probe,
  runFfmpeg,
  runFfprobe,
  setMediaBinaries,
  type MediaBinaries,
  type MediaInfo,
} from "./ffmpeg.js";
export { toSrt, toWebVtt, type SubtitleSegment, type SubtitleTrack } from "./subtitles.js";
export {
  DEFAULT_DUCK_OPTIONS,
  DEFAULT_FIT_OPTIONS,
  fitClip,
  fitTimeline,
  type ClipPlacement,
  type FitOptions,
  type FitStrategy,
} from "./timeline.js";
