import { describe, expect, it } from "vitest";
import { EngineRegistry, translateAlong } from "../../src/engines/routing/registry.js";
import { streamSynthesis } from "../../src/engines/kit/synthesis.js";
import type {
  AsrEngine,
  MtEngine,
  SynthesisRequest,
  SynthesizedAudio,
  TtsEngine,
  VadEngine,
} from "../../src/core/contracts.js";
import { createLivePipeline } from "../../src/pipeline/session-pipeline.js";
import { languagePlan } from "../../src/pipeline/language-plan.js";
import { renderSpeech } from "../../src/pipeline/speech-output.js";
import { defaultVoice } from "../../src/voices/library.js";

const vad: VadEngine = {
  info: { id: "vad-double", version: "test" },
  capabilities: { sampleRate: 16_000, windowSamples: 512 },
  createStream: () => ({ probability: async () => 0 }),
  close: async () => {},
};

const clip = (length: number, value = 0.1): SynthesizedAudio => ({
  samples: new Float32Array(length).fill(value),
  sampleRate: 24_000,
});

function tts(id: string, synthesize: TtsEngine["synthesize"], extra: Partial<TtsEngine> = {}): TtsEngine {
  return {
    info: { id, version: "test" },
    capabilities: { languages: ["es"] },
    synthesize,
    close: async () => {},
    ...extra,
  };
}

function mt(id: string, translate: MtEngine["translate"]): MtEngine {
  return {
    info: { id, version: "test" },
    capabilities: { pairs: [{ from: "en", to: "es" }], usesContext: false },
    translate,
    close: async () => {},
  };
}

const REQUEST: SynthesisRequest = { text: "hola", language: "es", voice: defaultVoice("female") };

async function all<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

describe("streamSynthesis", () => {
  it("yields a non-streaming engine's whole clip once, passing the signal", async () => {
    const signals: (AbortSignal | undefined)[] = [];
    const engine = tts("whole", async (_, signal) => {
      signals.push(signal);
      return clip(5000);
    });
    const signal = new AbortController().signal;
    const chunks = await all(streamSynthesis(engine, REQUEST, signal));
    expect(chunks.map((c) => c.samples.length)).toEqual([5000]);
    expect(signals).toEqual([signal]);
  });

  it("uses the engine's own stream when it has one; renderSpeech frames the chunks like the whole clip", async () => {
    const engine = tts("streaming", async () => clip(5000), {
      async *synthesizeStream() {
        yield clip(1000);
        yield clip(1000);
        yield clip(3000);
      },
    });
    const frames = await all(renderSpeech(engine, REQUEST));
    expect(frames.map((f) => f.length)).toEqual([1920, 1920, 1160]);
  });
});

describe("EngineRegistry fallbacks", () => {
  it("falls back to the next synthesizer when a stream fails before its first chunk", async () => {
    const failing = tts("failing", async () => clip(10), {
      // eslint-disable-next-line require-yield
      async *synthesizeStream() {
        throw new Error("server down");
      },
    });
    const signals: (AbortSignal | undefined)[] = [];
    const backup = tts("backup", async (_, signal) => {
      signals.push(signal);
      return clip(2000);
    });
    const registry = EngineRegistry.fromEngines({ vad, asr: [], mt: [], tts: [failing, backup] });
    const synthesizer = registry.synthesizer("es")!;
    expect(synthesizer.info.id).toBe("failing");
    const signal = new AbortController().signal;
    const chunks = await all(streamSynthesis(synthesizer, REQUEST, signal));
    expect(chunks.map((c) => c.samples.length)).toEqual([2000]);
    expect(signals).toEqual([signal]);
  });

  it("does not fall back once a stream has produced audio", async () => {
    const partial = tts("partial", async () => clip(10), {
      async *synthesizeStream() {
        yield clip(100);
        throw new Error("connection lost");
      },
    });
    const backup = tts("backup", async () => clip(2000));
    const registry = EngineRegistry.fromEngines({ vad, asr: [], mt: [], tts: [partial, backup] });
    const received: number[] = [];
    await expect(async () => {
      for await (const chunk of streamSynthesis(registry.synthesizer("es")!, REQUEST))
        received.push(chunk.samples.length);
    }).rejects.toThrow("connection lost");
    expect(received).toEqual([100]);
  });

  it("tries no further engine or route once the call is cancelled", async () => {
    const controller = new AbortController();
    const reason = new Error("session closed");
    let backupCalls = 0;
    const cancelled = tts("cancelled", async () => {
      controller.abort(reason);
      throw reason;
    });
    const backup = tts("backup", async () => {
      backupCalls++;
      return clip(10);
    });
    const registry = EngineRegistry.fromEngines({
      vad,
      asr: [],
      mt: [
        mt("first", async (_, signal) => {
          expect(signal).toBe(controller.signal);
          throw reason;
        }),
        mt("second", async () => {
          backupCalls++;
          return "no";
        }),
      ],
      tts: [cancelled, backup],
    });
    await expect(registry.synthesizer("es")!.synthesize(REQUEST, controller.signal)).rejects.toBe(reason);
    await expect(
      translateAlong(registry.translationRoutes("en", "es"), { text: "hi" }, controller.signal),
    ).rejects.toBe(reason);
    expect(backupCalls).toBe(0);
  });
});

