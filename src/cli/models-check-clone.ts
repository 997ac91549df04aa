/**
 * `relay models check`'s clone test (models-check.ts runs it and prints its rows): does the tone
 * colour converter bring synthesized speech closer to a real speaker's voice?
 *
 * For each shipped recording of a real speaker (data/check/speakers/, credited in its README) the
 * converter's extractor takes the speaker's tone colour from it; an English voice (the first
 * installed sherpa-onnx English voice, else eSpeak NG) speaks a few check sentences, and they are
 * converted to that tone colour. The speaker-embedding model then gives the cosine similarity to
 * the recording of the converted speech and of the same speech unconverted. **A row passes when
 * the converted speech is the more similar** (higher is better): the conversion moved the voice
 * towards the speaker. One voice speaks for every speaker, so the unconverted similarity is each
 * speaker's baseline. That catches a converter that does nothing or harm (a wrong file, broken
 * wiring), not a slightly worse one. With a stand-in model (the tests') nothing about quality is
 * shown: the rows only say that everything loaded and ran.
 */
import { readdir } from "node:fs/promises";
import path from "node:path";
import type {
  SpeakerEngine,
  SynthesizedAudio,
  ToneColorEngine,
  TtsEngine,
  Voiceprint,
} from "../core/contracts.js";
import { concatFloat32 } from "../audio/pcm.js";
import { resample } from "../audio/resampler.js";
import { readWav } from "../audio/wav.js";
import type { ToneColorModelEntry } from "../engines/openvoice/catalogue.js";
import { toneColorLoadProblem, toneColorModelDir } from "../engines/openvoice/models.js";
import type { SherpaEntryOf } from "../engines/sherpa-onnx/catalogue.js";
import { loadProblemOf, neuralVoiceModels, sherpaModelDir } from "../engines/sherpa-onnx/models.js";
import { defaultVoice } from "../voices/library.js";

/** The speaker-embedding model's input rate. */
const SPEAKER_RATE = 16_000;
/** Sentences spoken per speaker: about ten seconds of speech, enough for a steady embedding. */
const SENTENCES = 3;

export interface CloneSetup {
  /** The models directory. */
  readonly dir: string;
  readonly toneColor: ToneColorModelEntry;
  readonly speaker: SherpaEntryOf<"speaker">;
  /** The English voice that speaks; eSpeak NG when there is none. */
  readonly voice: SherpaEntryOf<"tts"> | undefined;
  /** The directory of the speakers' recordings, `<name>.wav`. */
  readonly recordings: string;
  readonly sentences: readonly string[];
  readonly timeoutMs: number;
}

export interface CloneFigures {
  /** Cosine similarity to the speaker's recording of the converted speech. */
  readonly converted: number;
  /** The same, of the speech before conversion: what `converted` must beat. */
  readonly unconverted: number;
  /** Speaking and converting, per sentence. */
  readonly msPerSentence: number;
  readonly ttsRtf: number;
  readonly cloneRtf: number;
}

export interface CloneOutcome {
  /** The recording's name (its file name without `.wav`). */
  readonly speaker: string;
  readonly result: CloneFigures | { readonly error: unknown };
}

interface Engines {
  readonly tts: TtsEngine;
  readonly toneColor: ToneColorEngine;
  readonly speakers: SpeakerEngine;
}

async function openTts(setup: CloneSetup): Promise<TtsEngine> {
  if (setup.voice) {
    const { createSherpaTtsEngine } = await import("../engines/sherpa-onnx/tts.js");
    return createSherpaTtsEngine({
      models: neuralVoiceModels([setup.voice.name], setup.dir),
      timeoutMs: setup.timeoutMs,
    });
  }
  const { createEspeakEngine } = await import("../engines/espeak-ng/index.js");
  return createEspeakEngine({ timeoutMs: setup.timeoutMs });
}

async function openToneColor(setup: CloneSetup): Promise<ToneColorEngine> {
  const { toneColor: entry, dir } = setup;
  const problem = toneColorLoadProblem(entry, dir);
  if (problem) throw new Error(`${entry.name} is not loaded: ${problem}`);
  const { createOpenVoiceEngine } = await import("../engines/openvoice/index.js");
  return createOpenVoiceEngine({ entry, dir: toneColorModelDir(entry, dir), timeoutMs: setup.timeoutMs });
}

async function openSpeakers(setup: CloneSetup): Promise<SpeakerEngine> {
  const { speaker: entry, dir } = setup;
  const problem = loadProblemOf(entry, dir);
  if (problem) throw new Error(`${entry.name} is not loaded: ${problem}`);
  const { createSherpaSpeakerEngine } = await import("../engines/sherpa-onnx/speaker-embedding.js");
  return createSherpaSpeakerEngine({ model: path.join(sherpaModelDir(entry, dir), entry.speaker.model) });
}

