/**
 * The "segmenting" stage: the input's first audio track extracted once as 16 kHz mono PCM16, a
 * levelled copy of it (what the VAD and the recognizer read), then the speech spans found in it.
 * Separate because it is the only stage that owns the speech-rate files the later recognition reads
 * back span by span.
 */
import { open } from "node:fs/promises";
import { AutomaticGain } from "../../audio/level.js";
import type { VadEngine } from "../../core/contracts.js";
import { inputArgs, localPath, runFfmpeg, timeoutFor, type MediaInfo } from "./ffmpeg.js";
import { detectSpeech, padSpans, SEGMENT_PAD_SEC } from "../stages/segments.js";
import type { Span } from "../stages/timeline.js";

/** Rate of the audio the VAD and the recognizer read. */
export const SPEECH_RATE = 16_000;

/** Share of "segmenting" spent extracting the audio (the VAD takes the rest). */
const EXTRACT_SHARE = 0.2;

/** The speech audio as extracted (its level is the original dialogue's), and levelled for hearing. */
export interface SpeechAudio {
  readonly original: string;
  readonly levelled: string;
}

/** Writes the speech audio files and returns the padded speech spans in them. */
export async function segmentSpeech(job: {
  inputPath: string;
  info: MediaInfo;
  vad: VadEngine;
  audio: SpeechAudio;
  onProgress: (fraction: number) => void;
  signal?: AbortSignal;
}): Promise<Span[]> {
  const { info } = job;
  const withSignal = job.signal ? { signal: job.signal } : {};
  await extractSpeechAudio(job.inputPath, info, job.audio.original, {
    onProgress: (fraction) => job.onProgress(EXTRACT_SHARE * fraction),
    ...withSignal,
  });
  await levelSpeechAudio(job.audio, job.signal);
  if (job.vad.capabilities.sampleRate !== SPEECH_RATE) {
    throw new Error("the dubbing pipeline needs a 16 kHz VAD");
  }
  const rawSpans = await detectSpeech(job.vad, job.audio.levelled, {
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

/**
 * Brings quiet speech up, through the same level stage as live sessions (src/audio/level.ts), so the
 * VAD and the recognizer hear a quiet recording as they would a well-recorded one. Into a copy: the
 * dub's level follows the original dialogue's, measured on the extracted audio, and the mix reads
 * the original input, so the soundtrack is not touched.
 */
async function levelSpeechAudio(audio: SpeechAudio, signal?: AbortSignal): Promise<void> {
  const gain = new AutomaticGain();
  const source = await open(audio.original, "r");
  const file = await open(audio.levelled, "w");
  try {
    const buffer = Buffer.alloc(1 << 16);
    for (let position = 0; ;) {
      signal?.throwIfAborted();
      const { bytesRead } = await source.read(buffer, 0, buffer.length, position);
      const samples = new Int16Array(bytesRead >> 1);
      if (samples.length === 0) return;
      for (let i = 0; i < samples.length; i++) samples[i] = buffer.readInt16LE(i * 2);
      const levelled = gain.process(samples);
      for (let i = 0; i < levelled.length; i++) buffer.writeInt16LE(levelled[i]!, i * 2);
      await file.write(buffer, 0, levelled.length * 2, position);
      position += levelled.length * 2;
    }
  } finally {
    await Promise.all([source.close(), file.close()]);
  }
}
