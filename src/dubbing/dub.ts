/**
 * The dubbing pipeline: media file in, dubbed media file and segments out.
 *
 *   probing → segmenting (extract 16 kHz mono PCM, Silero VAD + SpeechSegmenter) → recognizing →
 *   translating → synthesizing → fitting (time-stretch each clip into its slot of the 48 kHz dubbed
 *   track) → mixing (ducked original + dubbed track, encoded) → muxing (video copied or encoded to H.264)
 *
 * Intermediate files live in a private directory under `outputDir`, removed at the end either way;
 * memory stays bounded by one segment per worker whatever the input's length.
 */
import { availableParallelism } from "node:os";
import { mkdir, mkdtemp, open, readFile, rename, rm, writeFile, type FileHandle } from "node:fs/promises";
import path from "node:path";
import { float32ToBytes } from "../audio/pcm.js";
import { resample } from "../audio/resampler.js";
import { translateAlong, type EngineRegistry, type TranslationRoute } from "../engines/registry.js";
import type { AsrEngine, LanguageCode, TtsEngine, Voice } from "../engines/types.js";
import { defaultVoice } from "../voices/library.js";
import { changeTempo, shapeClip, trimSilence } from "./clips.js";
import {
  MediaTooLongError,
  MediaTooShortError,
  UnsupportedFormatError,
  UnsupportedLanguageError,
} from "./errors.js";
import {
  inputArgs,
  isAcceptedFormat,
  localPath,
  probe,
  runFfmpeg,
  timeoutFor,
  type MediaInfo,
} from "./ffmpeg.js";
import { detectSpeech, padSpans, readPcm16, SEGMENT_PAD_SEC } from "./segments.js";
import {
  DEFAULT_DUCK_OPTIONS,
  duckingExpression,
  fitTimeline,
  type ClipPlacement,
  type Span,
} from "./timeline.js";

/** Shorter inputs are refused: there is nothing meaningful to dub. */
export const MIN_INPUT_DURATION_SEC = 1;
/** Rate of the dubbed track and of the output audio. */
export const DUB_SAMPLE_RATE = 48_000;
/** Rate of the audio the VAD and the recogniser read. */
const SPEECH_RATE = 16_000;
/** Audio written to the recogniser per call (1 s). */
const ASR_CHUNK = 16_000;
/** Segments tried with each candidate recogniser when the source language is "auto". */
const DETECTION_SEGMENTS = 3;

/** "segmenting" includes extracting the speech audio (its first fifth). */
export type DubStage =
  "probing" | "segmenting" | "recognizing" | "translating" | "synthesizing" | "fitting" | "mixing" | "muxing";

/**
 * The stages in order, with the share of a job's processing time each took on a 4.9-minute English
 * speech file (WAV and H.264 with copied video, 2 CPUs), for an overall percentage. Encoding
 * non-H.264 video makes "muxing" far longer (about 60 % of the job at 720p).
 */
export const DUB_STAGES: readonly { readonly stage: DubStage; readonly weight: number }[] = [
  { stage: "probing", weight: 0.01 },
  { stage: "segmenting", weight: 0.06 },
  { stage: "recognizing", weight: 0.55 },
  { stage: "translating", weight: 0.01 },
  { stage: "synthesizing", weight: 0.11 },
  { stage: "fitting", weight: 0.1 },
  { stage: "mixing", weight: 0.14 },
  { stage: "muxing", weight: 0.02 },
];

/** Overall completion (0..1) from a stage's own fraction, using `DUB_STAGES` weights. */
export function overallProgress(stage: DubStage, fraction: number): number {
  let done = 0;
  for (const entry of DUB_STAGES) {
    if (entry.stage === stage) return Math.min(1, done + entry.weight * Math.min(1, Math.max(0, fraction)));
    done += entry.weight;
  }
  return done;
}

