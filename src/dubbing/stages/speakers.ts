/**
 * Who speaks each line of a dub: the speech spans run through the same speaker tracker as live
 * sessions (src/speakers/tracker.ts), in order, so a span is split where the voice changes inside
 * it and every piece gets its speaker's label; each speaker's speech also goes to the voice chooser,
 * so their lines can be dubbed in a voice matched to theirs (src/speakers/voice-choice.ts).
 */
import type { FileHandle } from "node:fs/promises";
import { int16ToFloat32 } from "../../audio/pcm.js";
import type { SpeakerEngine } from "../../core/contracts.js";
import { SpeakerTracker } from "../../speakers/tracker.js";
import type { VoiceChooser } from "../../speakers/voice-choice.js";
import { readPcm16 } from "./segments.js";
import { SPEECH_RATE } from "../media/speech-audio.js";
import type { Span } from "./timeline.js";

export interface SpeakerSpan extends Span {
  readonly speaker: string;
}

/** Audio handed to the tracker at a time: the live pipeline's VAD window, so both decide alike. */
const WINDOW = 512;
/** Pieces shorter than this after a split are not worth a line of their own: they join their neighbour. */
const MIN_PIECE_SEC = 0.3;
/** Speech handed to the voice chooser per call (2 s). */
const OBSERVE_SAMPLES = 2 * SPEECH_RATE;

export async function followSpeakers(job: {
  engine: SpeakerEngine;
  /** The levelled 16 kHz speech (what the recognizer hears). */
  audio: FileHandle;
  spans: readonly Span[];
  voices?: VoiceChooser;
  onProgress?: (fraction: number) => void;
  signal?: AbortSignal;
}): Promise<SpeakerSpan[]> {
  if (job.engine.capabilities.sampleRate !== SPEECH_RATE)
    throw new Error(
      `${job.engine.info.id} reads ${job.engine.capabilities.sampleRate} Hz audio; dubbing feeds 16 kHz`,
    );
  const tracker = new SpeakerTracker(job.engine, job.signal);
  const labelled: SpeakerSpan[] = [];
  for (const [index, span] of job.spans.entries()) {
    job.signal?.throwIfAborted();
    const startSample = Math.floor(span.startSec * SPEECH_RATE);
    const pcm = await readPcm16(job.audio, startSample, Math.ceil(span.endSec * SPEECH_RATE));
    // Cut points (samples into the span) and the label of the piece each one ends.
    const pieces: { end: number; speaker: string }[] = [];
    for (let at = 0; at < pcm.length; at += WINDOW) {
      const change = await tracker.push(int16ToFloat32(pcm.subarray(at, at + WINDOW)), startSample + at);
      if (change) pieces.push({ end: change.atSample - startSample, speaker: change.before });
    }
    pieces.push({ end: pcm.length, speaker: (await tracker.endUtterance()).speaker });

    let from = 0;
    for (const piece of pieces) {
      const seconds = (piece.end - from) / SPEECH_RATE;
      if (seconds < MIN_PIECE_SEC && piece !== pieces.at(-1)) continue;
      // In pieces the voice profiler analyses at once (it stops listening once the voice is locked).
      for (let at = from; at < piece.end; at += OBSERVE_SAMPLES)
        job.voices?.observe(piece.speaker, pcm.subarray(at, Math.min(piece.end, at + OBSERVE_SAMPLES)));
      labelled.push({
        startSec: span.startSec + from / SPEECH_RATE,
        endSec: span.startSec + piece.end / SPEECH_RATE,
        speaker: piece.speaker,
      });
      from = piece.end;
    }
    job.onProgress?.((index + 1) / job.spans.length);
  }
  return labelled;
}
