/**
 * relay-2 speakers through the real server and the real embedded engines (Silero VAD, PocketSphinx,
 * Apertium, eSpeak NG, the MFCC speaker engine): a two-person conversation built from real speech
 * (test/support/conversations.ts) gets one label per person, and `voiceId=auto` gives each person a
 * library voice of their gender, with the spec's timing rules.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RealtimeSocket, type ServerMessage } from "../../src/cli/recording-socket.js";
import { findVoice } from "../../src/voices/library.js";
import { voiceClonerFor } from "../../src/voices/voice-clone.js";
import {
  buildConversation,
  speakerOf,
  SPEAKERS,
  type Conversation,
  type Turn,
} from "../support/conversations.js";
import { FULL_RECORDINGS } from "../support/recordings.js";
import { startServer, type TestServer } from "../support/server.js";
import { sharedMissing } from "../support/shared.js";
import { openSession, playToLastTranslation } from "../support/session-socket.js";

const SPEECH_MISSING =
  sharedMissing("data/speech/ljspeech/wavs") || sharedMissing("data/speech/librivox-pocketsphinx");
let server: TestServer;
let conversation: Conversation;
let twoTurns: Conversation;

beforeAll(async () => {
  server = await startServer();
  if (SPEECH_MISSING) return;
  // A woman and a man, three turns each (the voice test needs a last turn after the voices lock);
  // the labelling tests take two turns each (each speaks again after the other, and one replies
  // after a 0.2 s pause), unless RELAY_TEST_FULL=1.
  conversation = await buildConversation("lj", "librivox", { seed: 1, maxTurns: 3 });
  twoTurns = FULL_RECORDINGS
    ? conversation
    : await buildConversation("lj", "librivox", { seed: 1, maxTurns: 2 });
});
afterAll(async () => {
  await server?.close();
});

const open = (params: Record<string, string> = {}): Promise<RealtimeSocket> =>
  openSession(server.baseUrl, params);

const transcripts = (socket: RealtimeSocket) => socket.messages.filter((m) => m.type.endsWith("_transcript"));
const finals = (socket: RealtimeSocket, type: string) =>
  socket.messages.filter((m) => m.type === type && m.is_final === true);

/**
 * The person speaking most of a transcript's span, from the conversation's truth (the two-turn
 * conversation's turns are the three-turn one's first four).
 */
const personOf = (message: ServerMessage): string | undefined =>
  speakerOf(conversation, (message.start_ms as number) * 16, (message.end_ms as number) * 16);