export interface DubOptions {
  readonly inputPath: string;
  /** Created if missing; receives `<outputName>.mp4` or `.mp3`. */
  readonly outputDir: string;
  readonly registry: EngineRegistry;
  readonly sourceLang: LanguageCode | "auto";
  readonly targetLang: LanguageCode;
  /** Default: the library's default female voice. */
  readonly voice?: Voice;
  /** Each stage reports fractions 0..1, non-decreasing, ending with 1. */
  readonly onProgress?: (stage: DubStage, fraction: number) => void;
  /** Called once the source language is settled (resolved, when `sourceLang` is "auto"). */
  readonly onSourceLanguage?: (language: LanguageCode) => void;
  readonly signal?: AbortSignal;
  /** Output file name without extension; default "dubbed". */
  readonly outputName?: string;
  /** Segments recognised, synthesised or fitted at once; default min(2, CPUs). */
  readonly concurrency?: number;
}

export interface DubSegment {
  readonly startSec: number;
  readonly endSec: number;
  readonly text: string;
  readonly translatedText: string;
}

export interface DubResult {
  readonly outputPath: string;
  readonly outputKind: "video" | "audio";
  readonly inputDurationSec: number;
  readonly detectedSourceLang: LanguageCode;
  readonly segments: DubSegment[];
  /** Where each segment's dubbed clip plays (parallel to `segments`; null when nothing was voiced). */
  readonly timeline: (ClipPlacement | null)[];
}

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

