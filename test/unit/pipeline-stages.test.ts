import { describe, expect, it, vi } from "vitest";
import type { AsrEngine, RecognitionOptions, RecognitionStream } from "../../src/core/contracts.js";
import type { SpeechFrame } from "../../src/pipeline/frames.js";
import { DEFAULT_SEGMENTER_OPTIONS } from "../../src/pipeline/segmenter.js";
import { AudioIntake } from "../../src/pipeline/stages/audio-intake.js";
import {
  TranslationPipeline,
  type PipelineEvent,
  type PipelineOptions,
} from "../../src/pipeline/translation-pipeline.js";
import { energyVad } from "../support/vad-double.js";
import {
  collect,
  helloAsr,
  pipelineWith as harnessPipeline,
  silence,
  speech,
} from "../support/pipeline-harness.js";

/**
 * The pipeline's stages end to end with engine doubles (as in translation-pipeline.test.ts):
 * speech streaming into synthesis, control frames (flush, cancel) crossing the links, and a
 * recognizer that pushes its own results.
 */

const pipelineWith = (overrides: Partial<PipelineOptions>): TranslationPipeline =>
  harnessPipeline({ asr: helloAsr, translate: async ({ text }) => text, ...overrides });

/** A speak double recording what it was asked to say; `said(text)` resolves once it was asked. */
function voice() {
  const spoken: string[] = [];
  const waiting = new Map<string, () => void>();
  return {
    spoken,
    said: (text: string) => new Promise<void>((resolve) => waiting.set(text, resolve)),
    speak: async function* (text: string) {
      spoken.push(text);
      waiting.get(text)?.();
      yield new Float32Array(480).fill(0.1);
      yield new Float32Array(480).fill(0.2);
    },
  };
}