describe.skipIf(SPEECH_MISSING)("relay-2 speaker labels", () => {
  it("labels every transcript, one label per person, the same person keeping theirs", async () => {
    const socket = await open({
      modelName: "relay-2",
      sourceLanguage: "en",
      targetLanguage: "es",
      finalizeMode: "sentence",
      audioOutputEnabled: "false",
    });
    await playToLastTranslation(socket, twoTurns.pcm);
    socket.close();

    const all = transcripts(socket);
    expect(all.length).toBeGreaterThan(10);
    for (const message of all) expect(message.speaker).toMatch(/^[1-9][0-9]*$/);

    // Every final with words: which label, which person.
    const labelled = finals(socket, "original_transcript")
      .filter((m) => (m.text as string) !== "")
      .map((m) => ({
        label: m.speaker as string,
        person: personOf(m),
        ms: (m.end_ms as number) - (m.start_ms as number),
      }));
    const labels = new Set(labelled.map((l) => l.label));
    expect(labels.size).toBe(2);
    // Each label stands for one person, and each person has one label: at least 90 % of the
    // speech time of each label's finals belongs to its person.
    const people = new Map<string, string>();
    for (const label of labels) {
      const own = labelled.filter((l) => l.label === label);
      const byPerson = new Map<string, number>();
      for (const l of own) byPerson.set(l.person!, (byPerson.get(l.person!) ?? 0) + l.ms);
      const [person, ms] = [...byPerson].sort((a, b) => b[1] - a[1])[0]!;
      expect(ms / own.reduce((sum, l) => sum + l.ms, 0)).toBeGreaterThanOrEqual(0.9);
      people.set(label, person);
    }
    expect(new Set(people.values()).size).toBe(2);

    // A translation carries the label of its original.
    const originalLabel = new Map(
      finals(socket, "original_transcript").map((m) => [m.correlation_id as string, m.speaker]),
    );
    for (const translation of finals(socket, "translated_transcript"))
      expect(translation.speaker).toBe(originalLabel.get(translation.correlation_id as string));
  });

  // Stable mode sends several finals per segment as words settle, while the speaker may still be
  // undecided or the voice may change inside the utterance: finals are never revised, so one segment
  // keeps one label, a change of speaker opens a new segment, and no final says a word twice.
  it("stable mode: every final of a segment carries one label, and no final repeats an earlier final's words", async () => {
    const socket = await open({
      modelName: "relay-2",
      sourceLanguage: "en",
      targetLanguage: "es",
      finalizeMode: "stable",
      audioOutputEnabled: "false",
    });
    await playToLastTranslation(socket, twoTurns.pcm);
    socket.close();

    // Finals by segment, in the order they were sent.
    const segments = new Map<string, ServerMessage[]>();
    for (const m of [...finals(socket, "original_transcript"), ...finals(socket, "translated_transcript")])
      segments.set(m.correlation_id as string, [...(segments.get(m.correlation_id as string) ?? []), m]);
    expect(segments.size).toBeGreaterThan(twoTurns.turns.length);
    const show = (lines: ServerMessage[]) =>
      lines.map((m) => `${m.type} ${m.start_ms}-${m.end_ms} [${m.speaker}] ${m.text}`).join("\n");
    for (const lines of segments.values())
      expect(new Set(lines.map((m) => m.speaker)), show(lines)).toHaveLength(1);
    expect(new Set([...segments.values()].map((lines) => lines[0]!.speaker))).toEqual(new Set(["1", "2"]));

    // Each segment's original finals extend the one before; segments follow each other in the audio
    // without overlapping, and none starts with words the previous one ended with.
    const originals = [...segments.values()]
      .map((lines) => lines.filter((m) => m.type === "original_transcript"))
      .filter((lines) => (lines.at(-1)!.text as string) !== "");
    for (const lines of originals)
      for (let i = 1; i < lines.length; i++)
        expect((lines[i]!.text as string).startsWith(lines[i - 1]!.text as string)).toBe(true);
    for (let i = 1; i < originals.length; i++) {
      const [previous, next] = [originals[i - 1]!.at(-1)!, originals[i]![0]!];
      expect(next.start_ms as number, show([previous, next])).toBeGreaterThanOrEqual(
        previous.end_ms as number,
      );
      const [said, saying] = [(previous.text as string).split(" "), (next.text as string).split(" ")];
      for (let k = 2; k <= Math.min(said.length, saying.length); k++)
        expect(saying.slice(0, k).join(" "), show([previous, next])).not.toBe(said.slice(-k).join(" "));
    }
    // The conversation has a reply without a pause (shorter than the 500 ms of silence that ends an
    // utterance): one utterance, split where the voice changed into two segments, each labelled.
    const { turns } = twoTurns;
    const reply = turns.findIndex(
      (turn, i) => i > 0 && turn.startSample - turns[i - 1]!.endSample < 500 * 16,
    );
    expect(reply).toBeGreaterThan(0);
    const overlaps = (m: ServerMessage, turn: Turn) =>
      (m.start_ms as number) * 16 < turn.endSample && (m.end_ms as number) * 16 > turn.startSample;
    const split = originals.some(
      (lines, i) =>
        i > 0 &&
        lines[0]!.speaker !== originals[i - 1]!.at(-1)!.speaker &&
        overlaps(originals[i - 1]!.at(-1)!, turns[reply - 1]!) &&
        overlaps(lines.at(-1)!, turns[reply]!),
    );
    expect(split).toBe(true);
  });

  it("relay-1 never sends speaker or voiceId", async () => {
    const socket = await open({
      sourceLanguage: "en",
      targetLanguage: "es",
      audioOutputEnabled: "false",
      finalizeMode: "sentence",
    });
    await playToLastTranslation(socket, twoTurns.pcm.subarray(0, twoTurns.turns[1]!.endSample));
    socket.close();
    for (const message of transcripts(socket)) {
      expect(message).not.toHaveProperty("speaker");
      expect(message).not.toHaveProperty("voiceId");
    }
  });
});

