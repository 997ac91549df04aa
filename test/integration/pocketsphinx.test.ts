import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readWavAsPcm16 } from "../../src/audio/wav.js";
import {
  createPocketSphinxEngine,
  DEFAULT_MODEL_DIR,
  type PocketSphinxEngine,
} from "../../src/engines/pocketsphinx/index.js";
import type { AsrStream, Hypothesis } from "../../src/core/contracts.js";
import { FULL_RECORDINGS } from "../support/recordings.js";
import { sharedMissing, sharedPath } from "../support/shared.js";
import { wordEdits } from "../../src/engines/kit/models/check-metrics.js";

const CLIPS = "librivox-pocketsphinx";
const SPEECH_MISSING = sharedMissing("data", "speech", CLIPS);
const SAMPLE_RATE = 16_000;
const CHUNK_20MS = 320;

const clip = (name: string): Promise<Int16Array> => readWavAsPcm16(sharedPath("data", "speech", CLIPS, name));

/** Reference transcripts: `<s> words </s> (clip-id)` per line. */
function transcripts(): { id: string; text: string }[] {
  const lines = readFileSync(sharedPath("data", "speech", CLIPS, "transcription"), "utf8")
    .trim()
    .split("\n");
  return lines.map((line) => {
    const match = /^<s> (.*) <\/s> \((.+)\)$/.exec(line.trim());
    if (!match) throw new Error(`unexpected transcript line: ${line}`);
    return { text: match[1]!, id: match[2]! };
  });
}

// Spoken-form normalization as WER scoring usually applies: the recognizer's dictionary spells "mr".
const NORMALISE: Readonly<Record<string, string>> = { mr: "mister", mrs: "missus" };
const words = (text: string): string[] =>
  text
    .toLowerCase()
    .split(/\s+/)
    .filter(Boolean)
    .map((w) => NORMALISE[w] ?? w);

/** Word errors of a hypothesis against its reference, and the reference's length. */
function scoreOf(reference: string, hypothesis: string): { errors: number; words: number } {
  const ref = words(reference);
  return { errors: wordEdits(ref, words(hypothesis)), words: ref.length };
}

async function writeAll(stream: AsrStream, pcm: Int16Array, chunk: number): Promise<void> {
  for (let i = 0; i < pcm.length; i += chunk) await stream.write(pcm.subarray(i, i + chunk));
}

async function decode(engine: PocketSphinxEngine, pcm: Int16Array, chunk = CHUNK_20MS): Promise<Hypothesis> {
  const stream = await engine.createStream({ language: "en" });
  await writeAll(stream, pcm, chunk);
  return stream.finish();
}

function expectTimingsValid(hypothesis: Hypothesis, samples: number): void {
  const durationMs = (samples * 1000) / SAMPLE_RATE;
  let previousEnd = 0;
  for (const word of hypothesis.words) {
    expect(word.startMs).toBeGreaterThanOrEqual(previousEnd);
    expect(word.endMs).toBeGreaterThan(word.startMs);
    expect(word.endMs).toBeLessThanOrEqual(durationMs);
    previousEnd = word.endMs;
  }
  expect(hypothesis.words.map((w) => w.word).join(" ")).toBe(hypothesis.text);
}

/** Lets queued callbacks and worker-thread completions run. */
const turns = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 20));

