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
 * measurements are kept in the voice measurement store (src/voices/measurement-store.ts), so each
 * model is measured once. Large models are measured on
 * an even sample of their speakers (`MAX_PROFILED`), which bounds the cost to a few seconds.
 */
import type { EngineInfo, LanguageCode, Voice } from "../../core/contracts.js";
import { VOICES } from "../../voices/library.js";
import { REFERENCE_SENTENCES } from "../../voices/reference-sentences.js";
import type { StoredMeasurement, VoiceMeasurementStore } from "../../voices/measurement-store.js";
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
  /** What identifies the model's build (its measurements are made again when it changes). */
  readonly version: string;
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
export interface SpeakerMapOptions {
  readonly models: readonly ModelSpeakers[];
  /** Where measured speakers are kept between processes; without one they are measured per process. */
  readonly store: VoiceMeasurementStore | undefined;
  /** Speech of one speaker of one model, for measuring. */
  readonly sample: (
    model: string,
    speaker: number,
    text: string,
  ) => Promise<{ samples: Float32Array; sampleRate: number }>;
  /**
   * A model whose speakers could not be measured is left out and told here (the others serve);
   * without it, the failure is the map's.
   */
  readonly onFailed?: (model: string, error: Error) => void;
}

export async function speakerMap(options: SpeakerMapOptions): Promise<SpeakerMap> {
  const all: (NeuralSpeaker & { languages: readonly LanguageCode[] })[] = [];
  const usable: ModelSpeakers[] = [];
  for (const model of options.models) {
    if (model.named) {
      for (const { id, language, gender, lang } of model.named) {
        if (model.languages.includes(language))
          all.push({ model: model.name, id, gender, lang, languages: [language] });
      }
      usable.push(model);
      continue;
    }
    let genders: Map<number, Voice["gender"]>;
    try {
      genders = model.genders ? knownGenders(model) : await measuredGenders(model, options);
    } catch (error) {
      if (!options.onFailed) throw error;
      options.onFailed(model.name, error as Error);
      continue;
    }
    usable.push(model);
    for (const [id, gender] of genders)
      all.push({ model: model.name, id, gender, languages: model.languages });
  }
  if (usable.length === 0) throw new Error("sherpa-onnx TTS: no voice model could be measured");
  const languages = [...new Set(usable.flatMap((model) => model.languages))];
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
  // One store entry per model: its speakers' measurements, by speaker id.
  const identity: EngineInfo = { id: `sherpa-onnx-speakers-${model.name}`, version: model.version };
  // An unreadable store only means measuring again.
  const stored =
    (await options.store?.read(identity).catch(() => undefined)) ?? new Map<string, StoredMeasurement>();
  const fresh = new Map<string, StoredMeasurement>();
  const text = REFERENCE_SENTENCES[model.languages[0]!] ?? REFERENCE_SENTENCES.en!;
  const genders = new Map<number, Voice["gender"]>();
  for (const id of profiledSpeakers(model.speakers)) {
    let features = stored.get(String(id));
    if (features === undefined) {
      const { samples, sampleRate } = await options.sample(model.name, id, text);
      features = measureVoice(samples, sampleRate) ?? null;
      fresh.set(String(id), features);
    }
    // A speaker with nothing measurable is left out rather than guessed.
    if (features) genders.set(id, features.medianF0Hz < MALE_BELOW_HZ ? "male" : "female");
  }
  if (genders.size === 0) throw new Error(`sherpa-onnx TTS: ${model.name} produced no measurable speech`);
  // Nor does a failed write cost more than measuring again in the next process.
  if (fresh.size > 0) await options.store?.write(identity, fresh).catch(() => undefined);
  return genders;
}
