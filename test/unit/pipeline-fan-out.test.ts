import { describe, expect, it } from "vitest";
import type { LanguageCode } from "../../src/core/contracts.js";
import type { PipelineEvent, TargetedCall } from "../../src/pipeline/translation-pipeline.js";
import { collect, finals, helloAsr, pipelineWith, silence, speech } from "../support/pipeline-harness.js";

/**
 * Rooms in several languages: the pipeline's fan-out (`routes`), one lane per target language,
 * with engine doubles (see pipeline-stages.test.ts for the single lane).
 */

const translateInto = async ({ text, to }: TargetedCall) => `${text} (${to})`;

/** Speaks each line as one frame; speech in `holding` waits until `release()`. */
function voices(holding?: LanguageCode) {
  const spoken: string[] = [];
  let release = () => {};
  const released = new Promise<void>((resolve) => (release = resolve));
  return {
    spoken,
    release,
    speak: async function* (text: string, language: LanguageCode) {
      if (language === holding) await released;
      spoken.push(`${language}: ${text}`);
      yield new Float32Array(480).fill(0.1);
    },
  };
}

const audioLanguages = (events: PipelineEvent[]) =>
  events.flatMap((event) => (event.type === "audio" && event.clipEnd ? [event.language] : []));

/** A room speaker's routes: one lane per language. */
const lanesInto = (languages: readonly LanguageCode[]) => languages.map((to) => ({ lane: to, to }));

/** Lanes into Spanish and German, whose Spanish speech waits for `voice.release()`. */
function spanishHeld() {
  const voice = voices("es");
  const pipeline = pipelineWith({
    asr: helloAsr,
    translate: translateInto,
    speak: voice.speak,
    routes: () => lanesInto(["es", "de"]),
  });
  return { voice, pipeline };
}

describe("fan-out to the languages a room listens in", () => {
  it("translates and speaks each final into every target, each event naming its language", async () => {
    const voice = voices();
    const pipeline = pipelineWith({
      asr: helloAsr,
      translate: translateInto,
      speak: voice.speak,
      routes: () => lanesInto(["es", "de"]),
    });
    pipeline.pushAudio(speech(600));
    pipeline.pushAudio(silence(800));
    void pipeline.end();
    const events = await collect(pipeline);
    const translated = finals(events, "translated");
    expect(translated.map((event) => [event.to, event.text]).sort()).toEqual([
      ["de", "hello (de)"],
      ["es", "hello (es)"],
    ]);
    expect(finals(events, "original")).toHaveLength(1);
    expect(audioLanguages(events).sort()).toEqual(["de", "es"]);
  });

  it("a slow language does not hold back another", async () => {
    const { voice, pipeline } = spanishHeld();
    pipeline.pushAudio(speech(600));
    pipeline.pushAudio(silence(800));
    // German speech arrives while Spanish speech is still held.
    const untilGerman = await collect(pipeline, (events) => audioLanguages(events).includes("de"));
    expect(audioLanguages(untilGerman)).toEqual(["de"]);
    expect(voice.spoken).toEqual(["de: hello (de)"]);
    voice.release();
    void pipeline.end();
    const rest = await collect(pipeline);
    expect(audioLanguages(rest)).toEqual(["es"]);
  });

  it("translates and speaks nothing of an utterance nobody else listens to", async () => {
    const calls: string[] = [];
    const pipeline = pipelineWith({
      asr: helloAsr,
      translate: async (call) => {
        calls.push(call.to);
        return translateInto(call);
      },
      speak: voices().speak,
      // The only listener hears the speaker's own language.
      routes: (heard) => lanesInto(["en"].filter((to) => to !== heard)),
    });
    pipeline.pushAudio(speech(600));
    pipeline.pushAudio(silence(800));
    void pipeline.end();
    const events = await collect(pipeline);
    expect(finals(events, "original")).toHaveLength(1);
    expect(events.filter((event) => event.type === "translated" || event.type === "audio")).toEqual([]);
    expect(calls).toEqual([]);
  });

  it("asks who listens at each utterance", async () => {
    let listening: LanguageCode[] = ["de"];
    const pipeline = pipelineWith({
      asr: helloAsr,
      translate: translateInto,
      speak: voices().speak,
      routes: (heard) => lanesInto(listening.filter((to) => to !== heard)),
    });
    pipeline.pushAudio(speech(600));
    pipeline.pushAudio(silence(800));
    const first = await collect(pipeline, (events) => finals(events, "translated").length === 1);
    expect(finals(first, "translated").map((event) => event.to)).toEqual(["de"]);
    listening = ["fr"];
    pipeline.pushAudio(speech(600));
    pipeline.pushAudio(silence(800));
    void pipeline.end();
    const second = await collect(pipeline);
    expect(finals(second, "translated").map((event) => event.to)).toEqual(["fr"]);
  });

  it("a finalize passes every lane: one `finalized`, after the slowest lane's speech", async () => {
    const { voice, pipeline } = spanishHeld();
    pipeline.pushAudio(speech(600));
    pipeline.finalize();
    // German is out; Spanish speech is held, so the finalize has not passed its lane yet.
    const untilGerman = await collect(pipeline, (events) => audioLanguages(events).includes("de"));
    expect(untilGerman.some((event) => event.type === "finalized")).toBe(false);
    voice.release();
    void pipeline.end();
    const rest = await collect(pipeline);
    expect(audioLanguages(rest)).toEqual(["es"]);
    expect(rest.filter((event) => event.type === "finalized")).toHaveLength(1);
    expect(rest.at(-1)?.type).toBe("finalized");
  });

  it("a finalize before any lane exists is answered at once", async () => {
    // Nobody listens: the utterance has no route, so no lane is ever made.
    const pipeline = pipelineWith({ asr: helloAsr, translate: translateInto, routes: () => [] });
    pipeline.pushAudio(speech(600));
    pipeline.finalize();
    const events = await collect(pipeline, (seen) => seen.some((event) => event.type === "finalized"));
    expect(events.map((event) => event.type)).toContain("original");
    expect(events.filter((event) => event.type === "translated")).toEqual([]);
    await pipeline.close();
  });
});
