import { describe, expect, it } from "vitest";
import type { AsrEngine, AsrStream, VadEngine } from "../../src/engines/types.js";
import {
  TranslationPipeline,
  type PipelineEvent,
  type PipelineOptions,
} from "../../src/pipeline/translation-pipeline.js";

/** Engine doubles: speech is any window whose samples are non-zero; the recogniser reveals one scripted word per 250 ms. */
const energyVad: VadEngine = {
  info: { id: "energy-double", version: "test" },
  capabilities: { sampleRate: 16_000, windowSamples: 512 },
  createStream: () => ({ probability: async (w) => (w.some((s) => s !== 0) ? 0.9 : 0.01) }),
  close: async () => {},
};

function scriptedAsr(script: string[]): AsrEngine & { opened: number } {
  const engine = {
    opened: 0,
    info: { id: "scripted-double", version: "test" },
    capabilities: {
      languages: ["en"],
      sampleRate: 16_000,
      partialResults: true,
      wordTimings: false,
      punctuation: true,
    },
    async createStream(): Promise<AsrStream> {
      engine.opened++;
      let written = 0;
      const words = () => script.slice(0, Math.floor(written / 4000));
      return {
        write: async (pcm) => void (written += pcm.length),
        partial: async () => ({ text: words().join(" "), words: [] }),
        finish: async () => ({
          text: script.slice(0, Math.max(1, Math.ceil(written / 4000))).join(" "),
          words: [],
        }),
        abort: () => {},
      };
    },
    close: async () => {},
  };
  return engine;
}

const speech = (ms: number) => new Int16Array(ms * 16).fill(1000);
const silence = (ms: number) => new Int16Array(ms * 16);

async function collect(
  pipeline: TranslationPipeline,
  until: (events: PipelineEvent[]) => boolean,
): Promise<PipelineEvent[]> {
  const events: PipelineEvent[] = [];
  for await (const event of pipeline.events) {
    events.push(event);
    if (until(events)) break;
  }
  return events;
}

function pipelineWith(overrides: Partial<PipelineOptions> & { asr: AsrEngine }): TranslationPipeline {
  return new TranslationPipeline({
    vad: energyVad,
    sourceLanguage: "en",
    // a "translation" that keeps case and word boundaries: every word reversed
    translate: async ({ text }) =>
      text
        .split(" ")
        .map((w) => [...w].reverse().join(""))
        .join(" "),
    speak: async (text) => [new Float32Array(1920).fill(text.length / 100)],
    finalizeMode: "stable",
    finalizeWaitMs: 5,
    ...overrides,
  });
}

function finals<T extends "original" | "translated">(events: PipelineEvent[], type: T) {
  return events.filter((e): e is Extract<PipelineEvent, { type: T }> => e.type === type && e.isFinal);
}