describe.skipIf(SPEECH_MISSING)("relay-2 voiceId=auto", () => {
  // The library's measurements for matching (a few seconds, once per process) are made up front,
  // so the voice decisions below depend only on the speakers' speech.
  beforeAll(async () => {
    const { registry } = server.services;
    await voiceClonerFor(registry.synthesizer("es")!, "en", "es", registry.voiceMeasurements).prepare();
  });

  it("gives each person a library voice of their gender, reported once matched and kept once locked", async () => {
    // A first line of 0.3 s: too little of the speaker's speech for a decision.
    const opening = conversation.pcm.subarray(
      conversation.turns[0]!.startSample,
      conversation.turns[0]!.startSample + 4_800,
    );
    const socket = await open({
      modelName: "relay-2",
      sourceLanguage: "en",
      targetLanguage: "es",
      voiceId: "auto",
      voiceType: "male",
      finalizeMode: "sentence",
    });
    await socket.stream(new Int16Array(8_000), { speed: 4 });
    await socket.stream(opening, { speed: 1 });
    socket.finalize();
    const first = await socket.waitFor(
      (m) => m.type === "original_transcript" && m.is_final === true,
      30_000,
    );
    const firstTranslation = await socket.waitFor(
      (m) =>
        m.type === "translated_transcript" &&
        m.is_final === true &&
        m.correlation_id === first.correlation_id,
      30_000,
    );
    // Before the first decision: the voiceType default speaks, and no voiceId is reported.
    expect(firstTranslation).not.toHaveProperty("voiceId");

    await playToLastTranslation(socket, conversation.pcm);
    socket.close();

    const translations = finals(socket, "translated_transcript").filter((m) => (m.text as string) !== "");
    const bySpeaker = new Map<string, ServerMessage[]>();
    for (const m of translations)
      bySpeaker.set(m.speaker as string, [...(bySpeaker.get(m.speaker as string) ?? []), m]);
    expect(bySpeaker.size).toBe(2);
    for (const lines of bySpeaker.values()) {
      const person = personOf(lines.at(-1)!)!;
      const voiced = lines.filter((m) => m.voiceId !== undefined);
      expect(voiced.length).toBeGreaterThan(0);
      for (const m of voiced) {
        const voice = findVoice(Number(m.voiceId))!;
        expect(voice).toBeDefined();
        expect(voice.gender).toBe(SPEAKERS[person as keyof typeof SPEAKERS].gender);
        expect(voice.strongAccent).toBe(false);
      }
      // Once a speaker has been heard for a few seconds their voice is locked: the lines of their
      // last turn all carry the same voiceId as the line before it.
      const lastTurnStart = conversation.turns.filter((t) => t.speaker === person).at(-1)!.startSample / 16;
      const late = voiced.filter((m) => (m.start_ms as number) >= lastTurnStart - 1000);
      const before = voiced.filter((m) => (m.start_ms as number) < lastTurnStart - 1000).at(-1);
      expect(new Set([...late, ...(before ? [before] : [])].map((m) => m.voiceId)).size).toBe(1);
    }
    // Speech came out for the lines.
    expect(socket.audioFrames.length).toBeGreaterThan(20);
  });
});
