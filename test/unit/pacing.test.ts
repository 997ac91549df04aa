import { describe, expect, it } from "vitest";
import type { LanguageCode, Voice } from "../../src/core/contracts.js";
import { BoundedQueue } from "../../src/core/queue.js";
import { OUTPUT_SAMPLE_RATE } from "../../src/pipeline/framer.js";
import type { LineFrame, PipelineEvent, SpokenLine } from "../../src/pipeline/frames.js";
import {
  ListenerClock,
  NATURAL_BACKLOG_S,
  paceOf,
  pauseAfter,
  PHRASE_PAUSE_S,
  SENTENCE_PAUSE_S,
  SilenceTrimmer,
  speedFor,
} from "../../src/pipeline/pacing.js";
import { MAX_PHRASE_WORDS, SynthesisStage } from "../../src/pipeline/stages/synthesis.js";
import { voiceOf } from "../../src/voices/voice-defaults.js";

const PACE = { maxSpeedup: 1.5 };

describe("speedFor", () => {
  it("is natural up to the natural backlog, rises with it, and never passes the maximum", () => {
    expect(speedFor(0, PACE)).toBe(1);
    expect(speedFor(NATURAL_BACKLOG_S, PACE)).toBe(1);
    const speeds = [2, 3, 4, 5, 6, 30, 600].map((backlog) => speedFor(backlog, PACE));
    for (const [i, speed] of speeds.entries())
      if (i > 0) expect(speed).toBeGreaterThanOrEqual(speeds[i - 1]!);
    expect(speeds[0]).toBeGreaterThan(1);
    expect(speeds.at(-1)).toBe(1.5);
    expect(Math.max(...speeds)).toBeLessThanOrEqual(PACE.maxSpeedup);
    expect(speedFor(600, { maxSpeedup: 1.2 })).toBe(1.2);
  });

  it("natural pace and a maximum of 1 mean no pacing", () => {
    expect(paceOf("natural")).toBeUndefined();
    expect(paceOf("catch-up", 1)).toBeUndefined();
    expect(paceOf("catch-up")).toEqual({ maxSpeedup: 1.15 });
    expect(paceOf("catch-up", 1.6)).toEqual({ maxSpeedup: 1.6 });
  });
});

describe("ListenerClock", () => {
  it("plays clips in order from their arrival: the backlog is what is sent and not heard yet", () => {
    const clock = new ListenerClock();
    clock.sent(2, 1_000);
    expect(clock.backlog(1_000)).toBe(2);
    // A second clip arriving while the first plays starts after it.
    clock.sent(1, 1_500);
    expect(clock.backlog(1_500)).toBe(2.5);
    expect(clock.backlog(4_000)).toBe(0);
    // After a gap, a clip starts when it arrives.
    clock.sent(1, 10_000);
    expect(clock.backlog(10_500)).toBe(0.5);
    // Silent for the time since the last clip ended; not while one is heard.
    expect(clock.silentFor(10_500)).toBe(0);
    expect(clock.silentFor(11_250)).toBe(0.25);
  });
});

