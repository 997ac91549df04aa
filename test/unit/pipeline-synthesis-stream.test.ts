import { describe, expect, it } from "vitest";
import { SynthesisStream } from "../../src/pipeline/synthesis-stream.js";

/** A synthesizer double: records each sentence, and can hold a sentence until released. */
function synthesizer(holding?: string) {
  const calls: string[] = [];
  let release = () => {};
  const released = new Promise<void>((resolve) => (release = resolve));
  let called = (_sentence: string) => {};
  const firstCall = new Promise<string>((resolve) => (called = resolve));
  return {
    calls,
    firstCall,
    release,
    synthesize: async function* (sentence: string) {
      calls.push(sentence);
      called(sentence);
      if (sentence === holding) await released;
      if (sentence.includes("boom")) throw new Error("voice lost");
      yield new Float32Array([sentence.length]);
    },
  };
}

async function read(stream: SynthesisStream): Promise<number[]> {
  const frames: number[] = [];
  for await (const frame of stream.frames()) frames.push(frame[0]!);
  return frames;
}

describe("SynthesisStream", () => {
  it("synthesizes the first sentence as soon as it is complete, before the text is flushed", async () => {
    const engine = synthesizer();
    const stream = new SynthesisStream(engine.synthesize);
    const reading = read(stream);
    stream.pushText("Hola a");
    stream.pushText(" todos. Hoy");
    // Not flushed yet: the first sentence is already being synthesized.
    expect(await engine.firstCall).toBe("Hola a todos.");
    expect(engine.calls).toEqual(["Hola a todos."]);
    stream.pushText(" hablamos");
    stream.flush();
    expect(await reading).toEqual(["Hola a todos.".length, "Hoy hablamos".length]);
    expect(engine.calls).toEqual(["Hola a todos.", "Hoy hablamos"]);
  });

  it("speaks sentences one at a time, in order", async () => {
    const engine = synthesizer("Uno.");
    const stream = new SynthesisStream(engine.synthesize);
    const reading = read(stream);
    stream.pushText("Uno. Dos. ");
    await engine.firstCall;
    stream.pushText("Tres.");
    stream.flush();
    // "Dos." waits for "Uno." to be done.
    expect(engine.calls).toEqual(["Uno."]);
    engine.release();
    expect(await reading).toHaveLength(3);
    expect(engine.calls).toEqual(["Uno.", "Dos.", "Tres."]);
  });

  it("cancel drops the text not being spoken yet; the sentence in progress ends normally", async () => {
    const engine = synthesizer("Uno.");
    const stream = new SynthesisStream(engine.synthesize);
    const reading = read(stream);
    stream.pushText("Uno. Dos. Tres");
    await engine.firstCall;
    stream.cancel();
    stream.pushText(" más. ");
    engine.release();
    expect(await reading).toEqual(["Uno.".length]);
    expect(engine.calls).toEqual(["Uno."]);
  });

  it("a failed sentence ends the stream with its error", async () => {
    const engine = synthesizer();
    const stream = new SynthesisStream(engine.synthesize);
    stream.pushText("Uno. boom. Tres.");
    stream.flush();
    await expect(read(stream)).rejects.toThrow("voice lost");
    expect(engine.calls).toEqual(["Uno.", "boom."]);
  });

  it("a line that is flushed without text says nothing", async () => {
    const engine = synthesizer();
    const stream = new SynthesisStream(engine.synthesize);
    stream.flush();
    expect(await read(stream)).toEqual([]);
    expect(engine.calls).toEqual([]);
  });
});
