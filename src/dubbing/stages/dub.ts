/**
 * The dubbing pipeline: media file in, dubbed media file and segments out.
 *
 *   probing → segmenting (extract 16 kHz mono PCM, Silero VAD + SpeechSegmenter, then the speakers:
 *   spans split where the voice changes, each labelled with its speaker) → recognizing →
 *   translating → synthesizing → fitting (time-stretch each clip into its slot of the 48 kHz dubbed
 *   track) → mixing (ducked original + dubbed track, encoded) → muxing (video copied or encoded to H.264)
 *
 * Intermediate files live in a private directory under `outputDir`, removed at the end either way;
 * memory stays bounded by one segment per worker whatever the input's length.
 *
 * This module only orchestrates: each stage lives in its own module (speech-audio, recognition,
 * translation, synthesis, dub-track, mixing, muxing), with progress rules in progress.ts.
 */
import { sessionContext } from "../../core/glossary.js";
import { availableParallelism } from "node:os";
import { mkdir, mkdtemp, open, rm } from "node:fs/promises";
import path from "node:path";
import type { EngineRegistry } from "../../engines/routing/registry.js";
import type { LanguageCode, Voice } from "../../core/contracts.js";
import type { VoiceFeatures } from "../../voices/voice-features.js";
import { translatorFor } from "../../engines/routing/translator.js";
import { genderDefault, MatchedVoices } from "../../speakers/voice-choice.js";
import { ClonedVoices, SpeakerToneColors } from "../../speakers/tone-colors.js";
import { voiceClonerFor } from "../../voices/voice-clone.js";
import { buildDubTrack } from "./dub-track.js";
import { UnsupportedLanguageError } from "../media/errors.js";
import { probe } from "../media/ffmpeg.js";
import { assertDubbable } from "../media/input-checks.js";
import { dubGain, duckSpans, mixAudio } from "./mixing.js";
import { writeOutput } from "./muxing.js";
import { ProgressReporter, type DubStage } from "./progress.js";
import { recognizeAll } from "./recognition.js";
import { sourceCandidates } from "./source-language.js";
import { followSpeakers } from "./speakers.js";
import { segmentSpeech } from "../media/speech-audio.js";
import { synthesizeAll } from "./synthesis.js";
import type { ClipPlacement } from "./timeline.js";
import { translateAll, type DubSegment } from "./translation.js";

export interface DubOptions {
  readonly inputPath: string;
  /** Created if missing; receives `<outputName>.mp4` or `.mp3`. */
  readonly outputDir: string;
  readonly registry: EngineRegistry;
  readonly sourceLang: LanguageCode | "auto";
  readonly targetLang: LanguageCode;
  /**
   * "auto" (default): each speaker is dubbed in the library voice matched to theirs; "clone": that
   * voice converted to the speaker's own tone colour (where a converter is loaded); or one library
   * voice for every line.
   */
  readonly voice?: Voice | "auto" | "clone";
  /** Each stage reports fractions 0..1, non-decreasing, ending with 1. */
  readonly onProgress?: (stage: DubStage, fraction: number) => void;
  /** Called once the source language is settled (resolved, when `sourceLang` is "auto"). */
  readonly onSourceLanguage?: (language: LanguageCode) => void;
  readonly signal?: AbortSignal;
  /** Output file name without extension; default "dubbed". */
  readonly outputName?: string;
  /** Segments recognized, synthesized or fitted at once; default min(2, CPUs). */
  readonly concurrency?: number;
  /** Whose job: shared engines serve accounts in turn (`TranslateRequest.account`). */
  readonly account?: string;
  /** Names and jargon, as a session's `context`: for recognition, translation and so subtitles. */
  readonly context?: string;
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

/** Share of "segmenting" before the speakers are followed (extraction and VAD). */
const SPEECH_SHARE = 0.9;

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
  const voice = options.voice ?? "auto";
  // Each speaker's speech is measured as the speakers are followed (before the language is known).
  let match: ((speaker: VoiceFeatures, gender?: Voice["gender"]) => Voice | undefined) | undefined;
  const matched =
    voice === "auto" || voice === "clone"
      ? new MatchedVoices({
          match: (speaker, _language, gender) => match?.(speaker, gender),
          fallback: (speaker) => genderDefault(speaker),
        })
      : undefined;
  // Tone colours are made from this job's speech only, and forgotten with it.
  const toneColors =
    matched && voice === "clone" && registry.toneColor
      ? new SpeakerToneColors(registry.toneColor, options.account)
      : undefined;
  const voices = matched && toneColors ? new ClonedVoices(matched, toneColors) : matched;

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
    const audio = {
      original: path.join(work, "speech-16k.raw"),
      levelled: path.join(work, "speech-16k-levelled.raw"),
    };
    const speechSpans = await segmentSpeech({
      inputPath: options.inputPath,
      info,
      vad: registry.vad,
      audio,
      onProgress: (fraction) => progress.report("segmenting", SPEECH_SHARE * fraction),
      ...withSignal,
    });
    const levelled = await open(audio.levelled, "r");
    const spans = await followSpeakers({
      engine: registry.speakers,
      audio: levelled,
      spans: speechSpans,
      ...(voices ? { voices } : {}),
      onProgress: (fraction) => progress.report("segmenting", SPEECH_SHARE + (1 - SPEECH_SHARE) * fraction),
      ...withSignal,
    }).finally(() => levelled.close());
    progress.report("segmenting", 1);

