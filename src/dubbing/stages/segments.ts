/**
 * Offline speech segmentation of a whole file: Silero VAD probabilities per window, turned into
 * utterances by the same `SpeechSegmenter` the live pipeline uses, with settings for files (shorter
 * end silence, since the whole file is available there is no latency to trade against).
 */
import { createReadStream } from "node:fs";
import type { FileHandle } from "node:fs/promises";
import { int16ToFloat32 } from "../../audio/pcm.js";
import type { VadEngine } from "../../core/contracts.js";
import {
  DEFAULT_SEGMENTER_OPTIONS,
  SpeechSegmenter,
  type SegmenterOptions,
} from "../../pipeline/segmenter.js";
import type { Span } from "./timeline.js";

/** Offline: close an utterance after 400 ms of silence, cap it at 12 s (one dubbed line each). */
export const OFFLINE_SEGMENTER_OPTIONS: Omit<SegmenterOptions, "windowMs"> = {
  ...DEFAULT_SEGMENTER_OPTIONS,
  endSilenceMs: 400,
  maxUtteranceMs: 12_000,
};

/** Context kept around each detected utterance so first and last phonemes are not clipped. */
export const SEGMENT_PAD_SEC = 0.1;

/**
 * Turns per-window speech probabilities into spans. An utterance starts at the first window of the
 * speech run that opened it and ends after its last voiced window (not after the trailing silence
 * the segmenter waited for).
 */
export class SpanCollector {
  private readonly segmenter: SpeechSegmenter;
  private readonly options: SegmenterOptions;
  private windowIndex = 0;
  private current: { startWindow: number; lastVoiced: number } | undefined;
  private readonly windows: { startWindow: number; endWindow: number }[] = [];

  constructor(options: SegmenterOptions) {
    this.options = options;
    this.segmenter = new SpeechSegmenter(options);
  }

  push(probability: number): void {
    const index = this.windowIndex++;
    const event = this.segmenter.update(probability);
    if (event === "start") {
      // The segmenter opens on the `startWindows`-th consecutive speech window.
      this.current = { startWindow: index + 1 - this.options.startWindows, lastVoiced: index };
      return;
    }
    if (!this.current) return;
    if (probability >= this.options.negThreshold) this.current.lastVoiced = index;
    if (event === "end") this.close();
  }

  /** Spans in seconds, closing an utterance still open at the end of the audio. */
  finish(): Span[] {
    this.close();
    const windowSec = this.options.windowMs / 1000;
    return this.windows.map((w) => ({
      startSec: w.startWindow * windowSec,
      endSec: w.endWindow * windowSec,
    }));
  }

  private close(): void {
    if (!this.current) return;
    this.windows.push({ startWindow: this.current.startWindow, endWindow: this.current.lastVoiced + 1 });
    this.current = undefined;
  }
}

/**
 * Widens each span by `padSec` on both sides without crossing the middle of the pause to its
 * neighbours or the media bounds, so padded spans never overlap.
 */
export function padSpans(spans: readonly Span[], padSec: number, durationSec: number): Span[] {
  return spans.map((span, i) => {
    const previous = spans[i - 1];
    const next = spans[i + 1];
    const lowest = previous ? (previous.endSec + span.startSec) / 2 : 0;
    const highest = next ? (span.endSec + next.startSec) / 2 : durationSec;
    return {
      startSec: Math.max(lowest, 0, span.startSec - padSec),
      endSec: Math.min(highest, durationSec, span.endSec + padSec),
    };
  });
}

export interface DetectSpeechOptions {
  readonly segmenter?: Partial<Omit<SegmenterOptions, "windowMs">>;
  /** Total samples in the file (for progress). */
  readonly totalSamples: number;
  readonly onProgress?: (fraction: number) => void;
  readonly signal?: AbortSignal;
}

/** Runs the VAD over a raw PCM16 mono file at the VAD's rate; returns unpadded speech spans. */
export async function detectSpeech(
  vad: VadEngine,
  pcmPath: string,
  options: DetectSpeechOptions,
): Promise<Span[]> {
  const { windowSamples, sampleRate } = vad.capabilities;
  const collector = new SpanCollector({
    ...OFFLINE_SEGMENTER_OPTIONS,
    ...options.segmenter,
    windowMs: (windowSamples * 1000) / sampleRate,
  });
  const stream = vad.createStream();
  const window = new Int16Array(windowSamples);
  let fill = 0;
  let processed = 0;
  let carry: Buffer | undefined;
  // Streamed, so an hour of audio never sits in memory at once.
  for await (const data of createReadStream(pcmPath, { highWaterMark: 1 << 16 })) {
    options.signal?.throwIfAborted();
    let chunk = data as Buffer;
    if (carry) chunk = Buffer.concat([carry, chunk]);
    const usable = chunk.length & ~1;
    carry = usable < chunk.length ? chunk.subarray(usable) : undefined;
    const samples = new Int16Array(usable >> 1);
    for (let i = 0; i < samples.length; i++) samples[i] = chunk.readInt16LE(i * 2);
    let offset = 0;
    while (offset < samples.length) {
      const take = Math.min(windowSamples - fill, samples.length - offset);
      window.set(samples.subarray(offset, offset + take), fill);
      fill += take;
      offset += take;
      if (fill < windowSamples) break;
      fill = 0;
      collector.push(await stream.probability(int16ToFloat32(window)));
      processed += windowSamples;
    }
    options.onProgress?.(Math.min(1, processed / Math.max(1, options.totalSamples)));
  }
  // A final partial window (< 32 ms) is too short to matter and is left out.
  return collector.finish();
}

/** Reads samples [start, end) of a raw PCM16 little-endian mono file. */
export async function readPcm16(
  file: FileHandle,
  startSample: number,
  endSample: number,
): Promise<Int16Array> {
  const count = Math.max(0, endSample - startSample);
  const bytes = Buffer.alloc(count * 2);
  const { bytesRead } = await file.read(bytes, 0, bytes.length, startSample * 2);
  const samples = new Int16Array(bytesRead >> 1);
  for (let i = 0; i < samples.length; i++) samples[i] = bytes.readInt16LE(i * 2);
  return samples;
}