describe.skipIf(SPEECH_MISSING)("PocketSphinx engine (maxDecoders 2)", () => {
  let engine: PocketSphinxEngine;
  let goforward: Int16Array;

  beforeAll(async () => {
    engine = await createPocketSphinxEngine({ maxDecoders: 2 });
    goforward = await clip("goforward.wav");
  });

  afterAll(async () => {
    await engine.close();
  });

  it("declares its capabilities and the library and model versions", () => {
    expect(engine.capabilities).toEqual({
      languages: ["en"],
      sampleRate: 16_000,
      partialResults: true,
      wordTimings: true,
      punctuation: false,
    });
    expect(engine.info.id).toBe("pocketsphinx");
    expect(engine.info.version).toMatch(/5prealpha/);
    expect(engine.info.version).toMatch(/en-us$/);
    // The first decoder is created eagerly and parked.
    expect(engine.stats()).toMatchObject({ total: 1, idle: 1, leased: 0, max: 2 });
  });

  it("recognizes goforward.wav streamed in 20 ms chunks, with growing partials and word timings", async () => {
    const stream = await engine.createStream({ language: "en", context: "ignored by PocketSphinx" });
    const partials: Hypothesis[] = [];
    for (let i = 0; i < goforward.length; i += CHUNK_20MS) {
      await stream.write(goforward.subarray(i, i + CHUNK_20MS));
      // Every 200 ms, as a session would poll.
      if ((i / CHUNK_20MS) % 10 === 9) partials.push(await stream.partial());
    }
    const final = await stream.finish();

    expect(final.text).toBe("go forward ten meters");
    expect(final.words.map((w) => w.word)).toEqual(["go", "forward", "ten", "meters"]);
    expectTimingsValid(final, goforward.length);
    // "go" starts after the leading silence (~0.46 s), "meters" ends before the trailing one.
    expect(final.words[0]!.startMs).toBeGreaterThan(200);
    expect(final.words.at(-1)!.endMs).toBeLessThan((goforward.length * 1000) / SAMPLE_RATE - 200);

    const heard = partials.filter((p) => p.text !== "");
    expect(heard.length).toBeGreaterThanOrEqual(3);
    expect(new Set(heard.map((p) => p.text)).size).toBeGreaterThanOrEqual(2);
    expect(heard[0]!.words.length).toBeLessThan(heard.at(-1)!.words.length);
    expect(heard.at(-1)!.text.startsWith("go forward")).toBe(true);
    for (const partial of heard) {
      expect(partial.words.length).toBeGreaterThan(0);
      expectTimingsValid(partial, goforward.length);
      expect(partial.text).not.toMatch(/<|\[|\(\d\)/);
    }
  });

  // The decoder's own silence removal numbered the words' frames seconds late after a pause (both
  // copies here, the second clamped to the end): a cut at a change of speaker then lost words.
  it("times the words of an utterance with a pause inside it where they are in the audio", async () => {
    const pause = SAMPLE_RATE;
    const pcm = new Int16Array(2 * goforward.length + pause);
    pcm.set(goforward);
    pcm.set(goforward, goforward.length + pause);
    const final = await decode(engine, pcm);
    expect(final.text).toBe("go forward ten meters go forward ten meters");
    expectTimingsValid(final, pcm.length);
    const copyMs = (goforward.length * 1000) / SAMPLE_RATE;
    const secondAtMs = ((goforward.length + pause) * 1000) / SAMPLE_RATE;
    for (const word of final.words.slice(0, 4)) expect(word.endMs).toBeLessThan(copyMs);
    for (const word of final.words.slice(4)) expect(word.startMs).toBeGreaterThan(secondAtMs);
    // each copy's words lie as far into it as the first copy's do into the clip
    final.words.slice(4).forEach((word, i) => {
      expect(Math.abs(word.startMs - secondAtMs - final.words[i]!.startMs)).toBeLessThanOrEqual(100);
    });
  });

  it("gives the same result for chunks of 1 and 7 samples, any size between, and 3 seconds", async () => {
    const reference = await decode(engine, goforward);
    // 1-, 7-, 13- and 333-sample chunks in turn: every odd size and alignment against the decoder's
    // frames, in 600 writes rather than the 50,000 of 1-sample chunks throughout.
    const ragged = await engine.createStream({ language: "en" });
    const sizes = [1, 7, 13, 333];
    for (let at = 0, k = 0; at < goforward.length; k++) {
      const size = sizes[k % sizes.length]!;
      await ragged.write(goforward.subarray(at, at + size));
      at += size;
    }
    const results = [await ragged.finish(), await decode(engine, goforward, 3 * SAMPLE_RATE)];
    // RELAY_TEST_FULL=1: also 1-sample and 7-sample chunks throughout (docs/testing.md, "Trimmed files").
    if (FULL_RECORDINGS) for (const chunk of [1, 7]) results.push(await decode(engine, goforward, chunk));
    for (const result of results) {
      expect(result.text).toBe("go forward ten meters");
      expect(result).toEqual(reference);
    }
  });

  it("transcribes the LibriVox clips with a word error rate below 0.35", async () => {
    let errors = 0;
    let total = 0;
    for (const { id, text } of transcripts()) {
      const pcm = await clip(`${id}.wav`);
      const result = await decode(engine, pcm);
      expectTimingsValid(result, pcm.length);
      const score = scoreOf(text, result.text);
      expect(score.errors / score.words, `${id}: "${result.text}"`).toBeLessThan(0.8);
      errors += score.errors;
      total += score.words;
    }
    expect(total).toBeGreaterThan(50);
    expect(errors / total).toBeLessThan(0.35);
    // ~24 s of speech decoded at roughly half real time; generous for a loaded CI machine.
  });

  it("decodes two concurrent streams exactly as it decodes them one at a time", async () => {
    const other = await clip("sense_and_sensibility_01_austen_64kb-0880.wav");
    const alone = [await decode(engine, goforward), await decode(engine, other)];

    const streams = await Promise.all([
      engine.createStream({ language: "en" }),
      engine.createStream({ language: "en" }),
    ]);
    expect(engine.stats()).toMatchObject({ total: 2, leased: 2, waiting: 0 });
    const inputs = [goforward, other];
    const longest = Math.max(...inputs.map((pcm) => pcm.length));
    for (let i = 0; i < longest; i += CHUNK_20MS) {
      // Both decoders work at the same time on worker threads.
      await Promise.all(
        streams.map((stream, k) =>
          i < inputs[k]!.length ? stream.write(inputs[k]!.subarray(i, i + CHUNK_20MS)) : undefined,
        ),
      );
    }
    const together = await Promise.all(streams.map((stream) => stream.finish()));

    expect(together[0]!.text).toBe("go forward ten meters");
    expect(together).toEqual(alone);
    expect(engine.stats()).toMatchObject({ total: 2, idle: 2, leased: 0 });
  });

  it("rejects overlapping calls and calls after finish", async () => {
    const stream = await engine.createStream({ language: "en" });
    const write = stream.write(goforward.subarray(0, SAMPLE_RATE));
    await expect(stream.partial()).rejects.toThrow(/pending/);
    await expect(stream.write(goforward.subarray(0, 10))).rejects.toThrow(/pending/);
    await write;
    await stream.partial();
    const final = await stream.finish();
    expect(final.text).toMatch(/^go\b/);
    await expect(stream.write(goforward.subarray(0, 10))).rejects.toThrow(/after finish/);
    await expect(stream.finish()).rejects.toThrow(/after finish/);
  });

  it("returns an empty hypothesis for an utterance without audio", async () => {
    const stream = await engine.createStream({ language: "en" });
    expect(await stream.partial()).toEqual({ text: "", words: [] });
    await stream.write(new Int16Array(0));
    expect(await stream.finish()).toEqual({ text: "", words: [] });
  });

  it("rejects languages it does not declare", async () => {
    await expect(engine.createStream({ language: "es" })).rejects.toThrow(/language "es"/);
  });
});

describe.skipIf(SPEECH_MISSING)("PocketSphinx engine (maxDecoders 1)", () => {
  let engine: PocketSphinxEngine;
  let goforward: Int16Array;

  beforeAll(async () => {
    engine = await createPocketSphinxEngine({ maxDecoders: 1 });
    goforward = await clip("goforward.wav");
  });

  afterAll(async () => {
    await engine.close();
  });

  it("makes further streams wait, in order, until the decoder is free", async () => {
    const order: string[] = [];
    const first = await engine.createStream({ language: "en" });
    const second = engine.createStream({ language: "en" }).then((s) => (order.push("second"), s));
    const third = engine.createStream({ language: "en" }).then((s) => (order.push("third"), s));

    await writeAll(first, goforward, CHUNK_20MS);
    await turns();
    expect(order).toEqual([]);
    expect(engine.stats()).toMatchObject({ total: 1, leased: 1, waiting: 2 });

    expect((await first.finish()).text).toBe("go forward ten meters");
    const secondStream = await second;
    await turns();
    expect(order).toEqual(["second"]);
    expect(engine.stats()).toMatchObject({ total: 1, leased: 1, waiting: 1 });

    await writeAll(secondStream, goforward, CHUNK_20MS);
    expect((await secondStream.finish()).text).toBe("go forward ten meters");
    const thirdStream = await third;
    expect(order).toEqual(["second", "third"]);
    thirdStream.abort();
  });

  it("abort() releases the decoder, also while a write is in flight", async () => {
    const aborted = await engine.createStream({ language: "en" });
    await aborted.write(goforward.subarray(0, SAMPLE_RATE));
    const inFlight = aborted.write(goforward.subarray(SAMPLE_RATE));
    aborted.abort();
    aborted.abort();
    await expect(inFlight).resolves.toBeUndefined();
    await expect(aborted.partial()).rejects.toThrow(/after abort/);
    await expect(aborted.finish()).rejects.toThrow(/after abort/);

    // The only decoder comes back clean: the next utterance is recognized as if it were the first.
    const next = await engine.createStream({ language: "en" });
    await writeAll(next, goforward, CHUNK_20MS);
    expect((await next.finish()).text).toBe("go forward ten meters");

    const idle = await engine.createStream({ language: "en" });
    idle.abort();
    expect((await decode(engine, goforward)).text).toBe("go forward ten meters");
    expect(engine.stats()).toMatchObject({ total: 1, idle: 1, leased: 0, waiting: 0 });
  });
});

describe("PocketSphinx engine lifecycle and errors", () => {
  it.skipIf(SPEECH_MISSING)(
    "close() aborts open streams, rejects waiting and later calls, and frees the decoders",
    async () => {
      const engine = await createPocketSphinxEngine({ maxDecoders: 1 });
      const goforward = await clip("goforward.wav");
      const open = await engine.createStream({ language: "en" });
      const pendingWrite = open.write(goforward);
      const waiting = expect(engine.createStream({ language: "en" })).rejects.toThrow(/closed/);

      await engine.close();
      await waiting;
      await expect(pendingWrite).resolves.toBeUndefined();
      await expect(open.finish()).rejects.toThrow(/after abort/);
      await expect(engine.createStream({ language: "en" })).rejects.toThrow(/closed/);
      expect(engine.stats()).toMatchObject({ total: 0, idle: 0, leased: 0 });
      await engine.close();
    },
  );

  it("names the missing model file and the Debian package that provides it", async () => {
    await expect(createPocketSphinxEngine({ modelDir: "/nonexistent/pocketsphinx/en-us" })).rejects.toThrow(
      /acoustic model directory missing: \/nonexistent\/pocketsphinx\/en-us\/en-us .*pocketsphinx-en-us/,
    );
    await expect(
      createPocketSphinxEngine({ languageModel: `${DEFAULT_MODEL_DIR}/missing.lm.bin` }),
    ).rejects.toThrow(/language model missing: .*missing\.lm\.bin .*pocketsphinx-en-us/);
  });

  it("rejects a pool size that is not a positive integer", async () => {
    await expect(createPocketSphinxEngine({ maxDecoders: 0 })).rejects.toThrow(/maxDecoders/);
  });
});
