/**
 * The OpenVoice engine (src/engines/openvoice/) with its real host process over the stand-in models
 * (test/support/stand-in-models/tone-color.ts: the extractor's tone colour holds the speech's
 * spectral centroid in kHz, the converter says a sine at the target's): what it extracts, that a
 * sentence comes back whole in pieces, its bounds (a queue that refuses at once, the longest
 * sentence), cancellation, and the checks at load.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EngineBusyError } from "../../src/core/busy.js";
import type { SynthesizedAudio, ToneColor, ToneColorEngine } from "../../src/core/contracts.js";
import { findToneColorModel } from "../../src/engines/openvoice/catalogue.js";
import { createOpenVoiceEngine, MAX_SECONDS } from "../../src/engines/openvoice/index.js";
import {
  buildToneColorExtractorStandIn,
  standInToneColorKhz,
  writeToneColorStandIn,
} from "../support/stand-in-models/tone-color.js";

const entry = findToneColorModel("tone-color")!;
const RATE = 22_050;
let work: string;
let dir: string;
let engine: ToneColorEngine;

/** Two tones (Hz) mixed: their spectral centroid is between them. */
const tones = (seconds: number, ...hz: number[]): SynthesizedAudio => ({
  samples: Float32Array.from({ length: Math.round(seconds * RATE) }, (_, i) =>
    hz.reduce((sum, f) => sum + 0.2 * Math.sin((2 * Math.PI * f * i) / RATE), 0),
  ),
  sampleRate: RATE,
});

/** The pieces of a conversion: live (refused when busy) unless `mayWait`. */
async function converted(audio: SynthesizedAudio, target: ToneColor, signal?: AbortSignal, mayWait = false) {
  const pieces: Float32Array[] = [];
  for await (const piece of engine.convert(audio, target, { mayWait, ...(signal ? { signal } : {}) }))
    pieces.push(piece.samples);
  return pieces;
}

/** Frequency of a sine by its zero crossings. */
function frequency(samples: Float32Array): number {
  let crossings = 0;
  for (let i = 1; i < samples.length; i++) if (samples[i - 1]! < 0 !== samples[i]! < 0) crossings++;
  return (crossings * RATE) / (2 * samples.length);
}

beforeAll(async () => {
  work = await mkdtemp(path.join(tmpdir(), "relay-openvoice-"));
  dir = path.join(work, "tone-color");
  await writeToneColorStandIn(dir);
  engine = await createOpenVoiceEngine({ entry, dir, threads: 1, maxQueued: 2 });
});

afterAll(async () => {
  await engine?.close();
  if (work) await rm(work, { recursive: true, force: true });
});

describe("the OpenVoice engine in its host", () => {
  it("extracts a tone colour from speech at any rate, and converts a sentence to it in pieces, whole", async () => {
    const reference = tones(4, 300, 900);
    const color = await engine.toneColor(reference);
    expect(color.seconds).toBeCloseTo(4, 2);
    expect(color.vector).toHaveLength(256);
    expect(color.vector[0]).toBeCloseTo(standInToneColorKhz(reference.samples), 2);
    // The same speech at 16 kHz: resampled to the model's rate first.
    const at16k = tones(4, 300, 900);
    const resampled = { samples: at16k.samples.filter((_, i) => i % 2 === 0), sampleRate: RATE / 2 };
    expect((await engine.toneColor(resampled)).vector[0]).toBeCloseTo(color.vector[0]!, 1);

    const sentence = tones(6.3, 200);
    const pieces = await converted(sentence, color);
    expect(pieces.length).toBeGreaterThan(2);
    const whole = Float32Array.from(pieces.flatMap((piece) => [...piece]));
    expect(whole.length).toBe(sentence.samples.length);
    // The first piece is short: the first audio waits for it alone.
    expect(pieces[0]!.length / RATE).toBeLessThan(1.1);
    expect(frequency(whole)).toBeCloseTo(1000 * color.vector[0]!, -1);
  });

  it("refuses at once beyond its queue, and a sentence longer than it takes", async () => {
    const color = await engine.toneColor(tones(3, 400));
    const results = await Promise.allSettled(
      Array.from({ length: 8 }, () => engine.toneColor(tones(3, 400))),
    );
    const refused = results.filter((r) => r.status === "rejected");
    expect(refused.length).toBeGreaterThan(0);
    for (const r of refused) expect((r as PromiseRejectedResult).reason).toBeInstanceOf(EngineBusyError);
    expect(results.filter((r) => r.status === "fulfilled").length).toBeGreaterThan(0);
    await expect(converted(tones(MAX_SECONDS + 1, 200), color)).rejects.toThrow(/at most/);
    // Still serving.
    expect((await converted(tones(1, 200), color)).length).toBeGreaterThan(0);
  });

  it("converts a live sentence only when it is free; a dubbing job's waits its turn", async () => {
    const color = await engine.toneColor(tones(3, 400));
    const [first, second] = [tones(6, 200), tones(2, 200)];
    // A sentence half converted: its next piece is queued before the first is handed out.
    const running = engine.convert(first, color)[Symbol.asyncIterator]();
    let length = (await running.next()).value!.samples.length;
    // Live: refused at once while another sentence converts (its speaker hears the library voice).
    await expect(converted(second, color)).rejects.toBeInstanceOf(EngineBusyError);
    // A job waits for its turn and gets it.
    const waited = converted(second, color, undefined, true);
    for (let piece = await running.next(); !piece.done; piece = await running.next())
      length += piece.value.samples.length;
    expect(length).toBe(first.samples.length);
    expect((await waited).reduce((sum, piece) => sum + piece.length, 0)).toBe(second.samples.length);
    // Free again (once the queue has counted the last pass done): live sentences are converted.
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect((await converted(second, color)).length).toBeGreaterThan(0);
  });

  it("stops a cancelled conversion", async () => {
    const color = await engine.toneColor(tones(3, 400));
    const controller = new AbortController();
    controller.abort(new Error("the session was closed"));
    await expect(converted(tones(5, 200), color, controller.signal)).rejects.toThrow(/closed/);
  });

  it("refuses at load, naming the file, a converter that is not OpenVoice's", async () => {
    const broken = path.join(work, "broken");
    await writeToneColorStandIn(broken);
    // The extractor's graph in the converter's place: it lacks the converter's inputs.
    await writeFile(path.join(broken, entry.files.converter), buildToneColorExtractorStandIn());
    await expect(createOpenVoiceEngine({ entry, dir: broken })).rejects.toThrow(
      /tone_clone_model\.onnx.*(audio|src_tone)/,
    );
  });
});
