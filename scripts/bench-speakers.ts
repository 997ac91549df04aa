/**
 * Speaker labelling (relay-2 `speaker`): two-person conversations built from the real speech in
 * ../shared/data/speech (test/support/conversations.ts) run through the level control, Silero VAD,
 * the live segmenter and the speaker tracker exactly as a live session feeds them, and the labels
 * are scored against the truth.
 *
 *   - right label: share of the speech (VAD windows inside a true turn) whose label maps to the
 *     person speaking, under the best one-to-one mapping of labels to people (extra labels count
 *     as wrong);
 *   - new labels for known speakers: labels beyond the two people, per conversation and per turn;
 *   - purity: per person, the share of their labelled speech carrying their majority label (one
 *     label for two people would score 1 for both, so the table also says whether the two
 *     majority labels differ).
 *
 * Then the voices (`voiceId=auto`, dubbing's `voice=auto`), with eSpeak NG's library measurements
 * (English speech, Spanish voice):
 *   - on every man-and-woman conversation, each line (a stretch of one label) goes to the voice
 *     chooser under its label, as a session hands it over, and is spoken with the voice chosen
 *     after it: lines of each person given a voice of the other gender;
 *   - each person alone: their turns fed in order to the voice chooser, the speech it took for the
 *     first match, and the voice (and its gender) once locked.
 *
 *   npm run bench:speakers
 */
import { AutomaticGain } from "../src/audio/level.js";
import { int16ToFloat32 } from "../src/audio/pcm.js";
import { createEspeakEngine } from "../src/engines/espeak-ng/index.js";
import { createMfccSpeakerEngine } from "../src/engines/mfcc-speaker/index.js";
import { createSileroVadEngine } from "../src/engines/silero-vad/index.js";
import { DEFAULT_SEGMENTER_OPTIONS, SpeechSegmenter } from "../src/pipeline/segmenter.js";
import { SpeakerTracker } from "../src/speakers/tracker.js";
import { genderDefault, MatchedVoices } from "../src/speakers/voice-choice.js";
import { voiceClonerFor } from "../src/voices/voice-clone.js";
import {
  buildConversation,
  CONVERSATION_PAIRS,
  speakerOf,
  SPEAKERS,
  type Conversation,
  type SpeakerName,
} from "../test/support/conversations.js";

const WINDOW = 512;
/** Speech handed to the voice chooser at a time, as a live session does (250 ms). */
const PIECE = 4_000;

interface Scored {
  readonly conversation: Conversation;
  /** The seed of its pauses. */
  readonly seed: number;
  /** The conversation after the level control, as the tracker and the voice chooser hear it. */
  readonly leveled: Int16Array;
  readonly labelled: readonly (string | undefined)[];
  readonly correct: number;
  readonly speech: number;
  readonly extraLabels: number;
  readonly labels: number;
  /** Per person: the share of their labelled speech carrying their majority label, and that label. */
  readonly purity: ReadonlyMap<string, { readonly share: number; readonly majority: string }>;
}

/** One label per VAD window of speech, as the live pipeline would decide it. */
async function label(pcm: Int16Array): Promise<(string | undefined)[]> {
  const vad = (await vadEngine).createStream();
  const segmenter = new SpeechSegmenter({ ...DEFAULT_SEGMENTER_OPTIONS, windowMs: 32 });
  const tracker = new SpeakerTracker(speakerEngine);
  const labels: (string | undefined)[] = new Array(Math.floor(pcm.length / WINDOW)).fill(undefined);
  let run: number[] = [];
  let inUtterance = false;
  const close = (speaker: string | undefined) => {
    for (const w of run) labels[w] = speaker;
    run = [];
  };
  for (let w = 0; w < labels.length; w++) {
    const window = int16ToFloat32(pcm.subarray(w * WINDOW, (w + 1) * WINDOW));
    const event = segmenter.update(await vad.probability(window));
    if (event === "start") inUtterance = true;
    if (!inUtterance) continue;
    run.push(w);
    const started = performance.now();
    const change = await tracker.push(window, w * WINDOW);
    trackerMs += performance.now() - started;
    trackedSeconds += WINDOW / 16_000;
    if (change) {
      const first = Math.floor(change.atSample / WINDOW);
      const before = run.filter((i) => i < first);
      const after = run.filter((i) => i >= first);
      run = before;
      // The run before the change keeps the label it had when it ended.
      close(change.before);
      run = after;
    }
    if (event === "end") {
      const started = performance.now();
      close((await tracker.endUtterance()).speaker);
      trackerMs += performance.now() - started;
      inUtterance = false;
    }
  }
  if (inUtterance) close((await tracker.endUtterance()).speaker);
  return labels;
}