describe("pipeline stages (engine doubles)", () => {
  it("a streamed translation speaks its first sentence before the translation ends, as one clip", async () => {
    const { spoken, speak } = voice();
    let heard = () => {};
    const firstAudio = new Promise<void>((resolve) => (heard = resolve));
    const pipeline = pipelineWith({
      speak,
      translateStream: async function* () {
        yield "Uno dos.";
        yield "Uno dos. Tres";
        // The translation goes on only once the client has heard its first sentence.
        await firstAudio;
        yield "Uno dos. Tres cuatro.";
      },
    });
    pipeline.pushAudio(speech(600));
    const ending = pipeline.end();
    const events: PipelineEvent[] = [];
    for await (const event of pipeline.events) {
      events.push(event);
      if (event.type === "audio") heard();
    }
    await ending;
    expect(spoken).toEqual(["Uno dos.", "Tres cuatro."]);
    const final = events.find((e) => e.type === "translated" && e.isFinal)!;
    expect(final).toMatchObject({ text: "Uno dos. Tres cuatro." });
    const audio = events.filter((e) => e.type === "audio");
    // One clip: its frames (both sentences, the second after its pause) end with one clipEnd.
    expect(audio.map((e) => e.clipEnd)).toEqual([...audio.slice(1).map(() => false), true]);
    expect(events.indexOf(audio[0]!)).toBeLessThan(events.indexOf(final));
  });

  it("a translation failing part-way cancels the rest of its line: only what was spoken stays", async () => {
    const { spoken, said, speak } = voice();
    const firstSpoken = said("Uno.");
    const pipeline = pipelineWith({
      speak,
      translateStream: async function* () {
        yield "Uno. Dos";
        await firstSpoken;
        throw new Error("engine down");
      },
    });
    pipeline.pushAudio(speech(600));
    const ending = pipeline.end();
    const events = await collect(pipeline);
    await ending;
    expect(spoken).toEqual(["Uno."]);
    const audio = events.filter((e) => e.type === "audio");
    expect(audio.map((e) => e.clipEnd)).toEqual([...audio.slice(1).map(() => false), true]);
    expect(events.filter((e) => e.type === "error")).toEqual([
      expect.objectContaining({ message: "translation failed: engine down", fatal: false }),
    ]);
    expect(events.find((e) => e.type === "translated" && e.isFinal)).toMatchObject({ text: "" });
  });

  it("close cancels across the links: queued lines are not spoken, the stream in flight is aborted", async () => {
    const { spoken, said, speak } = voice();
    const firstSpoken = said("Uno.");
    let aborted = false;
    const pipeline = pipelineWith({
      speak,
      translateStream: async function* (_call, signal) {
        yield "Uno. Dos";
        await firstSpoken;
        if (!signal.aborted)
          await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
        aborted = true;
        throw new Error("cancelled");
      },
    });
    const events = collect(pipeline);
    pipeline.pushAudio(speech(600));
    pipeline.finalize();
    await firstSpoken;
    await pipeline.close();
    const delivered = await events;
    expect(aborted).toBe(true);
    expect(spoken).toEqual(["Uno."]);
    expect(delivered.filter((e) => e.type === "error")).toEqual([]);
    expect(delivered.some((e) => e.type === "translated" && e.isFinal)).toBe(false);
  });

  it("a recognizer that pushes its results: its partials are interims, its endpoint ends the utterance", async () => {
    const opened: RecognitionOptions[] = [];
    let polled = false;
    const pushingAsr: AsrEngine = {
      ...helloAsr,
      createStream: async () => {
        polled = true;
        return helloAsr.createStream({ language: "en" });
      },
      async openRecognition(options): Promise<RecognitionStream> {
        opened.push(options);
        let written = 0;
        const words = ["go", "forward", "now"];
        return {
          write: async (pcm) => {
            written += pcm.length;
            const heard = Math.min(words.length, Math.floor(written / 4000));
            options.onEvent({
              type: "partial",
              hypothesis: { text: words.slice(0, heard).join(" "), words: [] },
              audioMs: written / 16,
            });
            // It hears the end of the utterance itself, while the audio goes on.
            if (heard === words.length) options.onEvent({ type: "endpoint" });
          },
          finish: async () => ({ text: words.join(" "), words: [] }),
          abort: () => {},
        };
      },
    };
    const pipeline = pipelineWith({ asr: pushingAsr });
    // Speech without a pause (the VAD hears no end before the input ends) for 1.2 s; the
    // recognizer hears the end of its three words at 0.75 s.
    pipeline.pushAudio(speech(1200));
    const ending = pipeline.end();
    const events = await collect(pipeline);
    await ending;
    expect(polled).toBe(false);
    expect(events.some((e) => e.type === "original" && !e.isFinal)).toBe(true);
    const originals = events.filter(
      (e): e is Extract<PipelineEvent, { type: "original" }> => e.type === "original" && e.isFinal,
    );
    // The endpoint closed the first utterance where it was heard; the speech after it is a second one.
    const closed = originals.find((e) => e.text === "go forward now")!;
    expect(closed.endMs).toBeLessThan(1000);
    expect(new Set(originals.map((e) => e.segmentId)).size).toBe(2);
    expect(opened).toHaveLength(2);
  });

  describe("audio intake: control frames behind the audio", () => {
    const intakeWith = (dropped: number[] = [], maxBacklogMs = 1000) =>
      new AudioIntake({
        vad: energyVad,
        segmenter: DEFAULT_SEGMENTER_OPTIONS,
        preRollMs: 300,
        maxBacklogMs,
        finalizeWaitMs: 5,
        onDropped: (seconds) => void dropped.push(seconds),
      });
    const run = async (intake: AudioIntake) => {
      const frames: SpeechFrame[] = [];
      await intake.run(async (frame) => void frames.push(frame));
      return frames;
    };

    it("a flush comes after the audio queued before it, carrying the part of a window not yet full", async () => {
      const intake = intakeWith();
      intake.push(speech(100)); // 1600 samples: three 512-sample windows and 64 samples over
      intake.end();
      const frames = await run(intake);
      expect(frames.map((frame) => frame.kind)).toEqual(["speech-start", "speech", "speech", "flush"]);
      expect(frames.at(-1)).toMatchObject({ kind: "flush", reason: "end" });
      expect((frames.at(-1) as { tail: Int16Array }).tail).toHaveLength(64);
      expect(intake.processedSamples).toBe(1600);
    });

    it("audio that stops in trailing silence ends the utterance without moving the VAD's windows", async () => {
      // The same audio, sent at once and with a pause in delivery inside the trailing silence (a
      // client or server held up): the pause lets the silence flush end the first utterance, and
      // the second utterance is cut into the same windows either way (its recognition depends on it).
      const first = [speech(900), silence(210)]; // the silence ends 224 samples into a window
      const rest = [silence(400), speech(600)];
      const continuous = intakeWith([], 5000);
      for (const pcm of [...first, ...rest]) continuous.push(pcm);
      continuous.end();
      const paused = intakeWith([], 5000);
      for (const pcm of first) paused.push(pcm);
      const frames: SpeechFrame[] = [];
      const running = paused.run(async (frame) => void frames.push(frame));
      await vi.waitFor(() => expect(frames.at(-1)).toMatchObject({ kind: "flush", reason: "silence" }));
      for (const pcm of rest) paused.push(pcm);
      paused.end();
      await running;
      const secondUtterance = (all: SpeechFrame[]) =>
        all.slice(all.findLastIndex((frame) => frame.kind === "speech-start"));
      const reference = secondUtterance(await run(continuous));
      expect(reference[0]).toMatchObject({ kind: "speech-start", startSample: 45 * 512 });
      expect(secondUtterance(frames)).toEqual(reference);
      expect(paused.processedSamples).toBe(continuous.processedSamples);
    });

    it("speech resuming in the silence that a pause in delivery ended opens a new utterance there", async () => {
      const intake = intakeWith([], 5000);
      intake.push(speech(900));
      intake.push(silence(210));
      const frames: SpeechFrame[] = [];
      const running = intake.run(async (frame) => void frames.push(frame));
      await vi.waitFor(() => expect(frames.at(-1)).toMatchObject({ kind: "flush", reason: "silence" }));
      const flushedAt = frames.length;
      intake.push(silence(100)); // 310 ms of silence in all: short of the 500 ms that end an utterance
      intake.push(speech(300));
      intake.end();
      await running;
      const after = frames.slice(flushedAt);
      // The windows since the flush lead in: 34, the one it came in, and the 100 ms after.
      const start = after[0] as Extract<SpeechFrame, { kind: "speech-start" }>;
      expect(start.kind).toBe("speech-start");
      expect(start.preRoll.map((window) => window.startSample)).toEqual([34, 35, 36].map((i) => i * 512));
      expect(after.slice(1).every((frame) => frame.kind === "speech" || frame === after.at(-1))).toBe(true);
      expect(after.at(-1)).toMatchObject({ kind: "flush", reason: "end" });
      expect(intake.processedSamples).toBe((900 + 210 + 100 + 300) * 16);
    });

    it("cancel drops the audio still queued; nothing is taken after it", async () => {
      const dropped: number[] = [];
      const intake = intakeWith(dropped);
      intake.push(speech(600));
      intake.push(speech(600)); // past the 1 s bound: dropped
      intake.cancel();
      intake.push(speech(100)); // after cancel: ignored
      expect(await run(intake)).toEqual([]);
      expect(dropped).toEqual([0.6]);
      expect(intake.receivedSamples).toBe(1200 * 16);
    });
  });
});
