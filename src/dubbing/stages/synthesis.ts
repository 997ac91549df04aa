/**
 * The "synthesizing" stage: every translated line voiced, trimmed of silence and resampled to the
 * dubbed track's rate. Separate because clips wait on disk between synthesis and fitting, so memory
 * does not grow with the input's length; this module owns that hand-over (`StoredClip`).
 */
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { concatFloat32, float32ToBytes } from "../../audio/pcm.js";
import { resample } from "../../audio/resampler.js";
import { setTimeout as delay } from "node:timers/promises";
import { EngineBusyError } from "../../core/busy.js";
import type {
  LanguageCode,
  SynthesizedAudio,
  ToneColor,
  ToneColorEngine,
  TtsEngine,
} from "../../core/contracts.js";
import type { SpeakerVoice } from "../../speakers/voice-choice.js";
import { trimSilence } from "../media/clips.js";
import { mapLimit } from "./concurrency.js";
import { energyOf, type Energy } from "../media/energy.js";
import type { DubSegment } from "./translation.js";

/** Rate of the clips, of the dubbed track they are fitted into and of the output audio. */
export const DUB_SAMPLE_RATE = 48_000;

/** A synthesized line on disk: raw float32 mono at `DUB_SAMPLE_RATE`. */
export interface StoredClip {
  readonly path: string;
  readonly samples: number;
  readonly energy: Energy;
  readonly peak: number;
}

/** One clip per segment, in order; null where there was nothing to voice. */
export async function synthesizeAll(
  synthesizer: TtsEngine,
  segments: readonly DubSegment[],
  options: {
    language: LanguageCode;
    /**
     * The voice of each line, parallel to `segments` (each speaker's own, when matched), converted
     * to its tone colour where it has one.
     */
    voices: readonly SpeakerVoice[];
    /** The tone colour converter (voice=clone). */
    converter?: ToneColorEngine;
    workDir: string;
    concurrency: number;
    onProgress: (fraction: number) => void;
    signal?: AbortSignal;
    /** Whose job (`SynthesisRequest.account`). */
    account?: string;
  },
): Promise<(StoredClip | null)[]> {
  let synthesized = 0;
  return mapLimit(
    segments,
    options.concurrency,
    async (segment, i) => {
      const clip = await synthesizeClip(
        synthesizer,
        segment.translatedText,
        options.language,
        options.voices[i]!,
        options.workDir,
        i,
        options.account,
        options.converter,
        options.signal,
      );
      options.onProgress(++synthesized / segments.length);
      return clip;
    },
    options.signal,
  );
}

async function synthesizeClip(
  synthesizer: TtsEngine,
  text: string,
  language: LanguageCode,
  { voice, toneColor }: SpeakerVoice,
  workDir: string,
  index: number,
  account: string | undefined,
  converter: ToneColorEngine | undefined,
  signal: AbortSignal | undefined,
): Promise<StoredClip | null> {
  if (!text) return null;
  let audio: SynthesizedAudio = await synthesizer.synthesize({
    text,
    language,
    voice,
    ...(account === undefined ? {} : { account }),
  });
  if (converter && toneColor) audio = await inOwnVoice(converter, audio, toneColor, signal, account);
  const clip = await resample(
    trimSilence(audio.samples, audio.sampleRate),
    audio.sampleRate,
    DUB_SAMPLE_RATE,
  );
  if (clip.length === 0) return null;
  const clipPath = path.join(workDir, `clip-${index}.f32`);
  await writeFile(clipPath, float32ToBytes(clip));
  let peak = 0;
  for (const sample of clip) peak = Math.max(peak, Math.abs(sample));
  return { path: clipPath, samples: clip.length, energy: energyOf(clip), peak };
}

/** A busy converter (live sessions fill its queue) is asked again after this long, this many times. */
const BUSY_RETRY_MS = 500;
const BUSY_RETRIES = 60;

/**
 * A line in the speaker's own voice. A job is not live: it waits its turn at the converter, and
 * when even the queue is full it asks again rather than dub the line in another voice; a
 * conversion that fails otherwise leaves the library voice, so the line is dubbed either way.
 */
async function inOwnVoice(
  converter: ToneColorEngine,
  audio: SynthesizedAudio,
  toneColor: ToneColor,
  signal: AbortSignal | undefined,
  account: string | undefined,
): Promise<SynthesizedAudio> {
  const request = {
    mayWait: true,
    ...(signal ? { signal } : {}),
    ...(account === undefined ? {} : { account }),
  };
  for (let attempt = 0; ; attempt++) {
    try {
      const pieces: Float32Array[] = [];
      let sampleRate = audio.sampleRate;
      for await (const piece of converter.convert(audio, toneColor, request)) {
        pieces.push(piece.samples);
        sampleRate = piece.sampleRate;
      }
      return { samples: concatFloat32(pieces), sampleRate };
    } catch (error) {
      if (signal?.aborted) throw error;
      if (!(error instanceof EngineBusyError) || attempt >= BUSY_RETRIES) return audio;
      await delay(BUSY_RETRY_MS, undefined, signal ? { signal } : {});
    }
  }
}
