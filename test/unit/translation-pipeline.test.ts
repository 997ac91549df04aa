import { EngineBusyError } from "../../src/core/busy.js";
import { describe, expect, it } from "vitest";
import { EngineRegistry } from "../../src/engines/routing/registry.js";
import type { AsrEngine, AsrStream, MtEngine, TtsEngine, VadEngine } from "../../src/core/contracts.js";
import { createLivePipeline } from "../../src/pipeline/session-pipeline.js";
import { languagePlan } from "../../src/pipeline/language-plan.js";
import {
  TranslationPipeline,
  type PipelineEvent,
  type PipelineOptions,
} from "../../src/pipeline/translation-pipeline.js";
import { defaultVoice } from "../../src/voices/library.js";
import { energyVad } from "../support/vad-double.js";
import {
  collect,
  finals,
  pipelineWith as harnessPipeline,
  silence,
  speech,
  toneFor,
  clipsOf,
} from "../support/pipeline-harness.js";

/** Engine doubles: speech is any window whose samples are non-zero; the recognizer reveals one scripted word per 250 ms. */

/** The energy VAD, whose calls can be held (recognition is stuck) until released. */
function gatedVad(): { engine: VadEngine; hold(): Promise<void>; release(): void } {
  let gate: Promise<void> | undefined;
  let open = () => {};
  let onHeld = () => {};
  return {
    engine: {
      ...energyVad,
      createStream: () => ({
        probability: async (window) => {
          if (gate) {
            onHeld();
            await gate;
          }
          return window.some((s) => s !== 0) ? 0.9 : 0.01;
        },
      }),
    },
    /** Holds every call from now on; resolves once one is held. */
    hold() {
      gate = new Promise((resolve) => (open = resolve));
      return new Promise((resolve) => (onHeld = resolve));
    },
    release() {
      gate = undefined;
      open();
    },
  };
}

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

/** Like `scriptedAsr`, but its final pass keeps only the first `keep` words, withdrawing later ones its partials showed. */
function withdrawingAsr(script: string[], keep: number): AsrEngine {
  const engine = scriptedAsr(script);
  return {
    ...engine,
    async createStream(options) {
      const stream = await engine.createStream(options);
      return { ...stream, finish: async () => ({ text: script.slice(0, keep).join(" "), words: [] }) };
    },
  };
}

/** Like Apertium: every input is taken for a sentence, so the first word it knows gets a capital; unknown words are copied. */
const UNKNOWN_WORDS = new Set(["zorp"]);
async function sentenceCasing({ text }: { text: string }): Promise<string> {
  let capitalised = false;
  return text
    .split(" ")
    .map((word) => {
      if (capitalised || UNKNOWN_WORDS.has(word)) return word;
      capitalised = true;
      return word.charAt(0).toUpperCase() + word.slice(1);
    })
    .join(" ");
}

const pipelineWith = (overrides: Partial<PipelineOptions> & { asr: AsrEngine }): TranslationPipeline =>
  harnessPipeline({
    // a "translation" that keeps case and word boundaries: every word reversed
    translate: async ({ text }) =>
      text
        .split(" ")
        .map((w) => [...w].reverse().join(""))
        .join(" "),
    speak: toneFor,
    ...overrides,
  });

