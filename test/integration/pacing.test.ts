import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readWavAsPcm16 } from "../../src/audio/wav.js";
import type { RealtimeSocket } from "../../src/cli/recording-socket.js";
import { sharedMissing, sharedPath } from "../support/shared.js";
import { startServer, type TestServer } from "../support/server.js";
import { finalizeAndWait, openSession } from "../support/session-socket.js";
import { speechBySpeed } from "../support/speech-metrics.js";

/**
 * Pace (docs/realtime-api.md, "Pace") on the real server with the real embedded engines (Silero,
 * PocketSphinx, Apertium, eSpeak NG): a turn of LJSpeech read English sent far faster than real time,
 * so its Spanish is ready long before a listener could have heard it — a listener falling behind.
 * With the default pace its speech gets faster, up to the session's maximum; with `pace=natural` it
 * never does; either way every translated word is spoken.
 */
const SPEECH_MISSING = sharedMissing("data/speech/ljspeech");
const CLIPS = ["LJ001-0001", "LJ001-0002", "LJ001-0003"];
const OUTPUT_RATE = 24_000;
let server: TestServer;
let turn: Int16Array;

beforeAll(async () => {
  server = await startServer();
  if (SPEECH_MISSING) return;
  const clips = await Promise.all(
    CLIPS.map((name) => readWavAsPcm16(sharedPath(`data/speech/ljspeech/wavs/${name}.wav`), 16_000)),
  );
  turn = new Int16Array(clips.reduce((sum, clip) => sum + clip.length, 0));
  let at = 0;
  for (const clip of clips) {
    turn.set(clip, at);
    at += clip.length;
  }
});
afterAll(async () => {
  await server?.close();
});

interface Turn {
  /** Seconds of speech sent at each speed during the turn (the metric's growth). */
  readonly bySpeed: Map<number, number>;
  /** Seconds of audio the client received. */
  readonly audioSeconds: number;
  /** Characters of the translated finals (the text meant to be spoken). */
  readonly characters: number;
  readonly translation: string;
}

/** The whole turn at 10× real time, then finalize: everything it says is out. */
async function speak(params: Record<string, string>): Promise<Turn> {
  const before = await speechBySpeed(server.baseUrl);
  const socket: RealtimeSocket = await openSession(server.baseUrl, {
    sourceLanguage: "en",
    targetLanguage: "es",
    ...params,
  });
  try {
    await socket.stream(turn, { chunkMs: 20, speed: 10 });
    await finalizeAndWait(socket);
  } finally {
    socket.close();
  }
  const after = await speechBySpeed(server.baseUrl);
  const bySpeed = new Map(
    [...after]
      .map(([speed, seconds]): [number, number] => [speed, seconds - (before.get(speed) ?? 0)])
      .filter(([, seconds]) => seconds > 1e-6),
  );
  // Finals of a segment extend the one before: the last of each segment is its whole translation.
  const segments = new Map<string, string>();
  for (const m of socket.messages)
    if (m.type === "translated_transcript" && m.is_final === true)
      segments.set(String(m.correlation_id), String(m.text));
  const translation = [...segments.values()].join(" ");
  return {
    bySpeed,
    audioSeconds: socket.audioFrames.reduce((sum, frame) => sum + frame.length, 0) / OUTPUT_RATE,
    characters: translation.replace(/\s/gu, "").length,
    translation,
  };
}

describe.skipIf(SPEECH_MISSING)("pace: translated speech keeps up with the speaker", () => {
  let natural: Turn;
  let paced: Turn;

  it("pace=natural: every sentence at the voice's natural rate", async () => {
    natural = await speak({ pace: "natural" });
    expect(natural.characters).toBeGreaterThan(100);
    expect([...natural.bySpeed.keys()]).toEqual([1]);
  });

  it("by default a listener falling behind hears faster speech, never above maxSpeedup, and every word of it", async () => {
    paced = await speak({ maxSpeedup: "1.4" });
    console.log(
      `natural: ${natural.audioSeconds.toFixed(2)} s for ${natural.characters} characters; ` +
        `catch-up: ${paced.audioSeconds.toFixed(2)} s for ${paced.characters}, by speed ` +
        JSON.stringify(Object.fromEntries(paced.bySpeed)),
    );
    const speeds = [...paced.bySpeed.keys()];
    expect(Math.max(...speeds)).toBeGreaterThan(1);
    expect(Math.max(...speeds)).toBeLessThanOrEqual(1.4);
    // The turn is heard in less time for its text, yet no more than 1.4× less: nothing is left out.
    const perCharacter = (t: Turn) => t.audioSeconds / t.characters;
    expect(perCharacter(paced)).toBeLessThan(perCharacter(natural) * 0.95);
    expect(perCharacter(paced)).toBeGreaterThan((perCharacter(natural) / 1.4) * 0.9);
  });

  it("refuses a maxSpeedup or pace it does not know, at session start", async () => {
    for (const [params, message] of [
      [{ maxSpeedup: "2" }, 'maxSpeedup="2" is not valid; use a number from 1 to 1.6'],
      [{ maxSpeedup: "fast" }, 'maxSpeedup="fast" is not valid; use a number from 1 to 1.6'],
      [{ pace: "slow" }, 'pace="slow" is not valid; use one of: catch-up, natural'],
    ] as const) {
      const socket = await openSession(server.baseUrl, params, { isReady: (m) => m.type === "error" });
      expect(socket.messages.find((m) => m.type === "error")).toMatchObject({ error: message });
      socket.close();
    }
  });
});
