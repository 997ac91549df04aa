/**
 * The "segmenting" stage: the input's first audio track extracted once as 16 kHz mono PCM16 (what
 * the VAD and the recogniser read), then the speech spans found in it. Separate because it is the
 * only stage that owns the speech-rate file the later recognition reads back span by span.
 */
import type { VadEngine } from "../engines/types.js";
import { inputArgs, localPath, runFfmpeg, timeoutFor, type MediaInfo } from "./ffmpeg.js";
import { detectSpeech, padSpans, SEGMENT_PAD_SEC } from "./segments.js";
import type { Span } from "./timeline.js";

/** Rate of the audio the VAD and the recogniser read. */
export const SPEECH_RATE = 16_000;

/** Share of "segmenting" spent extracting the audio (the VAD takes the rest). */
const EXTRACT_SHARE = 0.2;

/** Writes the speech audio to `pcmPath` and returns the padded speech spans in it. */
export async function segmentSpeech(job: {
  inputPath: string;
  info: MediaInfo;
  vad: VadEngine;
  pcmPath: string;
  onProgress: (fraction: number) => void;
  signal?: AbortSignal;
}): Promise<Span[]> {
  const { info } = job;
  const withSignal = job.signal ? { signal: job.signal } : {};
  await extractSpeechAudio(job.inputPath, info, job.pcmPath, {
    onProgress: (fraction) => job.onProgress(EXTRACT_SHARE * fraction),
    ...withSignal,
  });
  if (job.vad.capabilities.sampleRate !== SPEECH_RATE) {
    throw new Error("the dubbing pipeline needs a 16 kHz VAD");
  }
  const rawSpans = await detectSpeech(job.vad, job.pcmPath, {
    totalSamples: Math.round(info.durationSec * SPEECH_RATE),
    onProgress: (fraction) => job.onProgress(EXTRACT_SHARE + (1 - EXTRACT_SHARE) * fraction),
    ...withSignal,
  });
  return padSpans(rawSpans, SEGMENT_PAD_SEC, info.durationSec);
}

/**
 * 16 kHz mono PCM16 of the first audio track. The original audio is not copied: the mix reads it
 * again straight from the input, so it keeps its full quality without an intermediate file.
 */
async function extractSpeechAudio(
  inputPath: string,
  info: MediaInfo,
  pcmPath: string,
  options: { onProgress: (fraction: number) => void; signal?: AbortSignal },
): Promise<void> {
  await runFfmpeg(
    [
      ...inputArgs(inputPath),
      "-map",
      `0:${info.audioStreamIndex}`,
      // Same start alignment as the mix (see mixAudio), so sample 0 here is t = 0 there.
      "-af",
      "aresample=async=1:first_pts=0",
      "-ac",
      "1",
      "-ar",
      String(SPEECH_RATE),
      "-c:a",
      "pcm_s16le",
      "-f",
      "s16le",
      localPath(pcmPath),
    ],
    {
      timeoutMs: timeoutFor(info.durationSec, 1),
      onProgressSec: (sec) => options.onProgress(sec / info.durationSec),
      ...(options.signal ? { signal: options.signal } : {}),
    },
  );
}
