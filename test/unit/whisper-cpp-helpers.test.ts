import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  HEADER_BYTES,
  inspectModelFile,
  modelLanguages,
  modelSize,
  parseModelHeader,
  toIsoLanguage,
  toWhisperLanguage,
  type WhisperModelHeader,
} from "../../src/engines/whisper-cpp/model.js";
import {
  DecodeCancelledError,
  DecodeScheduler,
  type RunningDecode,
} from "../../src/engines/whisper-cpp/scheduler.js";
import { dropAnnotations, wordTimings } from "../../src/engines/whisper-cpp/words.js";

describe("whisper.cpp word timings", () => {
  it("joins per-token segments into words that start where their first token starts", () => {
    const segments = [
      { text: " go", t0: 460, t1: 700 },
      { text: " for", t0: 700, t1: 900 },
      { text: "ward", t0: 900, t1: 1200 },
      { text: " ten", t0: 1200, t1: 1500 },
      { text: " meters", t0: 1500, t1: 2100 },
      { text: ".", t0: 2100, t1: 2200 },
    ];
    expect(wordTimings(" go forward ten meters.", segments, 2786)).toEqual([
      { word: "go", startMs: 460, endMs: 700 },
      { word: "forward", startMs: 700, endMs: 1200 },
      { word: "ten", startMs: 1200, endMs: 1500 },
      { word: "meters.", startMs: 1500, endMs: 2200 },
    ]);
  });

  it("spreads a multi-word segment over its visible characters in proportion", () => {
    // Segment-level timings only: 10 visible characters over 1000 ms, spaces take no time.
    expect(wordTimings(" ab cdefgh ij", [{ text: " ab cdefgh ij", t0: 1000, t1: 2000 }], 5000)).toEqual([
      { word: "ab", startMs: 1000, endMs: 1200 },
      { word: "cdefgh", startMs: 1200, endMs: 1800 },
      { word: "ij", startMs: 1800, endMs: 2000 },
    ]);
  });

  it("maps positions proportionally when tokens split a UTF-8 character", () => {
    // The addon turns the halves of a split character into U+FFFD; the full text is intact.
    const segments = [
      { text: " 你", t0: 0, t1: 400 },
      { text: "\uFFFD", t0: 400, t1: 600 },
      { text: "\uFFFD", t0: 600, t1: 800 },
      { text: " 吗", t0: 800, t1: 1000 },
    ];
    const words = wordTimings(" 你好 吗", segments, 1000);
    expect(words.map((w) => w.word)).toEqual(["你好", "吗"]);
    expect(words[0]!.startMs).toBe(0);
    expect(words[1]!.endMs).toBe(1000);
    expect(words[1]!.startMs).toBeGreaterThanOrEqual(words[0]!.endMs);
  });

  it("clamps to the audio and keeps words monotonic whatever whisper returns", () => {
    const segments = [
      { text: " a", t0: -50, t1: 300 },
      { text: " b", t0: 200, t1: 100 },
      { text: " c", t0: 2500, t1: 31_000 },
    ];
    const words = wordTimings(" a b c", segments, 3000);
    let previousEnd = 0;
    for (const word of words) {
      expect(word.startMs).toBeGreaterThanOrEqual(previousEnd);
      expect(word.endMs).toBeGreaterThanOrEqual(word.startMs);
      expect(word.endMs).toBeLessThanOrEqual(3000);
      previousEnd = word.endMs;
    }
    expect(words.map((w) => w.word)).toEqual(["a", "b", "c"]);
  });

  it("returns no words for an empty transcript and spreads text without segments over the audio", () => {
    expect(wordTimings("  ", [], 1000)).toEqual([]);
    expect(wordTimings("hello there", [], 1000)).toEqual([
      { word: "hello", startMs: 0, endMs: 500 },
      { word: "there", startMs: 500, endMs: 1000 },
    ]);
  });

  it("drops non-speech annotations and keeps ordinary words", () => {
    const timed = (text: string) =>
      text.split(" ").map((word, i) => ({ word, startMs: i * 100, endMs: i * 100 + 90 }));
    const words = (text: string) => dropAnnotations(timed(text)).map((w) => w.word);
    expect(words("[BLANK_AUDIO]")).toEqual([]);
    expect(words("hello [Music] world")).toEqual(["hello", "world"]);
    expect(words("(upbeat music) so we begin.")).toEqual(["so", "we", "begin."]);
    expect(words("♪ la la ♪ fin")).toEqual(["la", "la", "fin"]);
    expect(words("[ Silence ].")).toEqual([]);
    expect(words("an unclosed (bracket stays")).toEqual(["an", "unclosed", "(bracket", "stays"]);
    expect(words("go forward ten meters")).toEqual(["go", "forward", "ten", "meters"]);
  });
});