    // d. recognize (choosing the language first when asked to)
    progress.report("recognizing", 0);
    const context = sessionContext(options.context);
    const { language, recognized } = await recognizeAll(registry, candidates, audio, spans, {
      concurrency,
      targetLang,
      identify: options.sourceLang === "auto",
      onLanguage: (chosen) => options.onSourceLanguage?.(chosen),
      onProgress: (fraction) => progress.report("recognizing", fraction),
      context,
      ...withSignal,
    });
    // Spans where the recognizer heard no words (noise, music) are not dubbed.
    const speech = recognized.filter((r) => r.text !== "");
    progress.report("recognizing", 1);

    // e. translate
    if (registry.translationRoutes(language, targetLang).length === 0)
      throw new UnsupportedLanguageError(`no translation from "${language}" to "${targetLang}"`);
    progress.report("translating", 0);
    const segments = await translateAll(translatorFor(registry, targetLang), language, speech, {
      ...(options.account === undefined ? {} : { account: options.account }),
      onProgress: (fraction) => progress.report("translating", fraction),
      context,
      ...withSignal,
    });
    progress.report("translating", 1);

    // f. synthesize every line; clips wait on disk so memory does not grow with the input's length.
    progress.report("synthesizing", 0);
    if (voices) {
      // The library is measured once per engine version (a few seconds, kept in DATA_DIR); a job can
      // wait for it. If it cannot be measured, speakers keep a default voice of their gender.
      const cloner = voiceClonerFor(synthesizer, language, targetLang, registry.voiceMeasurements);
      await cloner.prepare().catch(() => undefined);
      match = (speaker, gender) => cloner.match(speaker, gender);
    }
    // Every speaker's speech was measured before the first line: all their lines get one voice (and
    // one tone colour, made from all of their speech).
    await toneColors?.settle();
    const lineVoices = segments.map((segment) =>
      voices ? voices.voiceFor(segment.speaker, targetLang) : { voice: voice as Voice, matched: false },
    );
    const dubbed = segments.map((segment, i) => ({ ...segment, voiceId: lineVoices[i]!.voice.id }));
    const clips = await synthesizeAll(synthesizer, dubbed, {
      language: targetLang,
      voices: lineVoices,
      ...(registry.toneColor ? { converter: registry.toneColor } : {}),
      workDir: work,
      concurrency,
      ...(options.account === undefined ? {} : { account: options.account }),
      onProgress: (fraction) => progress.report("synthesizing", fraction),
      ...withSignal,
    });
    progress.report("synthesizing", 1);

    // g. fit each clip into its slot and write it into the dubbed track.
    progress.report("fitting", 0);
    const dubPath = path.join(work, "dub-48k.f32");
    const timeline = await buildDubTrack({
      segments,
      clips,
      gain: dubGain(
        speech.map((s) => s.energy),
        clips,
      ),
      durationSec: info.durationSec,
      dubPath,
      concurrency,
      onProgress: (fraction) => progress.report("fitting", fraction),
      ...withSignal,
    });
    progress.report("fitting", 1);

    // h. mix: ducked original + dubbed track, encoded to the output's audio codec.
    progress.report("mixing", 0);
    const outputKind = info.hasVideo ? "video" : "audio";
    const mixedPath = path.join(work, outputKind === "video" ? "mix.m4a" : "mix.mp3");
    await mixAudio({
      inputPath: options.inputPath,
      dubPath,
      info,
      duckSpans: duckSpans(segments, timeline),
      outputPath: mixedPath,
      onProgress: (fraction) => progress.report("mixing", fraction),
      ...withSignal,
    });
    progress.report("mixing", 1);

    // i. mux
    progress.report("muxing", 0);
    const outputPath = await writeOutput({
      inputPath: options.inputPath,
      mixedPath,
      info,
      outputKind,
      workDir: work,
      outputDir: options.outputDir,
      outputName: options.outputName ?? "dubbed",
      onProgress: (fraction) => progress.report("muxing", fraction),
      ...withSignal,
    });
    progress.report("muxing", 1);

    return {
      outputPath,
      outputKind,
      inputDurationSec: info.durationSec,
      detectedSourceLang: language,
      segments: dubbed,
      timeline,
    };
  } finally {
    toneColors?.close();
    await rm(work, { recursive: true, force: true });
  }
}
