/**
 * Speaker labelling (relay-2 `speaker`): two-person conversations built from the real speech in
 * ../shared/data/speech (test/support/conversations.ts) run through Silero VAD, the live
 * segmenter and the speaker tracker exactly as a live session feeds them, and the labels are
 * scored against the truth.
 *
 *   - right label: share of the speech (VAD windows inside a true turn) whose label maps to the
 *     person speaking, under the best one-to-one mapping of labels to people (extra labels count
 *     as wrong);
 *   - new labels for known speakers: labels beyond the two people, per conversation and per turn.
 *
 * Then each person's voice match (`voiceId=auto`, dubbing's `voice=auto`): their turns fed in order
 * to the voice chooser with eSpeak NG's library measurements (English speech, Spanish voice), the
 * speech it took for the first match, and the voice (and its gender) once locked.
 *
 *   npm run bench:speakers
 */
import { int16ToFloat32 } from "../src/audio/pcm.js";
import { createEspeakEngine } from "../src/engines/espeak-ng/index.js";
import { createMfccSpeakerEngine } from "../src/engines/mfcc-speaker/index.js";
import { createSileroVadEngine } from "../src/engines/silero-vad/index.js";
import { DEFAULT_SEGMENTER_OPTIONS, SpeechSegmenter } from "../src/pipeline/segmenter.js";
import { SpeakerTracker } from "../src/speakers/tracker.js";
import { genderDefault, MatchedVoices } from "../src/speakers/voices.js";
import { voiceClonerFor } from "../src/voices/voice-clone.js";
import {
  buildConversation,
  CONVERSATION_PAIRS,
  SPEAKERS,
  type Conversation,
  type SpeakerName,
} from "../test/support/conversations.js";

const WINDOW = 512;

interface Scored {
  readonly conversation: Conversation;
  readonly correct: number;
  readonly speech: number;
  readonly extraLabels: number;
  readonly labels: number;
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

function score(conversation: Conversation, labels: readonly (string | undefined)[]): Scored {
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
  return {
    conversation,
    correct: best,
    speech,
    labels: distinct.length,
    extraLabels: Math.max(0, distinct.length - people.length),
  };
}

let trackerMs = 0;
let trackedSeconds = 0;
const vadEngine = createSileroVadEngine();
const speakerEngine = createMfccSpeakerEngine();

const results: Scored[] = [];
for (const [a, b] of CONVERSATION_PAIRS) {
  for (const seed of [1, 2, 3]) {
    const conversation = await buildConversation(a, b, { seed });
    results.push(score(conversation, await label(conversation.pcm)));
  }
}

console.log("| conversation | kind | turns | speech s | right label | labels |");
console.log("| --- | --- | --- | --- | --- | --- |");
for (const r of results) {
  console.log(
    `| ${r.conversation.name} | ${r.conversation.kind} | ${r.conversation.turns.length} | ${((r.speech * WINDOW) / 16_000).toFixed(1)} | ${((100 * r.correct) / r.speech).toFixed(1)} % | ${r.labels} |`,
  );
}
console.log(
  "\n| kind | conversations | right label (share of speech) | known speakers given a new label (per turn) |",
);
console.log("| --- | --- | --- | --- |");
for (const kind of ["man and woman", "two men", "two women"] as const) {
  const own = results.filter((r) => r.conversation.kind === kind);
  const correct = own.reduce((sum, r) => sum + r.correct, 0);
  const speech = own.reduce((sum, r) => sum + r.speech, 0);
  const extra = own.reduce((sum, r) => sum + r.extraLabels, 0);
  const turns = own.reduce((sum, r) => sum + r.conversation.turns.length, 0);
  console.log(
    `| ${kind} | ${own.length} | ${((100 * correct) / speech).toFixed(1)} % | ${extra} in ${turns} turns (${((100 * extra) / turns).toFixed(1)} %) |`,
  );
}

console.log(
  `\nspeaker tracker CPU: ${(trackerMs / trackedSeconds).toFixed(2)} ms per second of speech (${trackedSeconds.toFixed(0)} s tracked)`,
);

// ---------------------------------------------------------------- voices

const tts = await createEspeakEngine();
const cloner = voiceClonerFor(tts, "en", "es");
await cloner.prepare();
console.log(
  "\n| person | gender | their audio until the first match | first match | locked voice | right gender |",
);
console.log("| --- | --- | --- | --- | --- | --- |");
for (const person of Object.keys(SPEAKERS) as SpeakerName[]) {
  // The person's turns, in conversation order, from a conversation they open.
  const pair =
    CONVERSATION_PAIRS.find(([a]) => a === person) ?? CONVERSATION_PAIRS.find(([, b]) => b === person)!;
  const conversation = await buildConversation(pair[0], pair[1], { seed: 1 });
  const voices = new MatchedVoices({
    match: (speaker) => cloner.match(speaker),
    fallback: (f) => genderDefault(f),
  });
  let heard = 0;
  let first: string | undefined;
  let firstAt = 0;
  for (const turn of conversation.turns.filter((t) => t.speaker === person)) {
    // In 250 ms pieces, as a live session hands them over.
    for (let at = turn.startSample; at < turn.endSample; at += 4_000) {
      voices.observe(person, conversation.pcm.subarray(at, Math.min(turn.endSample, at + 4_000)));
      heard += Math.min(4_000, turn.endSample - at) / 16_000;
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