describe("TranslationPipeline (engine doubles)", () => {
  it("streams interims, prefix-extending stable finals, translations and speech; trailing silence ends the segment", async () => {
    const pipeline = pipelineWith({ asr: scriptedAsr(["go", "forward", "ten", "meters", "now"]) });
    pipeline.pushAudio(speech(1500));
    pipeline.pushAudio(silence(800));
    const events = await collect(
      pipeline,
      (evs) =>
        finals(evs, "translated").at(-1)?.text === "og drawrof net sretem won" &&
        evs.filter((e) => e.type === "audio").length === finals(evs, "translated").length,
    );
    await pipeline.close();

    const interims = events.filter((e) => e.type === "original" && !e.isFinal);
    expect(interims.length).toBeGreaterThan(0);
    const originals = finals(events, "original").map((e) => e.text);
    expect(originals.length).toBeGreaterThan(1);
    for (let i = 1; i < originals.length; i++) expect(originals[i]!.startsWith(originals[i - 1]!)).toBe(true);
    expect(originals.at(-1)).toBe("go forward ten meters now");
    const translated = finals(events, "translated");
    for (let i = 1; i < translated.length; i++)
      expect(translated[i]!.text.startsWith(translated[i - 1]!.text)).toBe(true);
    expect(translated.at(-1)!.type === "translated" && translated.at(-1)!.originalText).toBe(
      "go forward ten meters now",
    );
    expect(
      new Set(events.filter((e) => "segmentId" in e).map((e) => (e as { segmentId: string }).segmentId)).size,
    ).toBe(1);
    // one spoken clip per committed span, each clip's level encoding its text length in this double
    expect(
      events.filter((e) => e.type === "audio").map((e) => (e as { samples: Float32Array }).samples[0]),
    ).toEqual(
      translated.map((t, i) =>
        Math.fround((t.text.length - (translated[i - 1]?.text.length ?? -1) - 1) / 100),
      ),
    );
    // a final of a segment is never followed by an interim of the same segment
    const lastFinal = events.findLastIndex((e) => e.type === "original" && e.isFinal);
    expect(events.slice(lastFinal).some((e) => e.type === "original" && !e.isFinal)).toBe(false);
  });

  it("finalize commits the segment without trailing silence; the next audio starts a new segment", async () => {
    const asr = scriptedAsr(["hello", "world"]);
    const pipeline = pipelineWith({ asr });
    pipeline.pushAudio(speech(600));
    pipeline.finalize();
    pipeline.finalize(); // a flood of finalize coalesces
    const first = await collect(
      pipeline,
      (evs) => finals(evs, "translated").length > 0 && evs.at(-1)?.type === "audio",
    );
    pipeline.pushAudio(speech(600));
    pipeline.finalize();
    const second = await collect(
      pipeline,
      (evs) => finals(evs, "translated").length > 0 && evs.at(-1)?.type === "audio",
    );
    await pipeline.close();
    const idOf = (evs: PipelineEvent[]) => (finals(evs, "original")[0] as { segmentId: string }).segmentId;
    expect(idOf(first)).not.toBe(idOf(second));
    expect(asr.opened).toBe(2);
  });

  it("end() carries an utterance in progress through translation and speech, then ends the events", async () => {
    const asr = scriptedAsr(["see", "you", "later"]);
    const pipeline = pipelineWith({ asr });
    pipeline.pushAudio(speech(800));
    const ending = pipeline.end();
    pipeline.pushAudio(speech(800)); // after end(): ignored
    pipeline.finalize();
    const events = await collect(pipeline, () => false); // runs until the events end
    await ending;
    expect(finals(events, "original").at(-1)?.text).toBe("see you later");
    expect(finals(events, "translated").at(-1)?.text).toBe("ees uoy retal");
    expect(events.at(-1)?.type).toBe("audio");
    expect(asr.opened).toBe(1);
    await pipeline.close(); // closing an ended pipeline is harmless
  });
  it("sentence mode gives one final per sentence, each with its own correlation id", async () => {
    const pipeline = pipelineWith({
      asr: scriptedAsr(["Hello", "there.", "How", "are", "you?", "Fine"]),
      finalizeMode: "sentence",
    });
    pipeline.pushAudio(speech(1700));
    pipeline.pushAudio(silence(800));
    const events = await collect(pipeline, (evs) => finals(evs, "translated").length === 3);
    await pipeline.close();
    const originals = finals(events, "original");
    expect(originals.map((e) => e.text)).toEqual(["Hello there.", "How are you?", "Fine"]);
    expect(new Set(originals.map((e) => e.segmentId)).size).toBe(3);
  });

  it("stable-mode spans after the first continue the sentence: a translator's leading capital is undone", async () => {
    const capitalising = async ({ text }: { text: string }) => text.charAt(0).toUpperCase() + text.slice(1);
    const pipeline = pipelineWith({
      asr: scriptedAsr(["go", "forward", "ten", "meters", "now", "please"]),
      translate: capitalising,
      speak: undefined,
    });
    pipeline.pushAudio(speech(1700));
    pipeline.pushAudio(silence(800));
    const events = await collect(
      pipeline,
      (evs) => finals(evs, "translated").at(-1)?.originalText === "go forward ten meters now please",
    );
    await pipeline.close();
    const translated = finals(events, "translated").map((e) => e.text);
    expect(translated.length).toBeGreaterThan(1);
    expect(translated.at(-1)).toBe("Go forward ten meters now please");
  });

  it("reports translation failures as errors and keeps going", async () => {
    let calls = 0;
    const pipeline = pipelineWith({
      asr: scriptedAsr(["one", "two"]),
      translate: async ({ text }) => {
        if (calls++ === 0) throw new Error("engine down");
        return text;
      },
      speak: undefined,
    });
    pipeline.pushAudio(speech(600));
    pipeline.finalize();
    const events = await collect(pipeline, (evs) => finals(evs, "translated").length > 0);
    await pipeline.close();
    expect(events.some((e) => e.type === "error" && e.message.includes("engine down"))).toBe(true);
    expect(events.some((e) => e.type === "audio")).toBe(false);
  });

  it("drops audio beyond the backlog bound with one error instead of growing without limit", async () => {
    const pipeline = pipelineWith({ asr: scriptedAsr(["x"]), maxBacklogMs: 100 });
    for (let i = 0; i < 50; i++) pipeline.pushAudio(silence(40));
    const events = await collect(pipeline, (evs) => evs.some((e) => e.type === "error"));
    await pipeline.close();
    expect(events.filter((e) => e.type === "error")).toHaveLength(1);
  });

  it("silence alone produces no events", async () => {
    const asr = scriptedAsr(["x"]);
    const pipeline = pipelineWith({ asr });
    pipeline.pushAudio(silence(2000));
    pipeline.finalize();
    await new Promise((resolve) => setTimeout(resolve, 50));
    await pipeline.close();
    const events = await collect(pipeline, () => false);
    expect(events).toEqual([]);
    expect(asr.opened).toBe(0);
  });

  it("passes recent final sentences as history and streams final translations as growing interims", async () => {
    const calls: { text: string; previous: readonly { source: string; translation: string }[] }[] = [];
    const pipeline = pipelineWith({
      asr: scriptedAsr(["one", "two", "three"]),
      finalizeMode: "sentence",
      speak: undefined,
      translate: async ({ text }) => text.toUpperCase(),
      translateStream: async function* (call) {
        calls.push(call);
        const words = call.text.toUpperCase().split(" ");
        for (let i = 1; i <= words.length; i++) {
          await new Promise((resolve) => setTimeout(resolve, 120));
          yield words.slice(0, i).join(" ");
        }
      },
    });
    for (const ms of [800, 800]) {
      pipeline.pushAudio(speech(ms));
      pipeline.pushAudio(silence(800));
    }
    const events = await collect(pipeline, (evs) => finals(evs, "translated").length >= 2);
    await pipeline.close();
    const [first, second] = finals(events, "translated");
    expect(calls[1]!.previous).toEqual([{ source: calls[0]!.text, translation: first!.text }]);
    // interims of the streamed line came before its final, each a prefix of the final
    const interims = events.filter(
      (e) => e.type === "translated" && !e.isFinal && e.segmentId === second!.segmentId,
    );
    expect(interims.length).toBeGreaterThan(0);
    for (const interim of interims)
      expect(second!.text.startsWith((interim as { text: string }).text)).toBe(true);
  });
});