function headerBytes(values: number[], magic = 0x67676d6c): Uint8Array {
  const bytes = new Uint8Array(HEADER_BYTES + 8);
  const view = new DataView(bytes.buffer);
  view.setUint32(0, magic, true);
  values.forEach((value, i) => view.setInt32(4 + 4 * i, value, true));
  return bytes;
}

const TINY = [51_865, 1500, 384, 6, 4, 448, 384, 6, 4, 80, 1];

describe("whisper.cpp model header", () => {
  it("reads the hyper-parameters and derives size and languages", () => {
    const header = parseModelHeader(headerBytes(TINY)) as WhisperModelHeader;
    expect(header).toMatchObject({ nVocab: 51_865, nAudioLayer: 4, nMels: 80 });
    expect(modelSize(header)).toBe("tiny");
    const languages = modelLanguages(header);
    expect(languages).toHaveLength(99);
    expect(languages.slice(0, 4)).toEqual(["en", "zh", "de", "es"]);
    expect(languages).toContain("jv");
    expect(languages).not.toContain("jw");
    expect(languages).not.toContain("yue");
  });

  it("knows English-only and large-v3 vocabularies", () => {
    const english = parseModelHeader(headerBytes([51_864, ...TINY.slice(1)])) as WhisperModelHeader;
    expect(modelLanguages(english)).toEqual(["en"]);
    const v3 = parseModelHeader(headerBytes([51_866, 1500, 1280, 20, 32, 448, 1280, 20, 32, 128, 1]));
    expect(modelSize(v3 as WhisperModelHeader)).toBe("large");
    expect(modelLanguages(v3 as WhisperModelHeader)).toHaveLength(100);
    expect(modelLanguages(v3 as WhisperModelHeader).at(-1)).toBe("yue");
  });

  it("says why bytes are not a whisper model", () => {
    expect(parseModelHeader(new Uint8Array(10))).toMatch(/too short/);
    expect(parseModelHeader(headerBytes(TINY, 0x12345678))).toMatch(/bad magic 0x12345678/);
    expect(parseModelHeader(new TextEncoder().encode("GGUF".padEnd(60, "\0")))).toMatch(/GGUF/);
    expect(parseModelHeader(headerBytes([32_000, ...TINY.slice(1)]))).toMatch(/vocabulary size 32000/);
  });

  it("walks a complete model file and reports its tensors, and a truncated one as truncated", async () => {
    const int32s = (...values: number[]) => {
      const bytes = Buffer.alloc(4 * values.length);
      values.forEach((value, i) => bytes.writeInt32LE(value, 4 * i));
      return bytes;
    };
    const tensor = (name: string, type: number, shape: number[], dataBytes: number) =>
      Buffer.concat([
        int32s(shape.length, name.length, type, ...shape),
        Buffer.from(name),
        Buffer.alloc(dataBytes),
      ]);
    const vocab = ["!", "hello", ""].map((token) =>
      Buffer.concat([int32s(token.length), Buffer.from(token)]),
    );
    const model = Buffer.concat([
      Buffer.from(headerBytes(TINY).subarray(0, HEADER_BYTES)),
      int32s(2, 3),
      Buffer.alloc(2 * 3 * 4), // mel filters
      int32s(vocab.length),
      ...vocab,
      tensor("a", 0, [8], 8 * 4), // F32
      tensor("b", 1, [4, 2], 8 * 2), // F16
      tensor("c", 8, [64, 3], 2 * 3 * 34), // Q8_0: 2 blocks of 32 per row
    ]);
    const dir = await mkdtemp(path.join(tmpdir(), "whisper-model-"));
    try {
      const file = path.join(dir, "model.bin");
      await writeFile(file, model);
      expect(await inspectModelFile(file)).toMatchObject({ tensors: 3, bytes: model.length });
      await writeFile(file, model.subarray(0, model.length - 1));
      await expect(inspectModelFile(file)).rejects.toThrow(/ends inside the data of tensor c/);
      await writeFile(file, Buffer.concat([model, tensor("d", 99, [4], 16)]));
      await expect(inspectModelFile(file)).rejects.toThrow(/: tensor 3: unsupported tensor type 99/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("maps whisper's Javanese code to ISO 639-1 and back", () => {
    expect(toIsoLanguage("jw")).toBe("jv");
    expect(toWhisperLanguage("jv")).toBe("jw");
    expect(toIsoLanguage("en")).toBe("en");
    expect(toWhisperLanguage("auto")).toBe("auto");
  });
});

/** A decode whose end the test controls. */
function controllable(log: string[], name: string) {
  let finish!: (value: string) => void;
  let fail!: (error: Error) => void;
  const result = new Promise<string>((resolve, reject) => {
    finish = resolve;
    fail = reject;
  });
  const decode: RunningDecode<string> = {
    result,
    cancel: () => log.push(`cancel ${name}`),
  };
  return { decode, finish: () => finish(name), fail };
}

describe("whisper.cpp decode scheduler", () => {
  it("bounds decodes by the contexts, runs finals first, and hands each decode a free context", async () => {
    const log: string[] = [];
    const scheduler = new DecodeScheduler(["ctx"]);
    const jobs = new Map<string, ReturnType<typeof controllable>>();
    const submit = (name: string, kind: "final" | "partial") =>
      scheduler.schedule({}, kind, (context) => {
        log.push(`start ${name} on ${context}`);
        const job = controllable(log, name);
        jobs.set(name, job);
        return job.decode;
      });

    const a = submit("a-partial", "partial");
    const b = submit("b-partial", "partial");
    const c = submit("c-final", "final");
    expect(scheduler.stats()).toMatchObject({ contexts: 1, busy: 1, queued: 2 });
    jobs.get("a-partial")!.finish();
    expect(await a.result).toBe("a-partial");
    // The final overtook the partial queued before it.
    jobs.get("c-final")!.finish();
    expect(await c.result).toBe("c-final");
    jobs.get("b-partial")!.finish();
    expect(await b.result).toBe("b-partial");
    expect(log).toEqual(["start a-partial on ctx", "start c-final on ctx", "start b-partial on ctx"]);
    expect(scheduler.stats()).toEqual({
      contexts: 1,
      busy: 0,
      queued: 0,
      peakBusy: 1,
      started: { final: 1, partial: 2 },
      stuck: 0,
    });
  });

  it("drops cancelled queued decodes, stops running ones, and survives failures", async () => {
    const log: string[] = [];
    const scheduler = new DecodeScheduler(["x", "y"]);
    const owner = {};
    const running = [controllable(log, "one"), controllable(log, "two")];
    const first = scheduler.schedule(owner, "final", () => running[0]!.decode);
    const second = scheduler.schedule({}, "final", () => running[1]!.decode);
    const queued = scheduler.schedule(owner, "partial", () => {
      throw new Error("must not start");
    });
    expect(scheduler.stats()).toMatchObject({ busy: 2, queued: 1, peakBusy: 2 });

    scheduler.cancelAll(owner);
    await expect(queued.result).rejects.toBeInstanceOf(DecodeCancelledError);
    expect(log).toEqual(["cancel one"]);
    running[0]!.finish();
    await expect(first.result).resolves.toBe("one");
    running[1]!.fail(new Error("native failure"));
    await expect(second.result).rejects.toThrow("native failure");

    const thrown = scheduler.schedule({}, "final", () => {
      throw new Error("bad audio");
    });
    await expect(thrown.result).rejects.toThrow("bad audio");
    await scheduler.whenIdle();
    expect(scheduler.stats()).toMatchObject({ busy: 0, queued: 0, started: { final: 3, partial: 0 } });
  });

  describe("with a decode deadline", () => {
    afterEach(() => {
      vi.useRealTimers();
    });

    it("fails an overrunning decode at once and sets its context aside until the native call returns", async () => {
      vi.useFakeTimers();
      const scheduler = new DecodeScheduler(["a", "b"], { decodeTimeoutMs: 5_000 });
      const log: string[] = [];
      const hung = controllable(log, "hung");
      const quick = controllable([], "quick");
      let hungOn = "";
      const overrun = scheduler.schedule({}, "final", (context) => {
        hungOn = context;
        return hung.decode;
      });
      const failed = expect(overrun.result).rejects.toThrow(
        "whisper.cpp decode did not finish within 5 s; its model copy is set aside until it does",
      );
      await vi.advanceTimersByTimeAsync(5_000);
      await failed;
      expect(scheduler.stats()).toMatchObject({ busy: 0, stuck: 1 });
      // Asked to stop (the native build can), the context back once the call returns.
      expect(log).toEqual(["cancel hung"]);

      // The other context keeps serving; a decode that finishes in time is untouched by its deadline.
      const served = scheduler.schedule({}, "final", (context) => {
        expect(context).not.toBe(hungOn);
        return quick.decode;
      });
      quick.finish();
      await expect(served.result).resolves.toBe("quick");
      await vi.advanceTimersByTimeAsync(10_000);

      // The native call returns at last: its late result is dropped and the context is back.
      hung.finish();
      await vi.advanceTimersByTimeAsync(0);
      expect(scheduler.stats()).toMatchObject({ busy: 0, stuck: 0 });
      expect(await scheduler.close()).toEqual(["a", "b"]); // both free again, so both released
    });

    it("refuses decodes at once while every context is stuck, and never releases a stuck context", async () => {
      vi.useFakeTimers();
      const scheduler = new DecodeScheduler(["only"], { decodeTimeoutMs: 1_000 });
      const hung = controllable([], "hung");
      const first = scheduler.schedule({}, "final", () => hung.decode);
      const queued = scheduler.schedule({}, "partial", () => hung.decode);
      const firstFails = expect(first.result).rejects.toThrow(/did not finish within 1 s/);
      const queuedFails = expect(queued.result).rejects.toThrow(
        "every whisper.cpp model copy (1) is held by a decode that overran its deadline",
      );
      await vi.advanceTimersByTimeAsync(1_000);
      await firstFails;
      await queuedFails;
      await expect(scheduler.schedule({}, "final", () => hung.decode).result).rejects.toThrow(/overran/);
      expect(await scheduler.close()).toEqual([]);
    });
  });

  it("close() rejects queued decodes, waits for running ones, and returns the contexts", async () => {
    const scheduler = new DecodeScheduler(["only"]);
    const job = controllable([], "running");
    const running = scheduler.schedule({}, "final", () => job.decode);
    const waiting = scheduler.schedule({}, "partial", () => job.decode);
    let closed = false;
    const closing = scheduler.close().then((contexts) => {
      closed = true;
      return contexts;
    });
    await expect(waiting.result).rejects.toThrow(/closed/);
    await Promise.resolve();
    expect(closed).toBe(false);
    job.finish();
    await expect(running.result).resolves.toBe("running");
    expect(await closing).toEqual(["only"]);
    await expect(scheduler.schedule({}, "final", () => job.decode).result).rejects.toThrow(/closed/);
  });
});
