import { describe, expect, it } from "vitest";
import { int16ToFloat32 } from "../../src/audio/pcm.js";
import { createMfccSpeakerEngine } from "../../src/engines/mfcc-speaker/index.js";
import type { SpeakerEngine } from "../../src/core/contracts.js";
import { MAX_SPEAKERS, SpeakerTracker, type SpeakerChange } from "../../src/speakers/tracker.js";
import {
  buildConversation,
  CONVERSATION_PAIRS,
  SPEAKERS,
  type Conversation,
  type SpeakerName,
  type Turn,
} from "../support/conversations.js";
import { sharedMissing } from "../support/shared.js";
import { levelSpeakerEngine } from "../support/speaker-engine-double.js";

const RATE = 16_000;
const WINDOW = 512;

/** `seconds` of the person with voice `code`. */
const voice = (code: number, seconds: number) =>
  new Float32Array(Math.round(seconds * RATE)).fill(code / 100);

function join(...parts: Float32Array[]): Float32Array {
  const out = new Float32Array(parts.reduce((sum, part) => sum + part.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/** A tracker fed as the pipeline feeds it: 512-sample windows, at their session positions. */
class Session {
  readonly tracker: SpeakerTracker;
  position = 0;
  readonly changes: SpeakerChange[] = [];
  /** For each change: the latest `settledBefore` the tracker reported before it. */
  readonly settledBeforeChanges: number[] = [];
  private settled = -Infinity;

  constructor(engine: SpeakerEngine = levelSpeakerEngine) {
    this.tracker = new SpeakerTracker(engine);
  }

  /** Pushes speech of the current utterance; returns the changes it reported. */
  async push(samples: Float32Array): Promise<SpeakerChange[]> {
    const changes: SpeakerChange[] = [];
    for (let at = 0; at < samples.length; at += WINDOW) {
      const change = await this.tracker.push(samples.subarray(at, at + WINDOW), this.position + at);
      if (change) {
        changes.push(change);
        this.settledBeforeChanges.push(this.settled);
      }
      this.settled = this.tracker.settledBefore;
    }
    this.position += samples.length;
    this.changes.push(...changes);
    return changes;
  }

  /** One whole utterance; returns its final label. */
  async utterance(samples: Float32Array): Promise<string> {
    await this.push(samples);
    return (await this.tracker.endUtterance()).speaker;
  }
}

describe("SpeakerTracker (speaker engine double)", () => {
  it("the session's first voice is speaker 1 at once", async () => {
    const session = new Session();
    expect(session.tracker.current).toEqual({ speaker: "1", decided: false });
    expect(session.tracker.count).toBe(0);
    await session.push(voice(30, 0.5));
    expect(session.tracker.current).toEqual({ speaker: "1", decided: true });
    expect(session.tracker.count).toBe(1);
    expect(await session.tracker.endUtterance()).toEqual({ speaker: "1", decided: true });
  });

  it("digital silence is no voice: it makes no speaker", async () => {
    const session = new Session();
    await session.push(new Float32Array(3 * RATE));
    expect(session.tracker.count).toBe(0);
    expect(await session.tracker.endUtterance()).toEqual({ speaker: "1", decided: true });
    expect(session.tracker.count).toBe(0);
  });

  it("a second voice becomes speaker 2 only from 1.5 s of its speech, tentatively the nearest before", async () => {
    const session = new Session();
    expect(await session.utterance(voice(10, 2))).toBe("1");
    await session.push(voice(30, 0.5));
    expect(session.tracker.current).toEqual({ speaker: "1", decided: false });
    await session.push(voice(30, 1.5 - 0.5 - 1 / RATE));
    expect(session.tracker.current).toEqual({ speaker: "1", decided: false });
    expect(session.tracker.count).toBe(1);
    await session.push(voice(30, 1 / RATE));
    expect(session.tracker.current).toEqual({ speaker: "2", decided: true });
    expect(session.tracker.count).toBe(2);
    await session.push(voice(30, 2));
    expect(await session.tracker.endUtterance()).toEqual({ speaker: "2", decided: true });
    expect(session.changes).toEqual([]);
  });

  it("utterances of an unknown voice shorter than 1.5 s take the nearest label and never make a speaker", async () => {
    const session = new Session();
    expect(await session.utterance(voice(10, 2))).toBe("1");
    expect(await session.utterance(voice(30, 2))).toBe("2");
    // nearer speaker 1 (code 10) or speaker 2 (code 30)
    expect(await session.utterance(voice(16, 1.4))).toBe("1");
    expect(await session.utterance(voice(26, 1.4))).toBe("2");
    expect(session.tracker.current.decided).toBe(true);
    // many short replies of the same new voice still make no speaker of it
    for (let i = 0; i < 10; i++) expect(await session.utterance(voice(60, i % 2 ? 1 : 0.3))).toBe("2");
    expect(session.tracker.count).toBe(2);
    // …while 1.5 s of it does
    expect(await session.utterance(voice(60, 1.5))).toBe("3");
    expect(session.tracker.count).toBe(3);
  });

  it("a known speaker coming back gets their own label, decided from 1.5 s of their speech", async () => {
    const session = new Session();
    expect(await session.utterance(voice(10, 2))).toBe("1");
    expect(await session.utterance(voice(30, 2))).toBe("2");
    expect(await session.utterance(voice(50, 2))).toBe("3");
    await session.push(voice(10, 0.5));
    expect(session.tracker.current).toEqual({ speaker: "1", decided: false });
    await session.push(voice(10, 1));
    expect(session.tracker.current).toEqual({ speaker: "1", decided: true });
    expect((await session.tracker.endUtterance()).speaker).toBe("1");
    // short or long, every return finds its speaker
    expect(await session.utterance(voice(30, 0.6))).toBe("2");
    expect(await session.utterance(voice(50, 4))).toBe("3");
    expect(await session.utterance(voice(30, 3))).toBe("2");
    expect(session.tracker.count).toBe(3);
    expect(session.changes).toEqual([]);
  });

  it.each([
    { name: "on a block edge", a: 3 },
    { name: "inside a block", a: 3.3 },
  ])("a change of voice inside an utterance ($name) is reported where it happened", async ({ a }) => {
    const session = new Session();
    // the utterance starts at session position 1 s (after a pause the tracker is not given)
    session.position = RATE;
    const boundary = session.position + a * RATE;
    const changes = await session.push(join(voice(10, a), voice(40, 1.5)));
    expect(changes).toHaveLength(1);
    const [change] = changes as [SpeakerChange];
    // within the tracker's 0.5 s blocks
    expect(Math.abs(change.atSample - boundary)).toBeLessThanOrEqual(0.5 * RATE);
    expect(change.before).toBe("1");
    // the only known speaker is the one the voice changed from: the new voice is someone new at once
    expect(change).toMatchObject({ speaker: "2", decided: true });
    await session.push(voice(40, 1.5));
    expect(session.tracker.current).toEqual({ speaker: "2", decided: true });
    expect((await session.tracker.endUtterance()).speaker).toBe("2");
    expect(session.changes).toHaveLength(1);
    expect(session.tracker.count).toBe(2);
    // the two runs taught their own speakers
    expect(await session.utterance(voice(10, 0.6))).toBe("1");
    expect(await session.utterance(voice(40, 0.6))).toBe("2");
  });

  it("a known speaker answering a new one without a pause is reported with both labels", async () => {
    const session = new Session();
    expect(await session.utterance(voice(40, 2))).toBe("1");
    const boundary = session.position + 3 * RATE;
    // a new voice speaks 3 s (speaker 2 from 1.5 s), then speaker 1 answers
    const changes = await session.push(join(voice(10, 3), voice(40, 2)));
    expect(changes).toHaveLength(1);
    const [change] = changes as [SpeakerChange];
    expect(Math.abs(change.atSample - boundary)).toBeLessThanOrEqual(0.5 * RATE);
    expect(change).toMatchObject({ before: "2", speaker: "1" });
    expect(await session.tracker.endUtterance()).toEqual({ speaker: "1", decided: true });
    expect(session.tracker.count).toBe(2);
    // the new speaker's voiceprint holds only their own speech
    expect(await session.utterance(voice(10, 0.6))).toBe("2");
    expect(await session.utterance(voice(40, 0.6))).toBe("1");
  });

  // A run decided for a known speaker stays theirs while the next voice pulls its voiceprint away:
  // the change is found by the change check, and neither speaker gets a duplicate label.
  it("a change between known speakers inside an utterance keeps both their labels", async () => {
    const session = new Session();
    expect(await session.utterance(voice(10, 2))).toBe("1");
    expect(await session.utterance(voice(40, 2))).toBe("2");
    const boundary = session.position + 3 * RATE;
    // speaker 2 goes on, then speaker 1 answers without a pause
    const speech = join(voice(40, 3), voice(10, 2));
    const decided: string[] = [];
    for (let at = 0; at < speech.length; at += RATE / 2) {
      await session.push(speech.subarray(at, at + RATE / 2));
      const { speaker, decided: sure } = session.tracker.current;
      if (session.changes.length === 0 && sure) decided.push(speaker);
    }
    // until the change, the run is speaker 2's, and once decided it stays so
    expect(new Set(decided)).toEqual(new Set(["2"]));
    expect(session.changes).toHaveLength(1);
    expect(Math.abs(session.changes[0]!.atSample - boundary)).toBeLessThanOrEqual(0.5 * RATE);
    expect(session.changes[0]).toMatchObject({ before: "2", speaker: "1" });
    expect((await session.tracker.endUtterance()).speaker).toBe("1");
    expect(session.tracker.count).toBe(2);
  });

  // The pipeline makes words final only before `settledBefore`: they must keep their label for good.
  it("settles speech only once its label is decided, and only where a later change cannot cut", async () => {
    const session = new Session();
    expect(await session.utterance(voice(10, 2))).toBe("1");
    expect(session.tracker.settledBefore).toBe(Infinity);
    // a new utterance: nothing is settled until its speaker is decided, not even for a known voice
    const start = session.position;
    await session.push(voice(10, 1 / RATE));
    expect(session.tracker.current).toEqual({ speaker: "1", decided: false });
    expect(session.tracker.settledBefore).toBe(-Infinity);
    await session.push(voice(10, 1.5));
    expect(session.tracker.current).toEqual({ speaker: "1", decided: true });
    // decided, and the first block is never split off
    expect(session.tracker.settledBefore).toBeGreaterThan(start);
    // then speaker 2 answers without a pause: speech after the change is never settled as speaker 1's
    const boundary = session.position + 2 * RATE;
    const settled: number[] = [];
    const speech = join(voice(10, 2), voice(40, 3));
    for (let at = 0; at < speech.length; at += WINDOW) {
      await session.push(speech.subarray(at, at + WINDOW));
      if (session.changes.length === 0) settled.push(session.tracker.settledBefore);
    }
    expect(session.changes).toHaveLength(1);
    expect(session.changes[0]).toMatchObject({ before: "1", speaker: "2" });
    for (let i = 1; i < settled.length; i++) expect(settled[i]).toBeGreaterThanOrEqual(settled[i - 1]!);
    expect(Math.max(...settled)).toBeLessThanOrEqual(session.changes[0]!.atSample);
    expect(Math.max(...settled)).toBeLessThanOrEqual(boundary);
    // the speech of the new run is settled as it goes on
    expect(session.tracker.settledBefore).toBeGreaterThanOrEqual(session.changes[0]!.atSample);
    expect(session.settledBeforeChanges).toEqual([Math.max(...settled)]);
  });

  it(`never hands out more than MAX_SPEAKERS (${MAX_SPEAKERS}) labels, even to 40 voices`, async () => {
    const session = new Session();
    const codes = Array.from({ length: 40 }, (_, i) => 10 + 2 * i);
    const labels: string[] = [];
    for (const code of codes) labels.push(await session.utterance(voice(code, 2)));
    expect(session.tracker.count).toBe(MAX_SPEAKERS);
    expect(labels.slice(0, MAX_SPEAKERS)).toEqual(
      Array.from({ length: MAX_SPEAKERS }, (_, i) => String(i + 1)),
    );
    const allowed = new Set(Array.from({ length: MAX_SPEAKERS }, (_, i) => String(i + 1)));
    for (const label of labels) expect(allowed.has(label)).toBe(true);
    // past the bound a new voice takes the nearest speaker: the highest codes are nearest the last one
    expect(labels.slice(MAX_SPEAKERS)).toEqual(Array(40 - MAX_SPEAKERS).fill(String(MAX_SPEAKERS)));
    // and the speakers who have labels keep them
    expect(await session.utterance(voice(codes[0]!, 1))).toBe("1");
    expect(await session.utterance(voice(codes[7]!, 1))).toBe("8");
    expect(session.tracker.count).toBe(MAX_SPEAKERS);
  });

  // Voiceprints are asynchronous (an engine in another process): calls made without waiting for
  // each other must still reach the runs in the order the speech came.
  it("takes speech in the order it was pushed, however long each voiceprint takes", async () => {
    const speech = join(voice(10, 2), voice(40, 2));
    const inOrder = new Session();
    await inOrder.push(speech);
    const expected = [...inOrder.changes, await inOrder.tracker.endUtterance()];

    let calls = 0;
    const slow: SpeakerEngine = {
      ...levelSpeakerEngine,
      // Later calls answer sooner: without the tracker's ordering, blocks would arrive reversed.
      async voiceprint(samples) {
        const wait = 20 - (calls++ % 20);
        await new Promise((resolve) => setTimeout(resolve, wait));
        return levelSpeakerEngine.voiceprint(samples);
      },
    };
    const tracker = new SpeakerTracker(slow);
    const pushes: Promise<SpeakerChange | undefined>[] = [];
    for (let at = 0; at < speech.length; at += WINDOW)
      pushes.push(tracker.push(speech.subarray(at, at + WINDOW), at));
    const ended = tracker.endUtterance();
    const changes = (await Promise.all(pushes)).filter((change) => change !== undefined);
    expect([...changes, await ended]).toEqual(expected);
  });

  it("passes its signal to the engine: once it aborts, waiting voiceprints end with it", async () => {
    const controller = new AbortController();
    const seen: (AbortSignal | undefined)[] = [];
    const waiting: SpeakerEngine = {
      ...levelSpeakerEngine,
      // An engine in another process: a voiceprint waits until answered, or until cancelled.
      voiceprint: (_samples, signal) =>
        new Promise((_resolve, reject) => {
          seen.push(signal);
          signal?.addEventListener("abort", () => reject(signal.reason), { once: true });
        }),
    };
    const tracker = new SpeakerTracker(waiting, controller.signal);
    const pushed = tracker.push(voice(10, 1), 0);
    await expect.poll(() => seen.length).toBe(1);
    controller.abort(new Error("session closed"));
    await expect(pushed).rejects.toThrow("session closed");
    expect(seen[0]).toBe(controller.signal);
  });

  it("leaves out a block whose voiceprint failed, and goes on labelling", async () => {
    let fail = false;
    const flaky: SpeakerEngine = {
      ...levelSpeakerEngine,
      voiceprint: async (samples) => {
        if (fail) throw new Error("the engine's process restarted");
        return levelSpeakerEngine.voiceprint(samples);
      },
    };
    const session = new Session(flaky);
    expect(await session.utterance(voice(10, 2))).toBe("1");
    fail = true;
    expect(await session.utterance(voice(40, 2))).toBe("1");
    fail = false;
    expect(await session.utterance(voice(40, 2))).toBe("2");
  });
});

const SPEECH_MISSING =
  sharedMissing("data/speech/ljspeech/wavs") ||
  sharedMissing("data/speech/librivox-pocketsphinx") ||
  sharedMissing("data/speech/misc/jfk.wav");

describe.skipIf(SPEECH_MISSING)("SpeakerTracker (MFCC speaker engine, real speech)", () => {
  const engine = createMfccSpeakerEngine();
  const pairs: [SpeakerName, SpeakerName][] = [
    ["lj", "librivox"],
    ["librivox", "jfk"],
  ];

  it.each(pairs)("labels %s and %s one to one, turn by turn", async (a, b) => {
    const conversation = await buildConversation(a, b, { seed: 1, maxTurns: 3 });
    expect(conversation.turns).toHaveLength(6);
    const session = new Session(engine);
    const labelOf = new Map<string, string>();
    for (const turn of conversation.turns) {
      session.position = turn.startSample;
      const label = await session.utterance(
        int16ToFloat32(conversation.pcm.subarray(turn.startSample, turn.endSample)),
      );
      if (!labelOf.has(turn.speaker)) labelOf.set(turn.speaker, label);
      expect(label, `turn of ${turn.speaker} at ${turn.startSample / RATE} s`).toBe(
        labelOf.get(turn.speaker),
      );
    }
    expect(labelOf.size).toBe(2);
    expect(new Set(labelOf.values())).toEqual(new Set(["1", "2"]));
    expect(session.tracker.count).toBe(2);
    expect(session.changes).toEqual([]);
  });

  it.each(pairs)("finds the change from %s to %s when the two speak without a pause", async (a, b) => {
    const conversation = await buildConversation(a, b, { seed: 1, maxTurns: 3 });
    const [first, second] = [conversation.turns[0]!, conversation.turns[1]!];
    const pcm = (turn: Turn) => int16ToFloat32(conversation.pcm.subarray(turn.startSample, turn.endSample));
    const session = new Session(engine);
    session.position = first.startSample;
    const boundary = first.endSample;
    const changes = await session.push(join(pcm(first), pcm(second)));
    expect(changes).toHaveLength(1);
    expect(Math.abs(changes[0]!.atSample - boundary)).toBeLessThanOrEqual(1.5 * RATE);
    expect(changes[0]!.before).toBe("1");
    // speech settled as the first speaker's (final words) lies before the cut
    expect(session.settledBeforeChanges[0]).toBeLessThanOrEqual(changes[0]!.atSample);
    expect(session.settledBeforeChanges[0]).toBeGreaterThan(first.startSample);
    expect((await session.tracker.endUtterance()).speaker).toBe("2");
    expect(session.tracker.count).toBe(2);
  });
});

/**
 * Each window's label as a live session decides it: turns less than 0.5 s apart (the live
 * end-of-utterance silence) are one utterance, and a change of voice splits it.
 */
async function labelsOf(conversation: Conversation, engine: SpeakerEngine): Promise<Map<number, string>> {
  const utterances: { from: number; to: number }[] = [];
  for (const turn of conversation.turns) {
    const last = utterances.at(-1);
    if (last && turn.startSample - last.to < RATE / 2) last.to = turn.endSample;
    else utterances.push({ from: turn.startSample, to: turn.endSample });
  }
  const session = new Session(engine);
  const labels = new Map<number, string>();
  for (const { from: start, to } of utterances) {
    // Windows on one grid, so a turn's windows are found whichever utterance holds them.
    const from = start - (start % WINDOW);
    session.position = from;
    let open: number[] = [];
    for (let at = from; at < to; at += WINDOW) {
      open.push(at);
      for (const change of await session.push(
        int16ToFloat32(conversation.pcm.subarray(at, Math.min(to, at + WINDOW))),
      )) {
        for (const start of open.filter((start) => start < change.atSample)) labels.set(start, change.before);
        open = open.filter((start) => start >= change.atSample);
      }
    }
    const { speaker } = await session.tracker.endUtterance();
    for (const start of open) labels.set(start, speaker);
  }
  return labels;
}

/** Per person: the share of their speech carrying their majority label, and that label. */
function purities(conversation: Conversation, labels: Map<number, string>) {
  return [...new Set(conversation.turns.map((turn) => turn.speaker))].map((person) => {
    const counts = new Map<string, number>();
    for (const turn of conversation.turns.filter((t) => t.speaker === person)) {
      for (
        let at = Math.ceil(turn.startSample / WINDOW) * WINDOW;
        at + WINDOW <= turn.endSample;
        at += WINDOW
      ) {
        const label = labels.get(at)!;
        counts.set(label, (counts.get(label) ?? 0) + 1);
      }
    }
    const total = [...counts.values()].reduce((sum, n) => sum + n, 0);
    const [majority, most] = [...counts].reduce((a, b) => (b[1] > a[1] ? b : a));
    return { person, majority, purity: most / total };
  });
}

// A man and a woman the MFCC voiceprints alone merged (FLEURS speakers, recorded alike): pitch keeps
// them apart. JFK is left out: his raised voice lies in the women's range, where pitch cannot help.
const FLEURS_MAN_AND_WOMAN = CONVERSATION_PAIRS.filter(
  ([a, b]) => SPEAKERS[a].gender !== SPEAKERS[b].gender && (a.startsWith("fleurs") || b.startsWith("fleurs")),
);

describe.skipIf(SPEECH_MISSING || sharedMissing("data/speech/fleurs-dev"))(
  "SpeakerTracker (MFCC speaker engine, a man and a woman in real speech)",
  () => {
    const engine = createMfccSpeakerEngine();

    it.each(FLEURS_MAN_AND_WOMAN.flatMap(([a, b]) => [1, 2, 3].map((seed) => [a, b, seed] as const)))(
      "keeps %s and %s apart (seed %i): each person's speech ≥ 90 % under their own label",
      async (a, b, seed) => {
        const conversation = await buildConversation(a, b, { seed });
        const [first, second] = purities(conversation, await labelsOf(conversation, engine));
        for (const { person, purity } of [first!, second!])
          expect(purity, person).toBeGreaterThanOrEqual(0.9);
        expect(first!.majority).not.toBe(second!.majority);
      },
    );
  },
);