describe("TranslationPipeline (engine doubles)", () => {
  it("streams interims, prefix-extending stable finals, translations and speech; trailing silence ends the segment", async () => {
    const pipeline = pipelineWith({ asr: scriptedAsr(["go", "forward", "ten", "meters", "now"]) });
    pipeline.pushAudio(speech(1500));
    pipeline.pushAudio(silence(800));
    const events = await collect(
      pipeline,
      (evs) =>
        finals(evs, "translated").at(-1)?.text === "og drawrof net sretem won" &&
        clipsOf(evs).length === finals(evs, "translated").length,
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
    expect(clipsOf(events).map((clip) => clip[0]![0])).toEqual(
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
    const first = await collect(pipeline, (evs) => evs.at(-1)?.type === "finalized");
    pipeline.pushAudio(speech(600));
    pipeline.finalize();
    const second = await collect(pipeline, (evs) => evs.at(-1)?.type === "finalized");
    await pipeline.close();
    const idOf = (evs: PipelineEvent[]) => (finals(evs, "original")[0] as { segmentId: string }).segmentId;
    expect(idOf(first)).not.toBe(idOf(second));
    expect(asr.opened).toBe(2);
    // Each finalize is answered after its segment's final, translation and speech: the coalesced
    // pair once.
    for (const events of [first, second]) {
      expect(events.filter((e) => e.type === "finalized")).toHaveLength(1);
      const types = events.map((e) => e.type);
      expect(types.lastIndexOf("audio")).toBeGreaterThan(types.lastIndexOf("translated"));
      expect(types.at(-2)).toBe("audio");
    }
  });

  it("finalized follows the last speech of everything received before the finalize, however slow the speech", async () => {
    let release = () => {};
    const slowSpeech = new Promise<void>((resolve) => (release = resolve));
    const pipeline = pipelineWith({
      asr: scriptedAsr(["go", "forward", "ten", "meters"]),
      finalizeMode: "sentence",
      async *speak(text) {
        await slowSpeech;
        yield* toneFor(text);
      },
    });
    pipeline.pushAudio(speech(1000));
    pipeline.pushAudio(silence(800)); // the first utterance ends here by itself
    pipeline.pushAudio(speech(500));
    pipeline.finalize();
    const beforeSpeech = await collect(pipeline, (evs) => finals(evs, "translated").length === 2);
    for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
    expect(pipeline.working).toBe(true);
    release();
    const rest = await collect(pipeline, (evs) => evs.at(-1)?.type === "finalized");
    const events = [...beforeSpeech, ...rest];
    expect(clipsOf(events)).toHaveLength(2);
    expect(events.at(-1)).toEqual({ type: "finalized" });
    expect(pipeline.working).toBe(false);
    await pipeline.close();
  });

  it("without speech, finalized follows the last translation; a finalize with nothing heard is answered too", async () => {
    const pipeline = pipelineWith({ asr: scriptedAsr(["hello", "world"]), speak: undefined });
    pipeline.finalize();
    expect(await collect(pipeline, (evs) => evs.length > 0)).toEqual([{ type: "finalized" }]);
    pipeline.pushAudio(speech(600));
    pipeline.finalize();
    const events = await collect(pipeline, (evs) => evs.at(-1)?.type === "finalized");
    expect(events.at(-2)).toMatchObject({ type: "translated", isFinal: true });
    await pipeline.close();
  });

  it("gets the recognizer ready for the context's terms at start and at each new context, and spells them as given", async () => {
    const prepared: string[][] = [];
    const asr: AsrEngine = {
      ...scriptedAsr(["the", "okrs", "review"]),
      prepare: async (options) => void prepared.push(options.glossary!.terms.map((term) => term.text)),
    };
    const translated: string[] = [];
    const pipeline = pipelineWith({
      asr,
      context: "OKRs",
      translate: async (call) => {
        translated.push(call.text);
        return call.text;
      },
    });
    pipeline.pushAudio(speech(1200));
    pipeline.finalize();
    const events = await collect(pipeline, (evs) => finals(evs, "translated").length > 0);
    expect(finals(events, "original").at(-1)!.text).toMatch(/^the OKRs\b/u);
    expect(translated.at(-1)).toMatch(/^the OKRs\b/u);
    expect(pipeline.setContext("Kubernetes, Anneliese Brandt")).toBe(0);
    // A client changing its context in a loop: one preparation at a time, then the latest.
    for (let i = 0; i < 50; i++) pipeline.setContext(`Name${i}x`);
    pipeline.setContext("");
    await new Promise((resolve) => setTimeout(resolve, 10));
    await pipeline.close();
    expect(prepared).toEqual([["OKRs"], ["Kubernetes", "Anneliese Brandt"], ["Name49x"]]);
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

  it("about 300 ms of zeros after speech, then no more audio, ends the segment without finalize", async () => {
    const pipeline = pipelineWith({ asr: scriptedAsr(["go", "forward", "ten"]), speak: undefined });
    pipeline.pushAudio(speech(900));
    pipeline.pushAudio(silence(300)); // shorter than the segmenter's end silence (500 ms), and then nothing
    const events = await collect(
      pipeline,
      (evs) => finals(evs, "translated").at(-1)?.originalText === "go forward ten",
    );
    await pipeline.close();
    expect(finals(events, "original").at(-1)?.text).toBe("go forward ten");
    expect(finals(events, "translated").at(-1)?.text).toBe("og drawrof net");
  });

  it("stable mode never repeats a final, even when the recognizer's last pass withdraws words an interim showed", async () => {
    // partials reveal all five words; the final pass keeps four, all of them already committed
    const pipeline = pipelineWith({
      asr: withdrawingAsr(["go", "forward", "ten", "meters", "now"], 4),
      speak: undefined,
    });
    pipeline.pushAudio(speech(1400));
    const ending = pipeline.end();
    const events = await collect(pipeline, () => false);
    await ending;
    for (const type of ["original", "translated"] as const) {
      const texts = finals(events, type).map((e) => e.text);
      expect(texts.length).toBeGreaterThan(1);
      for (let i = 1; i < texts.length; i++) {
        expect(texts[i]).not.toBe(texts[i - 1]);
        expect(texts[i]!.startsWith(texts[i - 1]!)).toBe(true);
      }
    }
    // the segment still ends with a final, covering what its last interim showed
    const transcripts = events.filter((e) => e.type === "original");
    expect(transcripts.at(-1)).toMatchObject({ isFinal: true, text: "go forward ten meters now" });
    expect(transcripts.findLast((e) => !e.isFinal)?.text).toBe("go forward ten meters now");
  });

  it("a segment whose interims showed words never ends with an empty final, even when the recognizer's last pass withdraws them all", async () => {
    // partials reveal two words (too few to commit); the final pass keeps none
    const pipeline = pipelineWith({ asr: withdrawingAsr(["go", "forward", "ten"], 0), speak: undefined });
    pipeline.pushAudio(speech(600));
    const ending = pipeline.end();
    const events = await collect(pipeline, () => false);
    await ending;
    expect(events.filter((e) => e.type === "original" && !e.isFinal).at(-1)).toMatchObject({
      text: "go forward",
    });
    expect(finals(events, "original").map((e) => e.text)).toEqual(["go forward"]);
    expect(finals(events, "translated").map((e) => e.text)).toEqual(["og drawrof"]);
  });

  it("every translation of a segment keeps the case of the words already shown (the translator capitalises each input)", async () => {
    const pipeline = pipelineWith({
      asr: scriptedAsr(["go", "forward", "zorp", "ten", "meters", "now", "please"]),
      translate: sentenceCasing,
      // as the service wraps a translator that cannot stream: one value, the translation
      translateStream: async function* (call) {
        yield await sentenceCasing(call);
      },
      speak: undefined,
    });
    pipeline.pushAudio(speech(2000));
    const ending = pipeline.end();
    const events = await collect(pipeline, () => false);
    await ending;
    const translated = events.filter((e) => e.type === "translated");
    expect(finals(events, "translated").length).toBeGreaterThan(2);
    expect(translated.at(-1)!.text).toBe("Go forward zorp ten meters now please");
    for (const { text } of translated) expect(text.slice(1)).toBe(text.slice(1).toLowerCase());
  });

  it("with a recognizer that writes case, a capital inside a later span is a name and stays", async () => {
    const pipeline = pipelineWith({
      asr: scriptedAsr(["We", "flew", "from", "Paris", "to", "London", "today"]),
      // keeps the case it is given, translates the name
      translate: async ({ text }) => text.replace("London", "Londres"),
      speak: undefined,
    });
    pipeline.pushAudio(speech(2000));
    const ending = pipeline.end();
    const events = await collect(pipeline, () => false);
    await ending;
    const last = finals(events, "translated").at(-1)!.text;
    expect(finals(events, "translated").length).toBeGreaterThan(1);
    expect(last.startsWith("We")).toBe(true);
    expect(last).toContain("to Londres today");
  });

  it("a translator that cannot stream has each final translation sent once, as the final", async () => {
    const pipeline = pipelineWith({
      asr: scriptedAsr(["go", "forward", "ten", "meters", "now"]),
      // interim translations are marked, so an unmarked interim can only be a final sent early
      translate: async ({ text }) => `${text}…`,
      translateStream: async function* ({ text }) {
        yield text;
      },
      speak: undefined,
    });
    pipeline.pushAudio(speech(1500));
    const ending = pipeline.end();
    const events = await collect(pipeline, () => false);
    await ending;
    const interims = events.filter((e) => e.type === "translated" && !e.isFinal);
    expect(interims.length).toBeGreaterThan(0);
    for (const { text } of interims as { text: string }[]) expect(text.endsWith("…")).toBe(true);
    expect(finals(events, "translated").at(-1)?.text).toBe("go forward ten meters now");
  });

  // A client closes a line on its translated final: every original final gets one, also when its
  // span has no translation, with the `error` that says why sent just before it.
  it("a failed translation is an error naming its segment, then a translated final without the span", async () => {
    const pipeline = pipelineWith({
      asr: scriptedAsr(["go", "forward", "ten", "meters"]),
      translate: async () => {
        throw new Error("engine down");
      },
    });
    pipeline.pushAudio(speech(1200));
    const ending = pipeline.end();
    const events = await collect(pipeline, () => false);
    await ending;
    const originals = finals(events, "original");
    expect(originals.at(-1)!.text).toBe("go forward ten meters");
    const translated = finals(events, "translated");
    expect(translated.map((e) => [e.segmentId, e.originalText, e.text])).toEqual(
      originals.map((e) => [e.segmentId, e.text, ""]),
    );
    for (const line of translated) {
      const before = events[events.indexOf(line) - 1];
      expect(before).toEqual({
        type: "error",
        message: "translation failed: engine down",
        fatal: false,
        segmentId: line.segmentId,
      });
    }
    expect(events.some((e) => e.type === "audio")).toBe(false);
  });

  it("a span whose translation fails is left out of the segment's translation, the others are kept and spoken", async () => {
    const spoken: string[] = [];
    const pipeline = pipelineWith({
      asr: scriptedAsr(["go", "forward", "ten", "meters", "now", "please"]),
      translate: async ({ text }) => {
        if (text.split(" ").includes("ten")) throw new Error("engine down");
        return text.toUpperCase();
      },
      speak: async function* (text) {
        spoken.push(text);
        yield new Float32Array(1920);
      },
    });
    pipeline.pushAudio(speech(1500));
    pipeline.pushAudio(silence(800));
    const ending = pipeline.end();
    const events = await collect(pipeline, () => false);
    await ending;
    const originals = finals(events, "original");
    const translated = finals(events, "translated");
    expect(translated.map((e) => e.originalText)).toEqual(originals.map((e) => e.text));
    // the span with "ten" is missing (its final repeats the translation so far, after its error);
    // the others are translated, and the translation still grows by prefix extension
    const failed = translated.findIndex((e) => e.originalText.split(" ").includes("ten"));
    expect(failed).toBeGreaterThan(0);
    expect(failed).toBeLessThan(translated.length - 1);
    expect(translated[failed]!.text).toBe(translated[failed - 1]!.text);
    expect(events[events.indexOf(translated[failed]!) - 1]).toEqual({
      type: "error",
      message: "translation failed: engine down",
      fatal: false,
      segmentId: translated[failed]!.segmentId,
    });
    for (let i = 1; i < translated.length; i++)
      expect(translated[i]!.text.startsWith(translated[i - 1]!.text)).toBe(true);
    expect(translated.at(-1)!.text).toMatch(/^GO .*PLEASE$/iu);
    expect(translated.at(-1)!.text).not.toMatch(/ten/iu);
    expect(spoken).toHaveLength(translated.length - 1);
  });

  it("an utterance whose language is never identified gets an error, then a translated final with no text", async () => {
    const pipeline = pipelineWith({
      asr: scriptedAsr(["hola", "que", "tal"]),
      sourceLanguage: "auto",
    });
    pipeline.pushAudio(speech(800));
    const ending = pipeline.end();
    const events = await collect(pipeline, () => false);
    await ending;
    const originals = finals(events, "original");
    expect(originals.length).toBeGreaterThan(0);
    const translated = finals(events, "translated");
    expect(translated.map((e) => [e.segmentId, e.originalText, e.text, e.language])).toEqual(
      originals.map((e) => [e.segmentId, e.text, "", undefined]),
    );
    for (const line of translated)
      expect(events[events.indexOf(line) - 1]).toMatchObject({
        type: "error",
        message: "the language of this utterance could not be identified",
        segmentId: line.segmentId,
      });
  });

  it("shows no translation for an interim a busy engine refused, without an error; a refused final is an error", async () => {
    const calls: { text: string; interim: boolean }[] = [];
    const pipeline = pipelineWith({
      asr: scriptedAsr(["go", "forward", "ten", "meters"]),
      translate: async ({ text, interim }) => {
        calls.push({ text, interim: interim === true });
        throw new EngineBusyError("the translator is busy");
      },
      speak: undefined,
    });
    pipeline.pushAudio(speech(1200));
    const ending = pipeline.end();
    const events = await collect(pipeline, () => false);
    await ending;
    // Interims were asked for (and told apart from finals), and refused in silence.
    expect(calls.some((call) => call.interim)).toBe(true);
    expect(events.some((e) => e.type === "translated" && !e.isFinal)).toBe(false);
    const errors = events.filter((e) => e.type === "error");
    expect(errors.length).toBe(finals(events, "translated").length);
    expect(errors.every((e) => e.type === "error" && e.message.includes("busy"))).toBe(true);
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

  // Under sustained overload recognition frees a little room now and then, so some audio is
  // accepted between drops: that is still one episode, reported once. It ends when the backlog has
  // drained; the next overload is reported again.
  it("reports falling behind once per episode, an episode ending when the backlog has drained", async () => {
    const vad = gatedVad();
    const dropped: number[] = [];
    const pipeline = pipelineWith({
      vad: vad.engine,
      asr: scriptedAsr(["go", "forward", "ten", "meters"]),
      maxBacklogMs: 100,
      speak: undefined,
      observer: {
        latency: () => {},
        engineCall: () => {},
        inputDropped: (seconds) => void dropped.push(seconds),
      },
    });
    const chunk = () => speech(40); // 100 ms hold 2.5 chunks

    // Recognition is stuck: the third chunk on is dropped.
    const held = vad.hold();
    for (let i = 0; i < 5; i++) pipeline.pushAudio(chunk());
    await held;
    expect(dropped).toHaveLength(3);
    // Recognition took the first chunk: there is room for one more, then drops again.
    for (let i = 0; i < 3; i++) pipeline.pushAudio(chunk());
    expect(dropped).toHaveLength(5);

    // Recognition catches up; everything queued is recognized.
    vad.release();
    pipeline.finalize();
    const firstEpisode = await collect(pipeline, (evs) => finals(evs, "original").length > 0);
    expect(firstEpisode.filter((e) => e.type === "error")).toHaveLength(1);

    // A new episode.
    vad.hold();
    for (let i = 0; i < 5; i++) pipeline.pushAudio(chunk());
    expect(dropped).toHaveLength(8);
    vad.release();
    await pipeline.close();
    const rest = await collect(pipeline, () => false);
    const errors = [...firstEpisode, ...rest].filter((e) => e.type === "error");
    expect(errors).toEqual([
      {
        type: "error",
        message: "the server is falling behind this session's audio; audio is being dropped",
        fatal: false,
      },
      {
        type: "error",
        message: "the server is falling behind this session's audio; audio is being dropped",
        fatal: false,
      },
    ]);
    expect(rest.filter((e) => e.type === "error")).toHaveLength(1);
  });

  // The real-time socket keeps a session open past its idle period while this is true: a loaded
  // server can be behind a client that sent its audio and waits for the results.
  it("is working from the audio's arrival until its last result is out, through held recognition and held translation", async () => {
    const vad = gatedVad();
    let openTranslation = () => {};
    const translationGate = new Promise<void>((resolve) => (openTranslation = resolve));
    let translating = () => {};
    const translationAsked = new Promise<void>((resolve) => (translating = resolve));
    const pipeline = pipelineWith({
      vad: vad.engine,
      asr: scriptedAsr(["go", "forward"]),
      finalizeMode: "sentence",
      translate: async ({ text }) => {
        translating();
        await translationGate;
        return text.toUpperCase();
      },
    });
    expect(pipeline.working).toBe(false);

    const held = vad.hold();
    pipeline.pushAudio(speech(500));
    pipeline.pushAudio(silence(800));
    await held;
    expect(pipeline.working).toBe(true); // audio not yet recognized

    vad.release();
    const recognized = await collect(pipeline, (evs) => finals(evs, "original").length > 0);
    await translationAsked;
    // Everything heard; the intake has had time to take the rest of the silence.
    for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
    expect(pipeline.working).toBe(true); // the final is being translated

    openTranslation();
    const results = await collect(pipeline, (evs) => evs.some((e) => e.type === "audio"));
    while (pipeline.working) await new Promise((resolve) => setImmediate(resolve));
    expect(finals([...recognized, ...results], "translated").map((e) => e.text)).toEqual(["GO FORWARD"]);
    await pipeline.close();
  });

  it("silence alone produces no events", async () => {
    const asr = scriptedAsr(["x"]);
    const pipeline = pipelineWith({ asr });
    pipeline.pushAudio(silence(2000));
    pipeline.finalize();
    // end() resolves once everything pushed has gone through every stage.
    await pipeline.end();
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

describe("closing the pipeline cancels engine calls (engine doubles)", () => {
  /** A call that never finishes on its own: it settles only when its signal aborts. */
  function hangUntilAborted(signal: AbortSignal | undefined, calls: { signal?: AbortSignal }[]) {
    calls.push({ signal });
    return new Promise<never>((_, reject) => {
      signal?.addEventListener("abort", () => reject(new Error("cancelled")), { once: true });
    });
  }

  function speakerPipeline(mt: MtEngine, tts: TtsEngine): TranslationPipeline {
    const registry = EngineRegistry.fromEngines({
      vad: energyVad,
      asr: [scriptedAsr(["go", "forward"])],
      mt: [mt],
      tts: [tts],
    });
    return createLivePipeline(registry, {
      plan: languagePlan({
        sourceLanguage: "en",
        targetLanguage: "es",
      }),
      finalizeMode: "sentence",
      voice: defaultVoice("female"),
    });
  }

  const mtDouble = (translate: MtEngine["translate"]): MtEngine => ({
    info: { id: "mt-double", version: "test" },
    capabilities: { pairs: [{ from: "en", to: "es" }], usesContext: false },
    translate,
    close: async () => {},
  });
  const ttsDouble = (synthesize: TtsEngine["synthesize"]): TtsEngine => ({
    info: { id: "tts-double", version: "test" },
    capabilities: { languages: ["es"] },
    synthesize,
    close: async () => {},
  });

  async function waitFor(condition: () => boolean): Promise<void> {
    for (let i = 0; i < 500 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(condition()).toBe(true);
  }

  it("aborts a running translate call; the cancellation is not reported as a failure", async () => {
    const calls: { signal?: AbortSignal }[] = [];
    const pipeline = speakerPipeline(
      mtDouble((_, signal) => hangUntilAborted(signal, calls)),
      ttsDouble(async () => ({ samples: new Float32Array(2400).fill(0.1), sampleRate: 24_000 })),
    );
    const events = collect(pipeline, () => false);
    pipeline.pushAudio(speech(600));
    pipeline.finalize();
    await waitFor(() => calls.length > 0);
    expect(calls[0]!.signal?.aborted).toBe(false);
    await pipeline.close();
    expect(calls.every((call) => call.signal?.aborted)).toBe(true);
    const delivered = await events;
    expect(delivered.some((e) => e.type === "original")).toBe(true);
    expect(delivered.filter((e) => e.type === "error")).toEqual([]);
    expect(delivered.some((e) => e.type === "translated")).toBe(false);
  });

  it("aborts a running synthesize call; no audio and no error follow", async () => {
    const calls: { signal?: AbortSignal }[] = [];
    const pipeline = speakerPipeline(
      mtDouble(async ({ text }) => text.toUpperCase()),
      ttsDouble((_, signal) => hangUntilAborted(signal, calls)),
    );
    const events = collect(pipeline, () => false);
    pipeline.pushAudio(speech(600));
    pipeline.finalize();
    await waitFor(() => calls.length > 0);
    expect(calls[0]!.signal?.aborted).toBe(false);
    await pipeline.close();
    expect(calls[0]!.signal?.aborted).toBe(true);
    const delivered = await events;
    expect(finals(delivered, "translated").at(-1)?.text).toBe("GO FORWARD");
    expect(delivered.filter((e) => e.type === "error")).toEqual([]);
    expect(delivered.some((e) => e.type === "audio")).toBe(false);
  });

  it("emits a streamed clip's frames as they come, clipEnd on the last; a failure part-way ends the clip", async () => {
    const pipeline = pipelineWith({
      asr: scriptedAsr(["one", "two"]),
      speak: async function* () {
        yield new Float32Array(1920).fill(0.1);
        yield new Float32Array(1920).fill(0.1);
        throw new Error("voice lost");
      },
    });
    pipeline.pushAudio(speech(600));
    pipeline.finalize();
    const events = await collect(pipeline, (evs) => evs.some((e) => e.type === "error"));
    await pipeline.close();
    const audio = events.filter((e) => e.type === "audio");
    expect(audio.map((e) => e.clipEnd)).toEqual([false, true]);
    const error = events.find((e) => e.type === "error")!;
    expect(error).toMatchObject({ message: "speech synthesis failed: voice lost", fatal: false });
    expect(events.indexOf(error)).toBeGreaterThan(events.indexOf(audio.at(-1)!));
  });
});
