/**
 * Two-person conversations built from the real speech in ../shared/data/speech, with the truth of
 * who speaks when: for the speaker-labelling benchmark and tests.
 *
 * The speakers the material offers (gender from the recordings' metadata and measured pitch):
 *   - women: LJSpeech's reader (32 clips), LibriSpeech speaker 1995 (one 9 s clip);
 *   - men: the LibriVox reader of "Sense and Sensibility" (5 clips), JFK (one 11 s clip);
 *   - FLEURS clips, one speaker each, whose median F0 leaves no doubt (FLEURS's gender column is
 *     not in the fixtures, so it was measured twice, by autocorrelation and by relay's YIN): men
 *     de-009 (112/118 Hz), de-007 (105/107 Hz), fr-009 (96/101 Hz); women es-007 (201/204 Hz),
 *     fr-008 (219/227 Hz). The other FLEURS clips (135–185 Hz, or estimators disagreeing) are left
 *     out: pitch alone cannot say who they are.
 * Clips longer than 6 s are cut at their quietest 100 ms between 3 and 6 s into the clip, so every
 * turn lasts 3–15 s and the one-clip speakers give several turns. Turns alternate, separated by
 * pauses of 0.2–0.9 s (seeded): shorter than the live end-of-utterance silence (0.5 s) about half
 * the time, so many changes of speaker happen inside one utterance.
 */
import { readdirSync } from "node:fs";
import { readWavAsPcm16 } from "../../src/audio/wav.js";
import { sharedPath } from "./shared.js";

const RATE = 16_000;

export interface Turn {
  readonly speaker: string;
  readonly startSample: number;
  readonly endSample: number;
}

export interface Conversation {
  readonly name: string;
  readonly kind: "man and woman" | "two men" | "two women";
  readonly pcm: Int16Array;
  readonly turns: readonly Turn[];
}

/** The person speaking most of the span from `startSample` to `endSample` (16 kHz), from the truth. */
export function speakerOf(
  conversation: Conversation,
  startSample: number,
  endSample: number,
): string | undefined {
  let best: { speaker: string; overlap: number } | undefined;
  for (const turn of conversation.turns) {
    const overlap = Math.min(endSample, turn.endSample) - Math.max(startSample, turn.startSample);
    if (overlap > 0 && (!best || overlap > best.overlap)) best = { speaker: turn.speaker, overlap };
  }
  return best?.speaker;
}

export type SpeakerName =
  | "lj"
  | "ls1995"
  | "librivox"
  | "jfk"
  | "fleurs-de-009"
  | "fleurs-de-007"
  | "fleurs-fr-009"
  | "fleurs-es-007"
  | "fleurs-fr-008";

export const SPEAKERS: Readonly<Record<SpeakerName, { gender: "female" | "male"; title: string }>> = {
  lj: { gender: "female", title: "LJSpeech reader" },
  ls1995: { gender: "female", title: "LibriSpeech 1995" },
  librivox: { gender: "male", title: "LibriVox reader" },
  jfk: { gender: "male", title: "JFK" },
  "fleurs-de-009": { gender: "male", title: "FLEURS de-009" },
  "fleurs-de-007": { gender: "male", title: "FLEURS de-007" },
  "fleurs-fr-009": { gender: "male", title: "FLEURS fr-009" },
  "fleurs-es-007": { gender: "female", title: "FLEURS es-007" },
  "fleurs-fr-008": { gender: "female", title: "FLEURS fr-008" },
};

const clips = new Map<SpeakerName, Promise<Int16Array[]>>();

/** Each speaker's clips, read (and resampled to 16 kHz) once per process. */
export function clipsOf(speaker: SpeakerName): Promise<Int16Array[]> {
  let read = clips.get(speaker);
  if (!read) {
    read = readClips(speaker);
    clips.set(speaker, read);
  }
  return read;
}

async function readClips(speaker: SpeakerName): Promise<Int16Array[]> {
  const speech = (...parts: string[]) => sharedPath("data/speech", ...parts);
  switch (speaker) {
    case "lj": {
      const files = readdirSync(speech("ljspeech/wavs")).sort();
      return Promise.all(files.map((file) => readWavAsPcm16(speech("ljspeech/wavs", file))));
    }
    case "ls1995":
      return [await readWavAsPcm16(speech("misc/librispeech-1995-1837-0001.wav"))];
    case "librivox": {
      const files = readdirSync(speech("librivox-pocketsphinx"))
        .filter((file) => file.startsWith("sense_and_sensibility"))
        .sort();
      return Promise.all(files.map((file) => readWavAsPcm16(speech("librivox-pocketsphinx", file))));
    }
    case "jfk":
      return [await readWavAsPcm16(speech("misc/jfk.wav"))];
    default:
      return [trimSilence(await readWavAsPcm16(speech(`fleurs-dev/${speaker}.wav`)))];
  }
}

/**
 * FLEURS clips open and close with up to 3.5 s of near silence, which would make turns of nobody:
 * cut to 0.1 s around the first and last 10 ms louder than 30 dB below the clip's loudest.
 */