/** All three, or none: those that loaded are closed when another does not. */
async function openEngines(setup: CloneSetup): Promise<Engines> {
  const [tts, toneColor, speakers] = await Promise.allSettled([
    openTts(setup),
    openToneColor(setup),
    openSpeakers(setup),
  ]);
  if (tts.status === "fulfilled" && toneColor.status === "fulfilled" && speakers.status === "fulfilled")
    return { tts: tts.value, toneColor: toneColor.value, speakers: speakers.value };
  const opened = [tts, toneColor, speakers].flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
  await Promise.all(opened.map((engine) => engine.close()));
  const failure = [tts, toneColor, speakers].find((r) => r.status === "rejected")!;
  throw failure.reason;
}

/** One engine's pieces (so of one rate) one after another, at the speaker-embedding model's rate. */
function joinedAtSpeakerRate(pieces: readonly SynthesizedAudio[]): Promise<Float32Array> {
  const joined = concatFloat32(pieces.map((piece) => piece.samples));
  return resample(joined, pieces[0]?.sampleRate ?? SPEAKER_RATE, SPEAKER_RATE);
}

/** The model label of the clone rows: who speaks, who converts, who judges. */
export function cloneModelLabel(setup: Pick<CloneSetup, "voice" | "toneColor" | "speaker">): string {
  return `${setup.voice?.name ?? "espeak-ng"} → ${setup.toneColor.name} (${setup.speaker.name})`;
}

/** One outcome per recording in `setup.recordings`, in name order. */
export async function cloneChecks(setup: CloneSetup): Promise<CloneOutcome[]> {
  const names = (await readdir(setup.recordings))
    .filter((file) => file.endsWith(".wav"))
    .sort()
    .map((file) => file.slice(0, -".wav".length));
  if (names.length === 0) throw new Error(`no speakers' recordings (.wav) in ${setup.recordings}`);
  const everyOne = (error: unknown) => names.map((speaker) => ({ speaker, result: { error } }));
  let engines: Engines;
  try {
    engines = await openEngines(setup);
  } catch (error) {
    return everyOne(error);
  }
  const { tts, toneColor, speakers } = engines;
  try {
    const sentences = setup.sentences.slice(0, SENTENCES);
    // Spoken once, converted for each speaker.
    const spoken: SynthesizedAudio[] = [];
    const speakingStarted = performance.now();
    for (const text of sentences)
      spoken.push(await tts.synthesize({ text, language: "en", voice: defaultVoice("female") }));
    const speakingMs = performance.now() - speakingStarted;
    const seconds = spoken.reduce((sum, audio) => sum + audio.samples.length / audio.sampleRate, 0);
    if (seconds === 0) throw new Error("the voice said nothing");
    const similarity = (a: Voiceprint, b: Voiceprint, what: string): number => {
      const value = 1 - speakers.distance(a, b);
      if (!Number.isFinite(value)) throw new Error(`the speaker model heard no speech in ${what}`);
      return value;
    };
    const unconverted = await speakers.voiceprint(await joinedAtSpeakerRate(spoken));

    const outcomes: CloneOutcome[] = [];
    for (const speaker of names) {
      try {
        const recording = await readWav(path.join(setup.recordings, `${speaker}.wav`));
        const target = await toneColor.toneColor(recording);
        const reference = await speakers.voiceprint(
          await resample(recording.samples, recording.sampleRate, SPEAKER_RATE),
        );
        const converted: SynthesizedAudio[] = [];
        const convertingStarted = performance.now();
        for (const audio of spoken)
          for await (const piece of toneColor.convert(audio, target)) converted.push(piece);
        const convertingMs = performance.now() - convertingStarted;
        const print = await speakers.voiceprint(await joinedAtSpeakerRate(converted));
        outcomes.push({
          speaker,
          result: {
            converted: similarity(print, reference, `the converted speech or ${speaker}.wav`),
            unconverted: similarity(unconverted, reference, "the unconverted speech"),
            msPerSentence: (speakingMs + convertingMs) / sentences.length,
            ttsRtf: speakingMs / 1000 / seconds,
            cloneRtf: convertingMs / 1000 / seconds,
          },
        });
      } catch (error) {
        outcomes.push({ speaker, result: { error } });
      }
    }
    return outcomes;
  } catch (error) {
    return everyOne(error);
  } finally {
    await Promise.all([tts.close(), toneColor.close(), speakers.close()]);
  }
}