describe("engine-call metrics of a live pipeline", () => {
  const RATE = 16_000;
  /** Speech wherever the audio is not silent. */
  const energyVad: VadEngine = {
    ...vad,
    createStream: () => ({ probability: async (w) => (w.some((s) => s !== 0) ? 0.9 : 0.01) }),
  };
  /** Hears "hello" in every utterance. */
  const asr: AsrEngine = {
    info: { id: "asr-double", version: "test" },
    capabilities: {
      languages: ["en"],
      sampleRate: RATE,
      partialResults: false,
      wordTimings: false,
      punctuation: false,
    },
    createStream: async () => ({
      write: async () => {},
      partial: async () => ({ text: "", words: [] }),
      finish: async () => ({ text: "hello", words: [] }),
      abort: () => {},
    }),
    close: async () => {},
  };

  /** The engine calls an utterance of speech makes, as the metrics record them (recognition too with `all`). */
  async function engineCalls(registry: EngineRegistry, all = false) {
    const calls: { kind: string; engine: string; ok: boolean }[] = [];
    const pipeline = createLivePipeline(registry, {
      plan: languagePlan({
        sourceLanguage: "en",
        targetLanguage: "es",
      }),
      finalizeMode: "stable",
      voice: defaultVoice("female"),
      observer: {
        latency: () => {},
        engineCall: (kind, engine, _seconds, ok) => calls.push({ kind, engine, ok }),
        inputDropped: () => {},
      },
    });
    pipeline.pushAudio(new Int16Array(RATE).fill(8_000));
    pipeline.pushAudio(new Int16Array(RATE));
    const ending = pipeline.end();
    for await (const event of pipeline.events) void event;
    await ending;
    return all ? calls : calls.filter((call) => call.kind !== "recognize");
  }

  it("credits the recognizer that opened the stream: the fallback when the preferred one cannot", async () => {
    const remoteAsr: AsrEngine = {
      ...asr,
      info: { id: "remote-asr", version: "test" },
      createStream: async () => {
        throw new Error("circuit open");
      },
    };
    const registry = EngineRegistry.fromEngines({
      vad: energyVad,
      asr: [remoteAsr, asr],
      mt: [mt("local-mt", async ({ text }) => `${text} (es)`)],
      tts: [tts("local-tts", async () => clip(2400))],
    });
    expect((await engineCalls(registry, true)).filter((call) => call.kind === "recognize")).toEqual([
      { kind: "recognize", engine: "asr-double", ok: true },
    ]);
  });

  it("credits the fallback engine that served a call, not the preferred one that failed", async () => {
    const down = async (): Promise<never> => {
      throw new Error("server down");
    };
    const registry = EngineRegistry.fromEngines({
      vad: energyVad,
      asr: [asr],
      mt: [mt("remote-mt", down), mt("local-mt", async ({ text }) => `${text} (es)`)],
      tts: [tts("remote-tts", down), tts("local-tts", async () => clip(2400))],
    });
    expect(await engineCalls(registry)).toEqual([
      { kind: "translate", engine: "local-mt", ok: true },
      { kind: "synthesize", engine: "local-tts", ok: true },
    ]);
  });

  it("credits the preferred engine when it serves, and with a failure when every engine failed", async () => {
    const down = async (): Promise<never> => {
      throw new Error("server down");
    };
    const serving = EngineRegistry.fromEngines({
      vad: energyVad,
      asr: [asr],
      mt: [mt("remote-mt", async ({ text }) => `${text} (es)`), mt("local-mt", down)],
      tts: [tts("remote-tts", async () => clip(2400)), tts("local-tts", down)],
    });
    expect(await engineCalls(serving)).toEqual([
      { kind: "translate", engine: "remote-mt", ok: true },
      { kind: "synthesize", engine: "remote-tts", ok: true },
    ]);
    const failing = EngineRegistry.fromEngines({
      vad: energyVad,
      asr: [asr],
      mt: [mt("remote-mt", down), mt("local-mt", down)],
      tts: [tts("remote-tts", down), tts("local-tts", down)],
    });
    expect(await engineCalls(failing)).toEqual([{ kind: "translate", engine: "remote-mt", ok: false }]);
  });
});
