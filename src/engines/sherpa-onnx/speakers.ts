/**
 * Which neural speaker renders which library voice. The library has 35 female and 35 male voices;
 * a language's installed models have anywhere from one speaker (most Piper voices) to hundreds
 * (Piper's LibriTTS-R model: 904). Each library voice goes to a speaker of its gender, the voices of
 * a gender spread evenly over that gender's speakers, so as many voices sound distinct as the models
 * allow, and the first voice of each gender (the default) gets the first model's first speaker.
 *
 * A speaker's gender comes from the catalogue when it is published (single-speaker voices), from its
 * name where the model names its speakers (Kokoro, which also says each speaker's language), and is
 * otherwise measured: the model reads a reference sentence and its median F0 decides (read speech
 * of a TTS voice stays near its habitual pitch, unlike the live talkers voice-clone.ts matches). The
 * measurements are kept in `profileDir` so each model is measured once. Large models are measured on
 * an even sample of their speakers (`MAX_PROFILED`), which bounds the cost to a few seconds.
 */
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import path from "node:path";
import { z } from "zod";
import type { LanguageCode, Voice } from "../types.js";
import { VOICES } from "../../voices/library.js";
import { REFERENCE_SENTENCES } from "../../voices/reference-sentences.js";
import { measureVoice } from "../../voices/voice-features.js";

export interface NeuralSpeaker {
  readonly model: string;
  readonly id: number;
  readonly gender: Voice["gender"];
  /** Kokoro: the eSpeak NG voice for the speaker's non-Chinese text. */
  readonly lang?: string;
}

/** A speaker a model names (Kokoro): its language, gender and phonemizer voice, by speaker id. */
export interface NamedSpeaker {
  readonly id: number;
  readonly language: LanguageCode;
  readonly gender: Voice["gender"];
  readonly lang: string;
}

export interface ModelSpeakers {
  readonly name: string;
  readonly languages: readonly LanguageCode[];
  readonly speakers: number;
  readonly genders?: readonly Voice["gender"][];
  /** Speakers that serve one language each (a multi-language model's); others serve all of them. */
  readonly named?: readonly NamedSpeaker[];
}

/**
 * Kokoro's speakers from its `speaker_names` ("af_bella,am_adam,zf_xiaobei,…"): the first letter is
 * the language (a American English, b British English, z Mandarin, and others the model speaks
 * less well here), the second the gender. Names of other shapes are left out.
 */
export function kokoroSpeakers(names: string): NamedSpeaker[] {
  const languages: Record<string, { language: LanguageCode; lang: string }> = {
    a: { language: "en", lang: "en-us" },
    b: { language: "en", lang: "en-gb" },
    // Chinese text goes through the lexicon; what is not Chinese in it is read as American English.
    z: { language: "zh", lang: "en-us" },
  };
  return names.split(",").flatMap((name, id) => {
    const match = /^([a-z])([fm])_/u.exec(name.trim());
    const language = match && languages[match[1]!];
    if (!match || !language) return [];
    return [{ id, ...language, gender: match[2] === "f" ? "female" : "male" } satisfies NamedSpeaker];
  });
}

export interface SpeakerMap {
  languages(): LanguageCode[];
  speakerFor(language: LanguageCode, voice: Voice): NeuralSpeaker;
}

/** Speakers measured per multi-speaker model, evenly spaced over its speaker ids. */
export const MAX_PROFILED = 32;
/**
 * Median F0 below this is a man's voice: between typical adult male (85–155 Hz) and female
 * (165–255 Hz) speaking pitch.
 */
const MALE_BELOW_HZ = 160;
/** Raised when the measurement or its file format changes, so old files are measured again. */
const FORMAT = 1;

const profileSchema = z.object({
  format: z.literal(FORMAT),
  speakers: z.number(),
  genders: z.record(z.string(), z.enum(["female", "male"])),
});

export interface SpeakerMapOptions {
  readonly models: readonly ModelSpeakers[];
  readonly profileDir: string | undefined;
  /** Speech of one speaker of one model, for measuring. */
  readonly sample: (
    model: string,
    speaker: number,
    text: string,
  ) => Promise<{ samples: Float32Array; sampleRate: number }>;
}

