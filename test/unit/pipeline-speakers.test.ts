import { describe, expect, it } from "vitest";
import type { AsrEngine, AsrStream, Hypothesis, Voice } from "../../src/core/contracts.js";
import {
  TranslationPipeline,
  type PipelineEvent,
  type PipelineOptions,
} from "../../src/pipeline/translation-pipeline.js";
import { levelSpeakerEngine } from "../support/speaker-engine-double.js";
import type { VoiceChooser } from "../../src/speakers/voice-choice.js";
import { defaultVoice, VOICES } from "../../src/voices/library.js";
import { energyVad } from "../support/vad-double.js";
import { clipsOf, finals, pipelineWith as harnessPipeline, toneFor } from "../support/pipeline-harness.js";

/**
 * Engine doubles, as in translation-pipeline.test.ts. The audio is made of constant-level stretches,
 * and the level is the voice: each person speaks at their own level (loud enough that the pipeline's
 * automatic gain leaves it unchanged), digital silence is a pause.
 */
const RATE = 16_000;
const VOICE_A = 6_000;
const VOICE_B = 12_000;
/** A sound the recognizer makes no word of (a hum, a laugh) while the tracker hears a third voice in it. */
const HUM = 9_000;
const WORD_OF: Record<number, string> = { [VOICE_A]: "ay", [VOICE_B]: "bee" };