describe("SilenceTrimmer", () => {
  const rate = 1_000;
  const tone = (n: number) => new Float32Array(n).fill(0.5);
  const quiet = (n: number) => new Float32Array(n);
  const trimmed = (chunks: Float32Array[], pause: number) => {
    const trimmer = new SilenceTrimmer(rate);
    const out = [...chunks.flatMap((chunk) => trimmer.push(chunk)), ...trimmer.end(pause)];
    return { trimmer, out: Float32Array.from(out.flatMap((chunk) => [...chunk])) };
  };

  it("drops the engine's leading and trailing silence, keeps a pause inside, ends with its own pause", () => {
    const { out } = trimmed([quiet(300), tone(100), quiet(50), tone(100), quiet(400)], 0.12);
    expect(out.length).toBe(100 + 50 + 100 + 120);
    expect(out[0]).toBe(0.5);
    expect(out[249]).toBe(0.5);
    expect(out.subarray(250).every((s) => s === 0)).toBe(true);
  });

  it("trims across chunk boundaries, and a piece with no speech at all stays empty", () => {
    expect(trimmed([quiet(10), quiet(10), tone(5), quiet(10), quiet(10)], 0.01).out.length).toBe(5 + 10);
    const silent = trimmed([quiet(100)], 0.3);
    expect(silent.out.length).toBe(0);
    expect(silent.trimmer.spoke).toBe(false);
  });

  it("starts with its lead pause before the first speech, read when that speech arrives", () => {
    let lead = 0.5;
    const trimmer = new SilenceTrimmer(rate, () => lead);
    expect(trimmer.push(quiet(50))).toEqual([]);
    lead = 0.2;
    const out = trimmer.push(Float32Array.from([...quiet(5), ...tone(10)]));
    expect(out.reduce((n, c) => n + c.length, 0)).toBe(200 + 10);
    expect(out[0]!.every((s) => s === 0)).toBe(true);
    expect(trimmer.spoke).toBe(true);
    expect(trimmer.leadSeconds).toBe(0.2);
  });

  it("pauses longer after a sentence than after a phrase, and not at all inside a phrase", () => {
    expect(pauseAfter("el abad")).toBe(0);
    expect(pauseAfter("el abad,")).toBe(PHRASE_PAUSE_S);
    expect(pauseAfter("dijo: «sí»;")).toBe(PHRASE_PAUSE_S);
    expect(pauseAfter("Es la cosa fácil.")).toBe(SENTENCE_PAUSE_S);
    expect(pauseAfter("¿Dónde está?» ")).toBe(SENTENCE_PAUSE_S);
  });
});

/**
 * A TTS double: a line's speech lasts `length / 14 / rate` seconds (the voice's rate, which pacing
 * raises) between 0.2 s of silence on either side, as engines pad their clips.
 */
function speaker() {
  const asked: { text: string; rate: number; language: LanguageCode }[] = [];
  const speak = async function* (text: string, language: LanguageCode, voice: Voice | undefined) {
    const rate = voice!.timbre.rate;
    asked.push({ text, rate, language });
    const pad = new Float32Array(0.2 * OUTPUT_SAMPLE_RATE);
    yield pad;
    yield new Float32Array(Math.round((text.length / 14 / rate) * OUTPUT_SAMPLE_RATE)).fill(0.3);
    yield pad;
  };
  return { asked, speak };
}

const VOICE = voiceOf("male");

function stage(pace: { maxSpeedup: number } | undefined) {
  const { asked, speak } = speaker();
  const events: PipelineEvent[] = [];
  const input = new BoundedQueue<LineFrame>(64);
  const synthesis = new SynthesisStage(
    {
      speak,
      signal: new AbortController().signal,
      emit: (event) => events.push(event),
      reportError: (message) => {
        throw new Error(message);
      },
      pace,
    },
    input,
  );
  const running = synthesis.run();
  let lines = 0;
  /** One line; lines of one utterance share its `segmentId` (by default each is its own). */
  const say = async (
    text: string,
    segmentId = `s${lines}`,
    language: LanguageCode = "es",
    end: "flush" | "cancel" = "flush",
  ) => {
    lines++;
    const line: SpokenLine = { segmentId, language, voice: VOICE, queuedAt: 0 };
    await input.put({ kind: "text", line, text });
    await input.put({ kind: end, line });
  };
  const clips = () => events.filter((e) => e.type === "audio" && e.clipEnd).length;
  const seconds = () =>
    events.reduce((sum, e) => sum + (e.type === "audio" ? e.samples.length / OUTPUT_SAMPLE_RATE : 0), 0);
  return {
    asked,
    events,
    say,
    clips,
    seconds,
    /** Resolves once `n` clips are out. */
    clipsOut: async (n: number) => {
      while (clips() < n) await new Promise((resolve) => setTimeout(resolve, 5));
    },
    finalize: () => input.put({ kind: "finalized", passed: () => events.push({ type: "finalized" }) }),
    end: async () => {
      input.close();
      await running;
    },
  };
}