export async function speakerMap(options: SpeakerMapOptions): Promise<SpeakerMap> {
  const all: (NeuralSpeaker & { languages: readonly LanguageCode[] })[] = [];
  for (const model of options.models) {
    if (model.named) {
      for (const { id, language, gender, lang } of model.named) {
        if (model.languages.includes(language))
          all.push({ model: model.name, id, gender, lang, languages: [language] });
      }
      continue;
    }
    const genders = model.genders ? knownGenders(model) : await measuredGenders(model, options);
    for (const [id, gender] of genders)
      all.push({ model: model.name, id, gender, languages: model.languages });
  }
  const languages = [...new Set(options.models.flatMap((model) => model.languages))];
  const byGender = (gender: Voice["gender"]) => VOICES.filter((voice) => voice.gender === gender);
  return {
    languages: () => languages,
    speakerFor(language, voice) {
      const serving = all.filter((speaker) => speaker.languages.includes(language));
      if (serving.length === 0) throw new Error(`sherpa-onnx TTS has no voice for language "${language}"`);
      // A language with voices of one gender only speaks every library voice with them.
      const own = serving.filter((speaker) => speaker.gender === voice.gender);
      const pool = own.length > 0 ? own : serving;
      // By id: voice matching hands over adjusted copies of library voices (voice-clone.ts).
      const library = byGender(voice.gender);
      const rank = Math.max(
        0,
        library.findIndex((v) => v.id === voice.id),
      );
      const index =
        pool.length >= library.length
          ? Math.floor((rank * pool.length) / Math.max(1, library.length))
          : rank % pool.length;
      const { model, id, gender, lang } = pool[index]!;
      return { model, id, gender, ...(lang ? { lang } : {}) };
    },
  };
}

function knownGenders(model: ModelSpeakers): Map<number, Voice["gender"]> {
  return new Map(model.genders!.slice(0, model.speakers).map((gender, id) => [id, gender]));
}

/** Speaker ids to measure: all of a small model's, an even sample of a large one's. */
export function profiledSpeakers(count: number): number[] {
  if (count <= MAX_PROFILED) return Array.from({ length: count }, (_, id) => id);
  return Array.from({ length: MAX_PROFILED }, (_, i) => Math.floor((i * count) / MAX_PROFILED));
}

async function measuredGenders(
  model: ModelSpeakers,
  options: SpeakerMapOptions,
): Promise<Map<number, Voice["gender"]>> {
  const file = options.profileDir && path.join(options.profileDir, `${model.name}.speakers.json`);
  if (file) {
    const stored = await readFile(file, "utf8")
      .then((text) => profileSchema.parse(JSON.parse(text)))
      .catch(() => undefined);
    if (stored && stored.speakers === model.speakers) {
      return new Map(Object.entries(stored.genders).map(([id, gender]) => [Number(id), gender]));
    }
  }
  const text = REFERENCE_SENTENCES[model.languages[0]!] ?? REFERENCE_SENTENCES.en!;
  const genders = new Map<number, Voice["gender"]>();
  for (const id of profiledSpeakers(model.speakers)) {
    const { samples, sampleRate } = await options.sample(model.name, id, text);
    const f0 = measureVoice(samples, sampleRate)?.medianF0Hz;
    // A speaker with nothing measurable is left out rather than guessed.
    if (f0 !== undefined) genders.set(id, f0 < MALE_BELOW_HZ ? "male" : "female");
  }
  if (genders.size === 0) throw new Error(`sherpa-onnx TTS: ${model.name} produced no measurable speech`);
  if (file) {
    const body = { format: FORMAT, speakers: model.speakers, genders: Object.fromEntries(genders) };
    // Written aside and renamed, so no process reads a torn file; failing only means measuring again.
    await mkdir(options.profileDir!, { recursive: true })
      .then(() => writeFile(`${file}.${process.pid}`, JSON.stringify(body)))
      .then(() => rename(`${file}.${process.pid}`, file))
      .catch(() => undefined);
  }
  return genders;
}