function trimSilence(clip: Int16Array): Int16Array {
  const step = RATE / 100;
  const energies: number[] = [];
  for (let at = 0; at + step <= clip.length; at += step) {
    let energy = 0;
    for (let i = at; i < at + step; i++) energy += clip[i]! * clip[i]!;
    energies.push(energy);
  }
  const floor = Math.max(...energies) * 1e-3;
  const first = energies.findIndex((energy) => energy > floor);
  const last = energies.findLastIndex((energy) => energy > floor);
  return clip.subarray(Math.max(0, (first - 10) * step), Math.min(clip.length, (last + 11) * step));
}

/** Cuts clips longer than 6 s at their quietest 100 ms between 3 and 6 s in, repeatedly. */
function turnsOf(clips: readonly Int16Array[]): Int16Array[] {
  const turns: Int16Array[] = [];
  for (let clip of clips) {
    while (clip.length > 6 * RATE) {
      const step = RATE / 10;
      let quietest = 3 * RATE;
      let lowest = Infinity;
      for (let at = 3 * RATE; at + step <= 6 * RATE; at += step / 2) {
        let energy = 0;
        for (let i = at; i < at + step; i++) energy += clip[i]! * clip[i]!;
        if (energy < lowest) [lowest, quietest] = [energy, at + step / 2];
      }
      turns.push(clip.subarray(0, quietest));
      clip = clip.subarray(quietest);
    }
    if (clip.length >= 3 * RATE) turns.push(clip);
    else if (turns.length > 0 && clip.length > 0) {
      // A short remainder joins the turn it was cut from.
      const previous = turns.pop()!;
      const joined = new Int16Array(previous.length + clip.length);
      joined.set(previous);
      joined.set(clip, previous.length);
      turns.push(joined);
    }
  }
  return turns;
}

/** A small deterministic generator (mulberry32), so every run builds the same conversations. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Alternates the two speakers' turns (a first) for as long as both have turns left, at most
 * `maxTurns` each, with 0.2–0.9 s pauses of digital silence plus a little noise.
 */
export async function buildConversation(
  a: SpeakerName,
  b: SpeakerName,
  options: { seed?: number; maxTurns?: number } = {},
): Promise<Conversation> {
  const next = random(options.seed ?? 1);
  const [turnsA, turnsB] = await Promise.all([clipsOf(a).then(turnsOf), clipsOf(b).then(turnsOf)]);
  const count = Math.min(turnsA.length, turnsB.length, options.maxTurns ?? 6);
  const pieces: { speaker: string; pcm: Int16Array }[] = [];
  for (let i = 0; i < count; i++)
    pieces.push({ speaker: a, pcm: turnsA[i]! }, { speaker: b, pcm: turnsB[i]! });
  const pauses = pieces.map(() => Math.round((0.2 + 0.7 * next()) * RATE));
  const total = pieces.reduce((sum, piece, i) => sum + piece.pcm.length + pauses[i]!, RATE / 2);
  const pcm = new Int16Array(total);
  for (let i = 0; i < pcm.length; i++) pcm[i] = Math.round((next() - 0.5) * 8);
  const turns: Turn[] = [];
  let at = RATE / 2;
  pieces.forEach((piece, i) => {
    for (let k = 0; k < piece.pcm.length; k++) pcm[at + k] = piece.pcm[k]!;
    turns.push({ speaker: piece.speaker, startSample: at, endSample: at + piece.pcm.length });
    at += piece.pcm.length + pauses[i]!;
  });
  const gender = (name: SpeakerName) => SPEAKERS[name].gender;
  const kind = gender(a) !== gender(b) ? "man and woman" : gender(a) === "male" ? "two men" : "two women";
  return { name: `${a}+${b}`, kind, pcm, turns };
}

/**
 * Every pairing of the LJSpeech, LibriSpeech, LibriVox and JFK speakers, each speaker opening once
 * where both orders differ; then FLEURS men and women with each other and with those speakers
 * (FLEURS clips of one language may share a speaker, so same-gender pairs cross languages).
 */
export const CONVERSATION_PAIRS: readonly (readonly [SpeakerName, SpeakerName])[] = [
  ["lj", "librivox"],
  ["librivox", "lj"],
  ["lj", "jfk"],
  ["ls1995", "librivox"],
  ["jfk", "ls1995"],
  ["librivox", "jfk"],
  ["jfk", "librivox"],
  ["lj", "ls1995"],
  ["ls1995", "lj"],
  ["fleurs-de-009", "fleurs-fr-008"],
  ["fleurs-fr-008", "fleurs-fr-009"],
  ["fleurs-es-007", "fleurs-de-007"],
  ["fleurs-de-009", "lj"],
  ["lj", "fleurs-de-007"],
  ["librivox", "fleurs-fr-008"],
  ["ls1995", "fleurs-fr-009"],
  ["fleurs-fr-009", "fleurs-de-009"],
  ["fleurs-es-007", "fleurs-fr-008"],
];