export async function dubMedia(options: DubOptions): Promise<DubResult> {
  const { registry, targetLang, signal } = options;
  const progress = new ProgressReporter(options.onProgress);
  const concurrency = Math.max(1, options.concurrency ?? Math.min(2, availableParallelism()));
  const withSignal = signal ? { signal } : {};
  signal?.throwIfAborted();

  // Languages are checked before any media work so a bad request fails at once.
  const synthesizer = registry.synthesizer(targetLang);
  if (!synthesizer) throw new UnsupportedLanguageError(`no voice output for "${targetLang}"`);
  const candidates = sourceCandidates(registry, options.sourceLang, targetLang);
  const voice = options.voice ?? defaultVoice("female");

  // a. probe
  progress.report("probing", 0);
  const info = await probe(options.inputPath, withSignal);
  assertDubbable(info);
  progress.report("probing", 1);

  await mkdir(options.outputDir, { recursive: true });
  const work = await mkdtemp(path.join(options.outputDir, ".dub-"));
  try {
    // b + c. extract the speech audio, then find the speech in it.
    progress.report("segmenting", 0);
    const pcmPath = path.join(work, "speech-16k.raw");
    await extractSpeechAudio(options.inputPath, info, pcmPath, {
      onProgress: (fraction) => progress.report("segmenting", EXTRACT_SHARE * fraction),
      ...withSignal,
    });
    if (registry.vad.capabilities.sampleRate !== SPEECH_RATE) {
      throw new Error("the dubbing pipeline needs a 16 kHz VAD");
    }
    const rawSpans = await detectSpeech(registry.vad, pcmPath, {
      totalSamples: Math.round(info.durationSec * SPEECH_RATE),
      onProgress: (fraction) => progress.report("segmenting", EXTRACT_SHARE + (1 - EXTRACT_SHARE) * fraction),
      ...withSignal,
    });
    const spans = padSpans(rawSpans, SEGMENT_PAD_SEC, info.durationSec);
    progress.report("segmenting", 1);

    // d. recognise (choosing the language first when asked to)
    progress.report("recognizing", 0);
    const { language, recognised } = await recognizeAll(registry, candidates, pcmPath, spans, {
      concurrency,
      targetLang,
      identify: options.sourceLang === "auto",
      onLanguage: (chosen) => options.onSourceLanguage?.(chosen),
      onProgress: (fraction) => progress.report("recognizing", fraction),
      ...withSignal,
    });
    // Spans where the recogniser heard no words (noise, music) are not dubbed.
    const speech = recognised.filter((r) => r.text !== "");
    progress.report("recognizing", 1);

    // e. translate
    const routes = registry.translationRoutes(language, targetLang);
    if (routes.length === 0)
      throw new UnsupportedLanguageError(`no translation from "${language}" to "${targetLang}"`);
    progress.report("translating", 0);
    let translatedCount = 0;
    const translations = await mapLimit(
      speech,
      4,
      async (_, i) => {
        const translated = await translateSegment(routes, speech, i);
        progress.report("translating", ++translatedCount / speech.length);
        return translated;
      },
      signal,
    );
    const segments: DubSegment[] = speech.map((s, i) => ({
      startSec: roundMs(s.startSec),
      endSec: roundMs(s.endSec),
      text: s.text,
      translatedText: translations[i]!,
    }));
    progress.report("translating", 1);

    // f. synthesise every line; clips wait on disk so memory does not grow with the input's length.
    progress.report("synthesizing", 0);
    let synthesised = 0;
    const clips = await mapLimit(
      segments,
      concurrency,
      async (segment, i) => {
        const clip = await synthesizeClip(synthesizer, segment.translatedText, targetLang, voice, work, i);
        progress.report("synthesizing", ++synthesised / segments.length);
        return clip;
      },
      signal,
    );
    progress.report("synthesizing", 1);

    // g. fit each clip into its slot and write it into the dubbed track.
    progress.report("fitting", 0);
    const voiced = segments.flatMap((segment, i) => {
      const clip = clips[i];
      return clip ? [{ index: i, segment, clip }] : [];
    });
    // Slots run to the next segment's start, voiced or not: a clip never covers another segment's speech.
    const placements = fitTimeline(
      segments.map((segment, i) => ({
        startSec: segment.startSec,
        endSec: segment.endSec,
        clipSec: (clips[i]?.samples ?? 0) / DUB_SAMPLE_RATE,
      })),
      info.durationSec,
    );
    const gain = dubGain(
      speech.map((s) => s.energy),
      clips,
    );
    const dubPath = path.join(work, "dub-48k.f32");
    const totalDubSamples = Math.ceil(info.durationSec * DUB_SAMPLE_RATE);
    const timeline: (ClipPlacement | null)[] = segments.map(() => null);
    const dubTrack = await open(dubPath, "w+");
    try {
      // Extending the file fills it with zeros (sparse where supported): silence wherever no clip is written.
      await dubTrack.truncate(totalDubSamples * 4);
      let fitted = 0;
      await mapLimit(
        voiced,
        concurrency,
        async ({ index, clip }) => {
          timeline[index] = await placeClip(
            clip,
            placements[index]!,
            gain,
            dubTrack,
            totalDubSamples,
            signal,
          );
          progress.report("fitting", ++fitted / voiced.length);
        },
        signal,
      );
    } finally {
      await dubTrack.close();
    }
    progress.report("fitting", 1);

    // h. mix: ducked original + dubbed track, encoded to the output's audio codec.
    progress.report("mixing", 0);
    const outputKind = info.hasVideo ? "video" : "audio";
    const duckSpans = segments.flatMap((segment, i) => {
      const placement = timeline[i];
      if (!placement || placement.durationSec <= 0) return [];
      // Ducked wherever either voice speaks: the original segment and the dubbed clip's play time.
      const endSec = Math.max(segment.endSec, placement.startSec + placement.durationSec);
      return [{ startSec: segment.startSec, endSec }];
    });
    const mixedPath = path.join(work, outputKind === "video" ? "mix.m4a" : "mix.mp3");
    await mixAudio({
      inputPath: options.inputPath,
      dubPath,
      info,
      duckSpans,
      outputPath: mixedPath,
      onProgress: (fraction) => progress.report("mixing", fraction),
      ...withSignal,
    });
    progress.report("mixing", 1);

    // i. mux
    progress.report("muxing", 0);
    const fileName = `${options.outputName ?? "dubbed"}.${outputKind === "video" ? "mp4" : "mp3"}`;
    const outputPath = path.join(options.outputDir, fileName);
    if (outputKind === "video") {
      const muxedPath = path.join(work, fileName);
      await muxVideo({
        inputPath: options.inputPath,
        audioPath: mixedPath,
        info,
        outputPath: muxedPath,
        onProgress: (fraction) => progress.report("muxing", fraction),
        ...withSignal,
      });
      await rename(muxedPath, outputPath);
    } else {
      await rename(mixedPath, outputPath);
    }
    progress.report("muxing", 1);

    return {
      outputPath,
      outputKind,
      inputDurationSec: info.durationSec,
      detectedSourceLang: language,
      segments,
      timeline,
    };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** Share of "segmenting" spent extracting the audio (the VAD takes the rest). */
const EXTRACT_SHARE = 0.2;

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

// ---------------------------------------------------------------- languages

function sourceCandidates(
  registry: EngineRegistry,
  sourceLang: LanguageCode | "auto",
  targetLang: LanguageCode,
): LanguageCode[] {
  if (sourceLang !== "auto") {
    if (!registry.recognizer(sourceLang))
      throw new UnsupportedLanguageError(`no speech recognition for "${sourceLang}"`);
    if (!registry.translationRoute(sourceLang, targetLang)) {
      throw new UnsupportedLanguageError(`no translation from "${sourceLang}" to "${targetLang}"`);
    }
    return [sourceLang];
  }
  const recognisable = registry.recognitionLanguages();
  if (recognisable.length === 0) throw new UnsupportedLanguageError("no speech recognition is configured");
  const candidates = recognisable.filter((lang) => registry.translationRoute(lang, targetLang) !== undefined);
  if (candidates.length === 0) {
    throw new UnsupportedLanguageError(
      `none of the recognised languages (${recognisable.join(", ")}) can be translated to "${targetLang}"`,
    );
  }
  return candidates;
}

/**
 * Resolves "auto". With a recogniser that identifies languages (whisper.cpp, a remote Whisper),
 * the first few segments are identified and the most frequent candidate language wins; speech
 * identified only as languages that cannot be dubbed into the target is refused
 * (UnsupportedLanguageError) rather than taken for another language. Without one, one candidate (one recogniser language that can
 * reach the target) is the answer without listening, and with several a heuristic stands in for
 * identification: each candidate's recogniser decodes the first few segments, and the language
 * whose recogniser produced the most letters wins (ties: the earlier configured language). A
 * recogniser given speech in another language still emits words from its own vocabulary, so the
 * heuristic separates languages only roughly; callers who know the language should say so (the
 * service refuses "auto" without an identifier).
 */
async function chooseSourceLanguage(
  candidates: readonly LanguageCode[],
  targetLang: LanguageCode,
  segmentCount: number,
  recognise: (lang: LanguageCode, index: number) => Promise<Recognised>,
  identify: ((index: number) => Promise<LanguageCode | undefined>) | undefined,
): Promise<LanguageCode> {
  if (segmentCount === 0) return candidates[0]!;
  const sampled = Math.min(DETECTION_SEGMENTS, segmentCount);
  if (identify) {
    const votes = new Map<LanguageCode, number>();
    const others = new Set<LanguageCode>();
    for (let i = 0; i < sampled; i++) {
      const heard = await identify(i);
      if (heard && candidates.includes(heard)) votes.set(heard, (votes.get(heard) ?? 0) + 1);
      else if (heard) others.add(heard);
    }
    const [winner] = [...votes].sort((a, b) => b[1] - a[1]);
    if (winner) return winner[0];
    if (others.size > 0) {
      throw new UnsupportedLanguageError(
        `the speech was identified as ${[...others].join(", ")}, which cannot be dubbed into "${targetLang}" ` +
          `with the configured engines (possible source languages: ${candidates.join(", ")})`,
      );
    }
  }
  if (candidates.length === 1) return candidates[0]!;
  let best = candidates[0]!;
  let bestScore = -1;
  for (const lang of candidates) {
    let score = 0;
    for (let i = 0; i < sampled; i++) {
      score += (await recognise(lang, i)).text.replace(/[^\p{L}]/gu, "").length;
    }
    if (score > bestScore) [best, bestScore] = [lang, score];
  }
  return best;
}

// ---------------------------------------------------------------- recognition and translation

interface Recognised {
  readonly startSec: number;
  readonly endSec: number;
  readonly text: string;
  /** The language the recogniser heard, when it identifies languages (asked with "auto"). */
  readonly language?: LanguageCode;
  /** Energy of the span's audio (for matching the dub's level to the original dialogue). */
  readonly energy: Energy;
}

/** Sum of squared samples and their count: energies add up across segments. */
interface Energy {
  readonly sumSquares: number;
  readonly samples: number;
}

function energyOf(samples: ArrayLike<number>, scale = 1): Energy {
  let sumSquares = 0;
  for (let i = 0; i < samples.length; i++) sumSquares += (samples[i]! * scale) ** 2;
  return { sumSquares, samples: samples.length };
}

function rmsOf(energies: readonly Energy[]): number {
  const total = energies.reduce((sum, e) => sum + e.sumSquares, 0);
  const count = energies.reduce((sum, e) => sum + e.samples, 0);
  return count > 0 ? Math.sqrt(total / count) : 0;
}

async function recognizeAll(
  registry: EngineRegistry,
  candidates: readonly LanguageCode[],
  pcmPath: string,
  spans: readonly Span[],
  options: {
    concurrency: number;
    targetLang: LanguageCode;
    /** Whether the language is to be found ("auto"), rather than named by the caller. */
    identify: boolean;
    onLanguage: (language: LanguageCode) => void;
    onProgress: (fraction: number) => void;
    signal?: AbortSignal;
  },
): Promise<{ language: LanguageCode; recognised: Recognised[] }> {
  const pcm = await open(pcmPath, "r");
  try {
    // Segments decoded while choosing the language are not decoded twice.
    const cache = new Map<string, Recognised>();
    const recognise = async (lang: LanguageCode, index: number): Promise<Recognised> => {
      const key = `${lang}:${index}`;
      let result = cache.get(key);
      if (!result) {
        result = await recognizeSpan(registry.recognizer(lang)!, lang, pcm, spans[index]!);
        cache.set(key, result);
      }
      return result;
    };
    const identifier = options.identify ? registry.languageIdentifier() : undefined;
    const identify = identifier
      ? async (index: number) => (await recognizeSpan(identifier, "auto", pcm, spans[index]!)).language
      : undefined;
    const language = await chooseSourceLanguage(
      candidates,
      options.targetLang,
      spans.length,
      recognise,
      identify,
    );
    options.onLanguage(language);
    let done = 0;
    const recognised = await mapLimit(
      spans,
      options.concurrency,
      async (_, index) => {
        const result = await recognise(language, index);
        options.onProgress(++done / spans.length);
        return result;
      },
      options.signal,
    );
    return { language, recognised };
  } finally {
    await pcm.close();
  }
}

/**
 * Recognises one padded span. With word timings the segment is tightened to the words (plus the
 * padding, never beyond the VAD span), which makes subtitles tighter and leaves the following
 * silence to the dub.
 */
async function recognizeSpan(
  asr: AsrEngine,
  language: LanguageCode | "auto",
  pcm: FileHandle,
  span: Span,
): Promise<Recognised> {
  if (asr.capabilities.sampleRate !== SPEECH_RATE) {
    throw new Error(`${asr.info.id} reads ${asr.capabilities.sampleRate} Hz audio; dubbing feeds 16 kHz`);
  }
  const startSample = Math.floor(span.startSec * SPEECH_RATE);
  const audio = await readPcm16(pcm, startSample, Math.ceil(span.endSec * SPEECH_RATE));
  const stream = await asr.createStream({ language });
  let hypothesis;
  try {
    for (let i = 0; i < audio.length; i += ASR_CHUNK) await stream.write(audio.subarray(i, i + ASR_CHUNK));
    hypothesis = await stream.finish();
  } catch (error) {
    stream.abort();
    throw error;
  }
  const text = hypothesis.text.trim();
  const first = hypothesis.words[0];
  const last = hypothesis.words.at(-1);
  const origin = startSample / SPEECH_RATE;
  let startSec = span.startSec;
  let endSec = span.endSec;
  if (first && last) {
    const wordStart = Math.max(span.startSec, origin + first.startMs / 1000 - SEGMENT_PAD_SEC);
    const wordEnd = Math.min(span.endSec, origin + last.endMs / 1000 + SEGMENT_PAD_SEC);
    if (wordEnd > wordStart) [startSec, endSec] = [wordStart, wordEnd];
  }
  return {
    startSec,
    endSec,
    text,
    ...(hypothesis.language ? { language: hypothesis.language } : {}),
    energy: energyOf(audio, 1 / 32768),
  };
}

/** Context for the MT engine: the previous and next segments' texts. */
async function translateSegment(
  routes: readonly TranslationRoute[],
  segments: readonly Recognised[],
  index: number,
): Promise<string> {
  const context = [segments[index - 1]?.text, segments[index + 1]?.text].filter(Boolean).join(" ");
  return (await translateAlong(routes, { text: segments[index]!.text, context })).trim();
}

// ---------------------------------------------------------------- synthesis and fitting

/** Fade at both ends of every clip (5 ms) so no clip starts or stops with a click. */
const EDGE_FADE_SEC = 0.005;

/** A synthesised line on disk: raw float32 mono at `DUB_SAMPLE_RATE`. */
interface StoredClip {
  readonly path: string;
  readonly samples: number;
  readonly energy: Energy;
  readonly peak: number;
}

/**
 * The dub is brought to the level of the original dialogue (RMS over all recognised segments against
 * RMS over all clips: one gain for the whole job, so the voice keeps its own dynamics), within
 * -12..+6 dB so a very quiet or very loud source cannot push the TTS voice to extremes.
 */
function dubGain(original: readonly Energy[], clips: readonly (StoredClip | null)[]): number {
  const dubRms = rmsOf(clips.flatMap((clip) => (clip ? [clip.energy] : [])));
  const originalRms = rmsOf(original);
  if (dubRms === 0 || originalRms === 0) return 1;
  return Math.min(10 ** (6 / 20), Math.max(10 ** (-12 / 20), originalRms / dubRms));
}

/** Peak a clip may reach after the gain (headroom for the ducked original underneath). */
const CLIP_PEAK = 0.9;

async function synthesizeClip(
  synthesizer: TtsEngine,
  text: string,
  language: LanguageCode,
  voice: Voice,
  workDir: string,
  index: number,
): Promise<StoredClip | null> {
  if (!text) return null;
  const audio = await synthesizer.synthesize({ text, language, voice });
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

/** Time-stretches a clip as planned and writes it at its place in the dubbed track. */
async function placeClip(
  clip: StoredClip,
  placement: ClipPlacement,
  gain: number,
  dubTrack: FileHandle,
  totalDubSamples: number,
  signal: AbortSignal | undefined,
): Promise<ClipPlacement | null> {
  const bytes = await readFile(clip.path);
  const samples = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length >> 2).slice();
  const clipGain = clip.peak > 0 ? Math.min(gain, CLIP_PEAK / clip.peak) : gain;
  for (let i = 0; i < samples.length; i++) samples[i]! *= clipGain;
  const stretched = await changeTempo(samples, DUB_SAMPLE_RATE, placement.tempo, signal);
  const startSample = Math.round(placement.startSec * DUB_SAMPLE_RATE);
  // Floor at the slot's end and round at the next start: two clips can never share a sample.
  const lastAllowed = Math.min(totalDubSamples, Math.floor(placement.slotEndSec * DUB_SAMPLE_RATE));
  const maxSamples = Math.min(Math.round(placement.durationSec * DUB_SAMPLE_RATE), lastAllowed - startSample);
  const shaped = shapeClip(
    stretched,
    maxSamples,
    Math.round(EDGE_FADE_SEC * DUB_SAMPLE_RATE),
    Math.round(placement.fadeOutSec * DUB_SAMPLE_RATE),
  );
  if (shaped.length === 0) return null;
  // The track is raw float32 little-endian (Float32Array's layout on the little-endian hosts Node runs on).
  const out = float32ToBytes(shaped);
  await dubTrack.write(out, 0, out.length, startSample * 4);
  await rm(clip.path, { force: true });
  return { ...placement, durationSec: shaped.length / DUB_SAMPLE_RATE };
}

// ---------------------------------------------------------------- mix and mux

/**
 * The soundtrack, encoded (AAC 192 kb/s in an .m4a for video outputs, MP3 192 kb/s for audio-only).
 *
 * The method is DUCKING OF THE FULL ORIGINAL MIX, not source separation: the original audio (speech,
 * music, effects and room tone together) is attenuated by 15 dB under the spans where anyone speaks
 * (original segment ∪ dubbed clip), with 80 ms linear ramps outside each span, and passes unchanged
 * everywhere else. The original voice therefore stays faintly audible under the dub, and background
 * sound under speech is ducked along with it. The gain is a `volume` expression of t evaluated per
 * 10 ms frame (`asetnsamples`), see `duckingExpression`. The dubbed track is then added sample for
 * sample (`amerge` + `pan` summing channels, i.e. no normalisation: neither signal is scaled down);
 * the mono dub goes equally into both channels of a stereo original. The dub itself was already
 * brought to the original dialogue's level (`dubGain`).
 *
 * Both this pass and the speech extraction resample with `async=1:first_pts=0`: the audio is aligned
 * to the file's time 0 (padding a late-starting track), so segment times, the dubbed track and the
 * video share one clock. Mono originals stay mono; everything else becomes stereo (surround is
 * downmixed with ffmpeg's standard matrix).
 */
async function mixAudio(job: {
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

/** The final MP4: the mixed soundtrack copied in; H.264 video copied bit for bit, anything else encoded. */
async function muxVideo(job: {
  inputPath: string;
  audioPath: string;
  info: MediaInfo;
  outputPath: string;
  onProgress: (fraction: number) => void;
  signal?: AbortSignal;
}): Promise<void> {
  const { info } = job;
  const copy = info.videoCodec === "h264";
  const video = copy
    ? ["-c:v", "copy"]
    : // yuv420p and even dimensions: what every H.264 player accepts.
      [
        "-c:v",
        "libx264",
        "-preset",
        "veryfast",
        "-crf",
        "23",
        "-pix_fmt",
        "yuv420p",
        "-vf",
        "scale=trunc(iw/2)*2:trunc(ih/2)*2",
      ];
  await runFfmpeg(
    [
      ...inputArgs(job.inputPath),
      ...inputArgs(job.audioPath),
      "-map",
      `0:${info.videoStreamIndex}`,
      "-map",
      "1:a:0",
      ...video,
      "-c:a",
      "copy",
      "-movflags",
      "+faststart",
      "-max_muxing_queue_size",
      "4096",
      "-f",
      "mp4",
      localPath(job.outputPath),
    ],
    {
      timeoutMs: timeoutFor(info.durationSec, copy ? 1 : 10, 120_000),
      onProgressSec: (sec) => job.onProgress(sec / info.durationSec),
      ...(job.signal ? { signal: job.signal } : {}),
    },
  );
}

// ---------------------------------------------------------------- helpers

const roundMs = (seconds: number): number => Math.round(seconds * 1000) / 1000;

/** Per stage: fractions only increase (in steps of at least 1 % until 1) and each stage ends at 1 once. */
class ProgressReporter {
  private readonly last = new Map<DubStage, number>();

  constructor(private readonly callback: DubOptions["onProgress"]) {}

  report(stage: DubStage, fraction: number): void {
    if (!this.callback) return;
    const value = Number.isFinite(fraction) ? Math.min(1, Math.max(0, fraction)) : 0;
    const previous = this.last.get(stage);
    if (previous !== undefined && (value <= previous || (value < 1 && value - previous < 0.01))) return;
    this.last.set(stage, value);
    try {
      this.callback(stage, value);
    } catch {
      // Progress is advisory: a failing callback must neither fail the job nor crash the process
      // (it also runs inside ffmpeg's output handler). Cancelling goes through `signal`.
    }
  }
}

/** Maps with at most `limit` calls in flight, in input order; waits for all started calls before failing. */
async function mapLimit<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Promise<R>,
  signal?: AbortSignal,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  let failed = false;
  const worker = async (): Promise<void> => {
    while (!failed && next < items.length) {
      signal?.throwIfAborted();
      const index = next++;
      try {
        results[index] = await fn(items[index]!, index);
      } catch (error) {
        failed = true;
        throw error;
      }
    }
  };
  const outcomes = await Promise.allSettled(Array.from({ length: Math.min(limit, items.length) }, worker));
  const failure = outcomes.find((o): o is PromiseRejectedResult => o.status === "rejected");
  if (failure) throw failure.reason;
  return results;
}