/** About 3 s of speech: the listener has that much to hear while the next pieces come. */
const LONG = "Esta es la primera frase de la tarde, que dura unos tres segundos";

describe("SynthesisStage speaks in phrases", () => {
  it("holds an utterance's unfinished pieces while the listener is busy and speaks them as one phrase", async () => {
    const synthesis = stage(undefined);
    await synthesis.say(LONG, "u1");
    await synthesis.clipsOut(1);
    for (const piece of ["el abad", "es la cosa", "fácil"]) await synthesis.say(piece, "u1");
    await synthesis.end();
    // Nothing dropped, in order; the three pieces are one engine call, one clip.
    expect(synthesis.asked.map((a) => a.text)).toEqual([LONG, "el abad es la cosa fácil"]);
    expect(synthesis.clips()).toBe(2);
  });

  it(`speaks a phrase once it has ${MAX_PHRASE_WORDS} words, a piece with punctuation at once`, async () => {
    const synthesis = stage(undefined);
    await synthesis.say(LONG, "u1");
    await synthesis.clipsOut(1);
    const words = "uno dos tres cuatro cinco seis siete ocho nueve diez".split(" ");
    for (const word of words) await synthesis.say(word, "u1");
    await synthesis.say("once,", "u1");
    await synthesis.say("doce", "u1");
    await synthesis.end();
    expect(synthesis.asked.map((a) => a.text)).toEqual([
      LONG,
      words.slice(0, MAX_PHRASE_WORDS).join(" "),
      [...words.slice(MAX_PHRASE_WORDS), "once,"].join(" "),
      "doce",
    ]);
  });

  it("a listener with nothing left to hear gets each piece at once", async () => {
    const synthesis = stage(undefined);
    for (const [i, piece] of ["Son", "el abad"].entries()) {
      await synthesis.say(piece, "u1");
      // Spoken before the next piece comes, though it ends no phrase.
      await synthesis.clipsOut(i + 1);
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    await synthesis.end();
    expect(synthesis.asked.map((a) => a.text)).toEqual(["Son", "el abad"]);
  });

  it("speaks a held phrase when the listener's audio runs down, with no later piece to wait for", async () => {
    const synthesis = stage(undefined);
    await synthesis.say("Una frase corta de un segundo", "u1");
    await synthesis.clipsOut(1);
    await synthesis.say("y luego", "u1");
    // The input stays open: the held phrase goes out on its own as the listener's audio runs down.
    await synthesis.clipsOut(2);
    expect(synthesis.asked.map((a) => a.text)).toEqual(["Una frase corta de un segundo", "y luego"]);
    await synthesis.end();
  });

  it("never joins utterances, and a finalize speaks the held phrase before `finalized`", async () => {
    const synthesis = stage(undefined);
    await synthesis.say(LONG, "u1");
    await synthesis.clipsOut(1);
    await synthesis.say("y luego", "u1");
    await synthesis.say("Otra cosa", "u2");
    await synthesis.say("y más", "u2");
    await synthesis.finalize();
    await synthesis.end();
    // "y luego" is spoken alone when the next utterance comes; "Otra cosa y más" when the finalize does.
    expect(synthesis.asked.map((a) => a.text)).toEqual([LONG, "y luego", "Otra cosa y más"]);
    expect(synthesis.events.at(-1)?.type).toBe("finalized");
    expect(synthesis.clips()).toBe(3);
  });

  it("a line cancelled after its text still speaks the phrase held for it, not its own text", async () => {
    const synthesis = stage(undefined);
    await synthesis.say(LONG, "u1");
    await synthesis.clipsOut(1);
    await synthesis.say("el abad", "u1");
    await synthesis.say("es la", "u1", "es", "cancel");
    await synthesis.end();
    expect(synthesis.asked.map((a) => a.text)).toEqual([LONG, "el abad"]);
  });
});

const LINES = Array.from(
  { length: 20 },
  (_, i) => `Esta es la frase número ${i + 1}, que dura unos tres segundos`,
);

describe("SynthesisStage keeps pace with its listener", () => {
  it("a listener falling behind gets faster speech, up to the maximum, and hears every line sooner", async () => {
    const paced = stage(PACE);
    for (const text of LINES) await paced.say(text);
    await paced.end();
    const natural = stage(undefined);
    for (const text of LINES) await natural.say(text);
    await natural.end();

    // Nothing is dropped: every line spoken, in order, one clip each.
    expect(paced.asked.map((a) => a.text)).toEqual(LINES);
    expect(paced.clips()).toBe(LINES.length);
    const rates = paced.asked.map((a) => a.rate / VOICE.timbre.rate);
    expect(Math.max(...rates)).toBeCloseTo(1.5);
    expect(rates.every((rate) => rate >= 1 && rate <= 1.5 + 1e-9)).toBe(true);
    // Twenty 3 s lines at once: the second half is spoken at the full speed-up.
    expect(rates.slice(10).every((rate) => Math.abs(rate - 1.5) < 1e-9)).toBe(true);
    // Without pacing every line is natural; with it, the whole turn is heard in about 1/1.5 the time.
    expect(natural.asked.every((a) => a.rate === VOICE.timbre.rate)).toBe(true);
    expect(natural.clips()).toBe(LINES.length);
    expect(paced.seconds()).toBeLessThan(natural.seconds() * 0.8);
  });

  it("a listener who is not behind gets natural speech", async () => {
    const paced = stage(PACE);
    for (const [i, text] of ["Hola.", "Buenos días.", "Gracias."].entries()) {
      await paced.say(text);
      await paced.clipsOut(i + 1);
      // Each line is heard before the next one comes (well under a second of speech each).
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
    await paced.end();
    expect(paced.asked.map((a) => a.rate)).toEqual([1, 1, 1].map(() => VOICE.timbre.rate));
  });

  it("paces each language's listener on its own: the one behind speeds up, the other stays natural", async () => {
    const paced = stage(PACE);
    // A room's fan-out: Spanish lines pile up while French gets two short ones (under 1 s in all).
    for (const [i, text] of LINES.entries()) {
      await paced.say(text, `es${i}`, "es");
      if (i % 7 === 6) await paced.say("Oui.", `fr${i}`, "fr");
    }
    await paced.end();
    const rates = (language: string) =>
      paced.asked.filter((a) => a.language === language).map((a) => a.rate / VOICE.timbre.rate);
    expect(rates("fr")).toEqual([1, 1]);
    expect(Math.max(...rates("es"))).toBeCloseTo(1.5);
  });

  it("joins an utterance's pieces without the engine's silence, pausing where punctuation says", async () => {
    const paced = stage(undefined);
    const pieces = ["Son", "el abad,", "la cosa fácil.", "Y"];
    for (const piece of pieces) await paced.say(piece, "u1");
    // The next utterance, queued while the listener still hears this one.
    await paced.say("Otra", "u2");
    await paced.end();
    const speech = (text: string) => Math.round((text.length / 14) * OUTPUT_SAMPLE_RATE) / OUTPUT_SAMPLE_RATE;
    // 0.2 s of engine silence on both sides of each piece is gone: no pause inside a phrase, a phrase
    // pause after the comma, a sentence pause after the full stop and between the utterances, and
    // none after the last piece.
    expect(paced.clips()).toBe(pieces.length + 1);
    expect(paced.seconds()).toBeCloseTo(
      [...pieces, "Otra"].reduce((sum, piece) => sum + speech(piece), 0) +
        PHRASE_PAUSE_S +
        SENTENCE_PAUSE_S +
        SENTENCE_PAUSE_S,
      3,
    );
    const last = paced.events.filter((e) => e.type === "audio").at(-1)!;
    expect(last.type === "audio" && last.samples.at(-1)).toBeCloseTo(0.3);
  });
});