function score(
  conversation: Conversation,
  seed: number,
  leveled: Int16Array,
  labels: readonly (string | undefined)[],
): Scored {
  const people = [...new Set(conversation.turns.map((turn) => turn.speaker))];
  const counts = new Map<string, Map<string, number>>();
  let speech = 0;
  for (const turn of conversation.turns) {
    for (let w = Math.ceil(turn.startSample / WINDOW); (w + 1) * WINDOW <= turn.endSample; w++) {
      const got = labels[w];
      if (got === undefined) continue;
      speech += 1;
      const row = counts.get(got) ?? new Map<string, number>();
      row.set(turn.speaker, (row.get(turn.speaker) ?? 0) + 1);
      counts.set(got, row);
    }
  }
  const distinct = [...counts.keys()];
  // Best one-to-one mapping of labels to the two people (few labels: try every assignment).
  let best = 0;
  const assign = (i: number, used: Set<string>, total: number) => {
    if (i === distinct.length) {
      best = Math.max(best, total);
      return;
    }
    assign(i + 1, used, total);
    for (const person of people) {
      if (used.has(person)) continue;
      used.add(person);
      assign(i + 1, used, total + (counts.get(distinct[i]!)!.get(person) ?? 0));
      used.delete(person);
    }
  };
  assign(0, new Set(), 0);
  const purity = new Map<string, { share: number; majority: string }>();
  for (const person of people) {
    const own = distinct.map((got) => [got, counts.get(got)!.get(person) ?? 0] as const);
    const total = own.reduce((sum, [, n]) => sum + n, 0);
    const [majority, most] = own.reduce((a, b) => (b[1] > a[1] ? b : a));
    purity.set(person, { share: total > 0 ? most / total : 0, majority });
  }
  return {
    conversation,
    seed,
    leveled,
    labelled: labels,
    correct: best,
    speech,
    labels: distinct.length,
    extraLabels: Math.max(0, distinct.length - people.length),
    purity,
  };
}

interface LineVoices {
  lines: number;
  matched: number;
  otherGender: number;
}

/**
 * Each line (consecutive windows of one label) observed under its label in 250 ms pieces, then
 * given the voice the chooser picks for that label: per person, how many lines got a voice of the
 * other gender.
 */
function voicesOnLines(scored: Scored, voices: MatchedVoices): Map<string, LineVoices> {
  const { conversation, leveled, labelled } = scored;
  const byPerson = new Map<string, LineVoices>();
  let w = 0;
  while (w < labelled.length) {
    const label = labelled[w];
    if (label === undefined) {
      w++;
      continue;
    }
    let end = w;
    while (end < labelled.length && labelled[end] === label) end++;
    const [from, to] = [w * WINDOW, end * WINDOW];
    for (let at = from; at < to; at += PIECE)
      voices.observe(label, leveled.subarray(at, Math.min(to, at + PIECE)));
    const person = speakerOf(conversation, from, to);
    if (person !== undefined) {
      const chosen = voices.voiceFor(label, "es");
      const row = byPerson.get(person) ?? { lines: 0, matched: 0, otherGender: 0 };
      row.lines += 1;
      if (chosen.matched) row.matched += 1;
      if (chosen.matched && chosen.voice.gender !== SPEAKERS[person as SpeakerName].gender)
        row.otherGender += 1;
      byPerson.set(person, row);
    }
    w = end;
  }
  return byPerson;
}

let trackerMs = 0;
let trackedSeconds = 0;
const vadEngine = createSileroVadEngine();
const speakerEngine = createMfccSpeakerEngine();

const results: Scored[] = [];
for (const [a, b] of CONVERSATION_PAIRS) {
  for (const seed of [1, 2, 3]) {
    const conversation = await buildConversation(a, b, { seed });
    // Quiet recordings (FLEURS peaks at -25 dBFS) are brought up before the VAD, as in a session.
    const leveled = new AutomaticGain().process(conversation.pcm);
    results.push(score(conversation, seed, leveled, await label(leveled)));
  }
}

const percent = (share: number) => `${(100 * share).toFixed(1)} %`;
/** Purity of each person in conversation order, and whether their majority labels differ. */
const purities = (r: Scored) => {
  const [a, b] = [...r.purity.values()];
  return `${percent(a!.share)} / ${percent(b!.share)} | ${a!.majority !== b!.majority ? "yes" : "NO"}`;
};

