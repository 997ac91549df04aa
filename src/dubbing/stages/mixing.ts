/**
 * The dub's level and the "mixing" stage: one gain bringing the dub to the original dialogue's level,
 * and the ffmpeg filter graph that ducks the original under speech and adds the dubbed track.
 * Separate because these are the decisions about how the result sounds, apart from producing clips.
 */
import { rmsOf, type Energy } from "../media/energy.js";
import { inputArgs, localPath, runFfmpeg, timeoutFor, type MediaInfo } from "../media/ffmpeg.js";
import { DUB_SAMPLE_RATE, type StoredClip } from "./synthesis.js";
import { DEFAULT_DUCK_OPTIONS, duckingExpression, type ClipPlacement, type Span } from "./timeline.js";
import type { DubSegment } from "./translation.js";

/**
 * The dub is brought to the level of the original dialogue (RMS over all recognized segments against
 * RMS over all clips: one gain for the whole job, so the voice keeps its own dynamics), within
 * -12..+6 dB so a very quiet or very loud source cannot push the TTS voice to extremes.
 */
export function dubGain(original: readonly Energy[], clips: readonly (StoredClip | null)[]): number {
  const dubRms = rmsOf(clips.flatMap((clip) => (clip ? [clip.energy] : [])));
  const originalRms = rmsOf(original);
  if (dubRms === 0 || originalRms === 0) return 1;
  return Math.min(10 ** (6 / 20), Math.max(10 ** (-12 / 20), originalRms / dubRms));
}

/** The spans under which the original is ducked (see `mixAudio`). */
export function duckSpans(
  segments: readonly DubSegment[],
  timeline: readonly (ClipPlacement | null)[],
): Span[] {
  return segments.flatMap((segment, i) => {
    const placement = timeline[i];
    if (!placement || placement.durationSec <= 0) return [];
    // Ducked wherever either voice speaks: the original segment and the dubbed clip's play time.
    const endSec = Math.max(segment.endSec, placement.startSec + placement.durationSec);
    return [{ startSec: segment.startSec, endSec }];
  });
}

/**
 * The soundtrack, encoded (AAC 192 kb/s in an .m4a for video outputs, MP3 192 kb/s for audio-only).
 *
 * The method is DUCKING OF THE FULL ORIGINAL MIX, not source separation: the original audio (speech,
 * music, effects and room tone together) is attenuated by 15 dB under the spans where anyone speaks
 * (original segment ∪ dubbed clip), with 80 ms linear ramps outside each span, and passes unchanged
 * everywhere else. The original voice therefore stays faintly audible under the dub, and background
 * sound under speech is ducked along with it. The gain is a `volume` expression of t evaluated per
 * 10 ms frame (`asetnsamples`), see `duckingExpression`. The dubbed track is then added sample for
 * sample (`amerge` + `pan` summing channels, i.e. no normalization: neither signal is scaled down);
 * the mono dub goes equally into both channels of a stereo original. The dub itself was already
 * brought to the original dialogue's level (`dubGain`).
 *
 * Both this pass and the speech extraction resample with `async=1:first_pts=0`: the audio is aligned
 * to the file's time 0 (padding a late-starting track), so segment times, the dubbed track and the
 * video share one clock. Mono originals stay mono; everything else becomes stereo (surround is
 * downmixed with ffmpeg's standard matrix).
 */
export async function mixAudio(job: {
  inputPath: string;
  dubPath: string;
  info: MediaInfo;
  duckSpans: readonly Span[];
  outputPath: string;
  onProgress: (fraction: number) => void;
  signal?: AbortSignal;
}): Promise<void> {
  const { info } = job;
  const mono = info.audioChannels === 1;
  const { expression } = duckingExpression(job.duckSpans, DEFAULT_DUCK_OPTIONS);
  const duck = expression === "1" ? "" : `,asetnsamples=n=480:p=0,volume=volume='${expression}':eval=frame`;
  const graph = [
    `[0:${info.audioStreamIndex}]aresample=${DUB_SAMPLE_RATE}:async=1:first_pts=0,` +
      `aformat=sample_fmts=fltp:channel_layouts=${mono ? "mono" : "stereo"}${duck}[bed]`,
    // Padded without end: the merge then ends with the original audio.
    `[1:a]aformat=sample_fmts=fltp:channel_layouts=mono,apad[dub]`,
    mono
      ? `[bed][dub]amerge=inputs=2,pan=mono|c0=c0+c1[aout]`
      : `[bed][dub]amerge=inputs=2,pan=stereo|c0=c0+c2|c1=c1+c2[aout]`,
  ].join(";");
  const encoder = info.hasVideo
    ? ["-c:a", "aac", "-b:a", "192k", "-f", "ipod"]
    : ["-c:a", "libmp3lame", "-b:a", "192k", "-f", "mp3"];
  await runFfmpeg(
    [
      ...inputArgs(job.inputPath),
      "-f",
      "f32le",
      "-ar",
      String(DUB_SAMPLE_RATE),
      "-ac",
      "1",
      ...inputArgs(job.dubPath),
      "-filter_complex",
      graph,
      "-map",
      "[aout]",
      ...encoder,
      localPath(job.outputPath),
    ],
    {
      timeoutMs: timeoutFor(info.durationSec, 2, 120_000),
      onProgressSec: (sec) => job.onProgress(sec / info.durationSec),
      ...(job.signal ? { signal: job.signal } : {}),
    },
  );
}