const voice = (level: number, ms: number) => new Int16Array((ms * RATE) / 1000).fill(level);
const silence = (ms: number) => new Int16Array((ms * RATE) / 1000);
function join(...parts: Int16Array[]): Int16Array {
  const out = new Int16Array(parts.reduce((sum, part) => sum + part.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

const WORD_SAMPLES = 4_000;

/**
 * A recognizer that hears one word per 250 ms of audio written to its stream: "ay" or "bee" after
 * the level most of its samples have (no word for silence or a hum). With `wordTimings`, each word
 * spans its 250 ms. It records every stream's audio.
 */
function levelAsr(
  wordTimings: boolean,
  partialResults = true,
): AsrEngine & { streams: { audio: Int16Array[]; aborted: boolean; finished: boolean }[] } {
  const streams: { audio: Int16Array[]; aborted: boolean; finished: boolean }[] = [];
  const hear = (audio: Int16Array[], all: boolean): Hypothesis => {
    const pcm = join(...audio);
    const words: { word: string; startMs: number; endMs: number }[] = [];
    for (let at = 0; at < pcm.length; at += WORD_SAMPLES) {
      const chunk = pcm.subarray(at, at + WORD_SAMPLES);
      if (chunk.length < WORD_SAMPLES && !all) break;
      const counts = new Map<number, number>();
      for (const sample of chunk) if (sample !== 0) counts.set(sample, (counts.get(sample) ?? 0) + 1);
      const [level, count] = [...counts].sort((x, y) => y[1] - x[1])[0] ?? [0, 0];
      const word = WORD_OF[level];
      if (count < WORD_SAMPLES / 4 || word === undefined) continue;
      words.push({ word, startMs: at / 16, endMs: (at + WORD_SAMPLES) / 16 });
    }
    return { text: words.map((w) => w.word).join(" "), words: wordTimings ? words : [] };
  };
  return {
    streams,
    info: { id: "level-asr-double", version: "test" },
    capabilities: { languages: ["en"], sampleRate: RATE, partialResults, wordTimings, punctuation: false },
    async createStream(): Promise<AsrStream> {
      const stream = { audio: [] as Int16Array[], aborted: false, finished: false };
      streams.push(stream);
      return {
        write: async (pcm) => void stream.audio.push(pcm.slice()),
        partial: async () => hear(stream.audio, false),
        finish: async () => {
          stream.finished = true;
          return hear(stream.audio, true);
        },
        abort: () => void (stream.aborted = true),
      };
    },
    close: async () => {},
  };
}

const pipelineWith = (overrides: Partial<PipelineOptions> & { asr: AsrEngine }): TranslationPipeline =>
  harnessPipeline({ translate: async ({ text }) => text.toUpperCase(), speak: toneFor, ...overrides });

/** Feeds the audio, ends the input and returns every event. */
async function run(pipeline: TranslationPipeline, ...audio: Int16Array[]): Promise<PipelineEvent[]> {
  for (const pcm of audio) pipeline.pushAudio(pcm);
  const ending = pipeline.end();
  const events: PipelineEvent[] = [];
  for await (const event of pipeline.events) events.push(event);
  await ending;
  return events;
}

type Transcript = Extract<PipelineEvent, { type: "original" | "translated" }>;
const transcripts = (events: PipelineEvent[]) =>
  events.filter((e): e is Transcript => e.type === "original" || e.type === "translated");

const segmentsOf = (events: PipelineEvent[]) => [...new Set(transcripts(events).map((e) => e.segmentId))];
const wordsOf = (text: string) => new Set(text.split(" ").filter(Boolean));

/** A speaks 3 s, then B 3 s without a pause: one utterance for the VAD, a change of voice at 3 s. */
const A_THEN_B = [voice(VOICE_A, 3000), voice(VOICE_B, 3000), silence(800)];
const CHANGE_SAMPLE = 3 * RATE;

describe("TranslationPipeline with speakers (engine doubles)", () => {
  it("labels every transcript with its speaker when it tells speakers apart, and none when it does not", async () => {
    const conversation = [voice(VOICE_A, 2000), silence(800), voice(VOICE_B, 2500), silence(800)];
    const labelled = await run(
      pipelineWith({ asr: levelAsr(true), speakers: levelSpeakerEngine }),
      ...conversation,
    );
    const plain = await run(pipelineWith({ asr: levelAsr(true) }), ...conversation);

    for (const events of [labelled, plain]) {
      expect(segmentsOf(events)).toHaveLength(2);
      for (const type of ["original", "translated"] as const)
        expect(finals(events, type).length).toBeGreaterThan(1);
    }
    for (const event of transcripts(labelled)) expect(event.speaker).toMatch(/^[12]$/u);
    for (const event of transcripts(plain)) expect(event).not.toHaveProperty("speaker");
    // each utterance's last final carries its speaker's decided label
    const [first, second] = segmentsOf(labelled);
    for (const type of ["original", "translated"] as const) {
      const lines = finals(labelled, type);
      expect(lines.findLast((e) => e.segmentId === first)).toMatchObject({
        speaker: "1",
        text: expect.stringMatching(/^(ay|AY)( |$)/u),
      });
      expect(lines.findLast((e) => e.segmentId === second)).toMatchObject({ speaker: "2" });
      // the first speaker was alone until the second spoke: none of their lines is labelled otherwise
      expect(
        transcripts(labelled)
          .filter((e) => e.segmentId === first)
          .every((e) => e.speaker === "1"),
      ).toBe(true);
    }
  });

  describe.each([
    { timings: true, name: "with word timings: the words are cut at the change" },
    { timings: false, name: "without word timings: the earlier part is recognized again" },
  ])("a change of voice inside an utterance splits it ($name)", ({ timings }) => {
    it("into two segments, the first labelled with the first speaker and the second with the second", async () => {
      const asr = levelAsr(timings);
      const events = await run(pipelineWith({ asr, speakers: levelSpeakerEngine }), ...A_THEN_B);
      const [first, second, ...more] = segmentsOf(events);
      expect(more).toEqual([]);
      for (const type of ["original", "translated"] as const) {
        const own = (id: string | undefined) =>
          transcripts(events).filter((e) => e.type === type && e.segmentId === id);
        expect(own(first).length).toBeGreaterThan(0);
        for (const event of own(first)) expect(event).toMatchObject({ speaker: "1", startMs: 0 });
        // the second part starts where the voice changed; its last final has the second speaker's label
        for (const event of own(second)) expect(event.startMs).toBe(CHANGE_SAMPLE / 16);
        expect(own(second).findLast((e) => e.isFinal)).toMatchObject({ speaker: "2" });
      }
      // the second segment holds only the second voice's words
      expect(wordsOf(finals(events, "original").findLast((e) => e.segmentId === second)!.text)).toEqual(
        new Set(["bee"]),
      );

      if (timings) {
        // the utterance's recognition was finished and cut; the rest went to a new stream
        expect(asr.streams.map((s) => [s.finished, s.aborted])).toEqual([
          [true, false],
          [true, false],
        ]);
      } else {
        // the first stream was dropped, and the earlier part recognized again on its own
        expect(asr.streams.map((s) => [s.finished, s.aborted])).toEqual([
          [false, true],
          [true, false],
          [true, false],
        ]);
        const head = join(...asr.streams[1]!.audio);
        expect(head.length).toBeGreaterThanOrEqual(CHANGE_SAMPLE);
        expect(head.length).toBeLessThan(CHANGE_SAMPLE + energyVad.capabilities.windowSamples);
        expect(head.subarray(0, CHANGE_SAMPLE).every((sample) => sample === VOICE_A)).toBe(true);
      }
      // the second part is recognized from the change on (less the VAD window the change fell in)
      const rest = join(...asr.streams.at(-1)!.audio);
      expect(rest.filter((sample) => sample === VOICE_A)).toHaveLength(0);
      expect(rest.filter((sample) => sample === VOICE_B).length).toBeGreaterThan(
        3 * RATE - energyVad.capabilities.windowSamples,
      );
    });

    it("with each part's words in its own segment (a recognizer without partial results)", async () => {
      const asr = levelAsr(timings, false);
      const events = await run(pipelineWith({ asr, speakers: levelSpeakerEngine }), ...A_THEN_B);
      const [first, second] = segmentsOf(events);
      const text = (id: string | undefined) =>
        finals(events, "original").findLast((e) => e.segmentId === id)?.text;
      expect(text(first)).toBe(Array(12).fill("ay").join(" "));
      expect(text(second)).toBe(Array(12).fill("bee").join(" "));
      expect(finals(events, "translated").map((e) => [e.segmentId, e.speaker, e.text])).toEqual([
        [first, "1", Array(12).fill("AY").join(" ")],
        [second, "2", Array(12).fill("BEE").join(" ")],
      ]);
    });

    it("and labels each part with its own speaker when a known speaker answers a new one", async () => {
      const asr = levelAsr(timings, false);
      const events = await run(
        pipelineWith({ asr, speakers: levelSpeakerEngine }),
        voice(VOICE_B, 2000),
        silence(800),
        ...A_THEN_B,
      );
      const segments = segmentsOf(events);
      expect(segments).toHaveLength(3);
      // without partial results every transcript is a final, each labelled with its part's speaker;
      // the cut falls on the tracker's 0.5 s grid (from the utterance's start, pre-roll included),
      // so the second part may end with up to two words (0.5 s) of the voice after the change
      const expected = [
        { speaker: "1", words: /^bee( bee)*$/u },
        { speaker: "2", words: /^ay( ay){9,}( bee){0,2}$/u },
        { speaker: "1", words: /^bee( bee){5,}$/u },
      ];
      segments.forEach((id, i) => {
        const own = transcripts(events).filter((e) => e.segmentId === id);
        expect(own.length).toBeGreaterThan(0);
        for (const event of own) {
          expect(event.speaker).toBe(expected[i]!.speaker);
          expect(event.text.toLowerCase()).toMatch(expected[i]!.words);
        }
      });
    });
  });

  // After the words are cut at the change, the words the last interim showed past the change are
  // the next speaker's: they must not end the earlier segment (nor be spoken twice).
  it("no word after the change ends up in the earlier speaker's segment", async () => {
    const events = await run(
      pipelineWith({ asr: levelAsr(true), speakers: levelSpeakerEngine }),
      ...A_THEN_B,
    );
    const [first, second] = segmentsOf(events);
    const last = (type: "original" | "translated", id: string | undefined) =>
      finals(events, type).findLast((e) => e.segmentId === id)!.text;
    expect(last("original", first)).toBe(Array(12).fill("ay").join(" "));
    // (the translation of a later span in a segment starts in lower case: "AY AY aY …")
    expect(last("translated", first).toUpperCase()).toBe(Array(12).fill("AY").join(" "));
    expect(last("original", second)).toBe(Array(12).fill("bee").join(" "));
  });

  // Issue 30, item 9: a segment showed the next speaker's words as interims under a label of its
  // own, then ended with an empty final when the voice was found to change before those words,
  // and the words came back as a new segment with the next label. Here A speaks, then a hum the
  // tracker takes for a voice of its own (a change found at the hum, a label made for it), then B
  // without a pause (a second change, where B starts): the hum's part has no words.
  it("a part whose words all move to the next speaker's segment sends no empty final and uses up no label", async () => {
    const events = await run(
      pipelineWith({ asr: levelAsr(true), speakers: levelSpeakerEngine }),
      voice(VOICE_A, 3000),
      voice(HUM, 1500),
      voice(VOICE_B, 3000),
      silence(800),
    );
    for (const event of transcripts(events).filter((e) => e.isFinal)) expect(event.text).not.toBe("");
    // the hum's segment showed B's words: it goes on as B's segment, under B's label
    const segments = segmentsOf(events);
    expect(segments).toHaveLength(2);
    expect(transcripts(events).some((e) => e.segmentId === segments[1] && !e.isFinal)).toBe(true);
    for (const type of ["original", "translated"] as const)
      expect(
        segments.map((id) => {
          const last = finals(events, type).findLast((e) => e.segmentId === id)!;
          return [last.speaker, last.text.toLowerCase()];
        }),
      ).toEqual([
        ["1", Array(12).fill("ay").join(" ")],
        ["2", Array(12).fill("bee").join(" ")],
      ]);
    // labels 1 and 2 only, on every transcript: none was spent on the hum
    expect(new Set(transcripts(events).map((e) => e.speaker))).toEqual(new Set(["1", "2"]));
  });

  /** Each segment's finals (original and translated), in order. */
  function finalsBySegment(events: PipelineEvent[]): Transcript[][] {
    return segmentsOf(events).map((id) => transcripts(events).filter((e) => e.segmentId === id && e.isFinal));
  }

  // Finals are never revised: every final of a segment carries one label, the one its speaker keeps
  // (stabilizerHoldBackMs 0 makes words final as early as the recognizer agrees on them).
  it("every final of a segment carries its speaker's label, also when its first words were heard before the tracker had decided", async () => {
    const events = await run(
      pipelineWith({
        asr: levelAsr(true),
        speakers: levelSpeakerEngine,
        stabilizerHoldBackMs: 0,
      }),
      voice(VOICE_A, 2000),
      silence(800),
      voice(VOICE_B, 2500),
      silence(800),
    );
    const segments = finalsBySegment(events);
    expect(segments).toHaveLength(2);
    // the second voice was tentatively the first speaker for its first 1.5 s
    const second = transcripts(events).filter((e) => e.segmentId === segments[1]![0]!.segmentId);
    expect(second.some((e) => !e.isFinal && e.speaker === "1")).toBe(true);
    segments.forEach((lines, i) => {
      expect(new Set(lines.map((e) => e.speaker))).toEqual(new Set([String(i + 1)]));
      expect(lines.filter((e) => e.type === "original").length).toBeGreaterThan(1);
    });
  });

  describe.each([
    { timings: true, name: "with word timings" },
    { timings: false, name: "without word timings" },
  ])("when the voice changes inside an utterance ($name)", ({ timings }) => {
    it("no final holds the next speaker's words or repeats an earlier final's, and each segment keeps one label", async () => {
      const events = await run(
        pipelineWith({
          asr: levelAsr(timings),
          speakers: levelSpeakerEngine,
          stabilizerHoldBackMs: 0,
        }),
        ...A_THEN_B,
      );
      const segments = finalsBySegment(events);
      expect(segments).toHaveLength(2);
      const [first, second] = segments.map((lines) => lines.filter((e) => e.type === "original"));
      // the first speaker's words became final while they spoke, before the change was found
      expect(first!.length).toBeGreaterThan(1);
      for (const line of first!)
        expect(line).toMatchObject({ speaker: "1", text: expect.stringMatching(/^ay( ay)*$/u) });
      for (const line of second!)
        expect(line).toMatchObject({ speaker: "2", text: expect.stringMatching(/^bee( bee)*$/u) });
      // every word of the conversation is final once: 3 s of each voice, a word per 250 ms
      expect(first!.at(-1)!.text).toBe(Array(12).fill("ay").join(" "));
      expect(second!.at(-1)!.text).toBe(Array(12).fill("bee").join(" "));
      segments.forEach((lines, i) => {
        expect(new Set(lines.map((e) => e.speaker))).toEqual(new Set([String(i + 1)]));
        const translated = lines.filter((e) => e.type === "translated");
        expect(translated.length).toBe(lines.length / 2);
        for (let k = 1; k < translated.length; k++)
          expect(translated[k]!.text.startsWith(translated[k - 1]!.text)).toBe(true);
      });
    });
  });

  it("voiceId is reported once the chooser has matched the speaker's voice, and that voice speaks", async () => {
    const fallback = defaultVoice("male");
    const matchedVoice = VOICES.find((v) => v.gender === "female" && v.id !== defaultVoice("female").id)!;
    let matched = false;
    const asked: [string | undefined, string][] = [];
    const observed: [string | undefined, Int16Array][] = [];
    const voices: VoiceChooser = {
      observe: (speaker, pcm) => void observed.push([speaker, pcm]),
      voiceFor(speaker, language) {
        asked.push([speaker, language]);
        return matched ? { voice: matchedVoice, matched: true } : { voice: fallback, matched: false };
      },
    };
    const spoken: { text: string; voice: Voice | undefined }[] = [];
    const pipeline = pipelineWith({
      asr: levelAsr(true),
      speakers: levelSpeakerEngine,
      voices,
      speak: async function* (text, _language, voice) {
        spoken.push({ text, voice });
        yield new Float32Array(1920).fill(0.1);
      },
    });

    // The first utterance, until its last line has been translated and spoken.
    pipeline.pushAudio(join(voice(VOICE_A, 1500), silence(800)));
    const before: PipelineEvent[] = [];
    for await (const event of pipeline.events) {
      before.push(event);
      const lines = finals(before, "translated");
      if (lines.at(-1)?.originalText === "ay ay ay ay ay ay" && clipsOf(before).length === lines.length)
        break;
    }
    const spokenBefore = spoken.length;
    // Now the chooser has matched the speaker's voice.
    matched = true;
    const after = await run(pipeline, voice(VOICE_A, 1500), silence(800));

    const translatedBefore = before.filter((e) => e.type === "translated");
    const translatedAfter = after.filter((e) => e.type === "translated");
    expect(translatedBefore.length).toBeGreaterThan(0);
    expect(translatedAfter.length).toBeGreaterThan(0);
    for (const event of translatedBefore) expect(event).not.toHaveProperty("voiceId");
    for (const event of translatedAfter)
      expect(event).toMatchObject({ voiceId: matchedVoice.id, speaker: "1" });
    // the original transcripts never carry a voice
    for (const event of [...before, ...after].filter((e) => e.type === "original"))
      expect(event).not.toHaveProperty("voiceId");
    // every line is spoken in the voice the chooser gave: the fallback before, the reported one after
    expect(spokenBefore).toBe(finals(before, "translated").length);
    expect(spoken.length - spokenBefore).toBe(finals(after, "translated").length);
    for (const { voice: used } of spoken.slice(0, spokenBefore)) expect(used).toBe(fallback);
    for (const { voice: used } of spoken.slice(spokenBefore)) expect(used).toBe(matchedVoice);
    // the chooser is asked for the speaker's voice in the target language, and hears the speaker
    expect(new Set(asked.map((a) => a.join(" ")))).toEqual(new Set(["1 es"]));
    expect(observed.length).toBeGreaterThan(0);
    for (const [speaker, pcm] of observed) {
      expect(speaker).toBe("1");
      expect(pcm.every((sample) => sample === VOICE_A || sample === 0)).toBe(true);
    }
  });

  it("without speakers the chooser is asked for the only speaker (undefined)", async () => {
    const asked: (string | undefined)[] = [];
    const observedBy: (string | undefined)[] = [];
    const chosen = VOICES[3]!;
    const spoken: (Voice | undefined)[] = [];
    const events = await run(
      pipelineWith({
        asr: levelAsr(true),
        voices: {
          observe: (speaker) => void observedBy.push(speaker),
          voiceFor: (speaker) => {
            asked.push(speaker);
            return { voice: chosen, matched: true };
          },
        },
        speak: async function* (_text, _language, voice) {
          spoken.push(voice);
          yield new Float32Array(1920);
        },
      }),
      voice(VOICE_A, 1500),
      silence(800),
    );
    expect(asked.length).toBeGreaterThan(0);
    expect(asked.every((speaker) => speaker === undefined)).toBe(true);
    expect(observedBy.length).toBeGreaterThan(0);
    expect(observedBy.every((speaker) => speaker === undefined)).toBe(true);
    for (const event of events.filter((e) => e.type === "translated")) {
      expect(event).toMatchObject({ voiceId: chosen.id });
      expect(event).not.toHaveProperty("speaker");
    }
    expect(spoken.length).toBeGreaterThan(0);
    expect(spoken.every((v) => v === chosen)).toBe(true);
  });
});