console.log(
  "| conversation | kind | seed | turns | speech s | right label | labels | purity (first / second) | apart |",
);
console.log("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
results.forEach((r) => {
  console.log(
    `| ${r.conversation.name} | ${r.conversation.kind} | ${r.seed} | ${r.conversation.turns.length} | ${((r.speech * WINDOW) / 16_000).toFixed(1)} | ${percent(r.correct / r.speech)} | ${r.labels} | ${purities(r)} |`,
  );
});
console.log(
  "\n| kind | conversations | right label (share of speech) | lowest purity | purity under 90 % | majority labels apart | known speakers given a new label (per turn) |",
);
console.log("| --- | --- | --- | --- | --- | --- | --- |");
for (const kind of ["man and woman", "two men", "two women"] as const) {
  const own = results.filter((r) => r.conversation.kind === kind);
  const correct = own.reduce((sum, r) => sum + r.correct, 0);
  const speech = own.reduce((sum, r) => sum + r.speech, 0);
  const extra = own.reduce((sum, r) => sum + r.extraLabels, 0);
  const turns = own.reduce((sum, r) => sum + r.conversation.turns.length, 0);
  const lowest = (r: Scored) => Math.min(...[...r.purity.values()].map((p) => p.share));
  const impure = own.filter((r) => lowest(r) < 0.9).map((r) => `${r.conversation.name} (${r.seed})`);
  const apart = own.filter((r) => new Set([...r.purity.values()].map((p) => p.majority)).size === 2);
  console.log(
    `| ${kind} | ${own.length} | ${percent(correct / speech)} | ${percent(Math.min(...own.map(lowest)))} | ${impure.join(", ") || "none"} | ${apart.length} of ${own.length} | ${extra} in ${turns} turns (${percent(extra / turns)}) |`,
  );
}

console.log(
  `\nspeaker tracker CPU: ${(trackerMs / trackedSeconds).toFixed(2)} ms per second of speech (${trackedSeconds.toFixed(0)} s tracked)`,
);

// ---------------------------------------------------------------- voices

const tts = await createEspeakEngine();
const cloner = voiceClonerFor(tts, "en", "es");
await cloner.prepare();
const matchedVoices = () =>
  new MatchedVoices({
    match: (speaker, _language, gender) => cloner.match(speaker, gender),
    fallback: (f) => genderDefault(f),
  });

console.log(
  "\n| conversation | seed | man: lines, matched, other gender | woman: lines, matched, other gender |",
);
console.log("| --- | --- | --- | --- |");
const total = { male: { matched: 0, otherGender: 0 }, female: { matched: 0, otherGender: 0 } };
results.forEach((r) => {
  if (r.conversation.kind !== "man and woman") return;
  const byPerson = voicesOnLines(r, matchedVoices());
  const cell = (gender: "male" | "female") => {
    const [person, row] = [...byPerson].find(([name]) => SPEAKERS[name as SpeakerName].gender === gender)!;
    total[gender].matched += row.matched;
    total[gender].otherGender += row.otherGender;
    return `${person}: ${row.lines}, ${row.matched}, ${row.otherGender}`;
  };
  console.log(`| ${r.conversation.name} | ${r.seed} | ${cell("male")} | ${cell("female")} |`);
});
console.log(
  `\nmatched lines with a voice of the other gender: men ${total.male.otherGender} of ${total.male.matched}, women ${total.female.otherGender} of ${total.female.matched}`,
);

console.log(
  "\n| person | gender | their audio until the first match | first match | locked voice | right gender |",
);
console.log("| --- | --- | --- | --- | --- | --- |");
for (const person of Object.keys(SPEAKERS) as SpeakerName[]) {
  // The person's turns, in conversation order, from a conversation they open.
  const pair =
    CONVERSATION_PAIRS.find(([a]) => a === person) ?? CONVERSATION_PAIRS.find(([, b]) => b === person)!;
  const conversation = await buildConversation(pair[0], pair[1], { seed: 1 });
  const voices = matchedVoices();
  let heard = 0;
  let first: string | undefined;
  let firstAt = 0;
  for (const turn of conversation.turns.filter((t) => t.speaker === person)) {
    // In 250 ms pieces, as a live session hands them over.
    for (let at = turn.startSample; at < turn.endSample; at += PIECE) {
      voices.observe(person, conversation.pcm.subarray(at, Math.min(turn.endSample, at + PIECE)));
      heard += Math.min(PIECE, turn.endSample - at) / 16_000;
      const chosen = voices.voiceFor(person, "es");
      if (chosen.matched && first === undefined) {
        first = `${chosen.voice.name} (${chosen.voice.gender})`;
        firstAt = heard;
      }
    }
  }
  const locked = voices.voiceFor(person, "es").voice;
  console.log(
    `| ${SPEAKERS[person].title} | ${SPEAKERS[person].gender} | ${firstAt.toFixed(2)} s | ${first} | ${locked.name} (${locked.gender}, id ${locked.id}) | ${locked.gender === SPEAKERS[person].gender ? "yes" : "NO"} |`,
  );
}
await tts.close();
