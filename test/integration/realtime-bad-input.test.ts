import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readWavAsPcm16 } from "../../src/audio/wav.js";
import { createSession, RealtimeSocket } from "../../src/cli/recording-socket.js";
import { startOpenAiServer } from "../support/openai-server.js";
import { sharedMissing, sharedPath } from "../support/shared.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";
import { finalizeAndWait, openSession } from "../support/session-socket.js";

/** Whatever a client sends, the process survives and other sessions are unaffected. */
const SPEECH_MISSING = sharedMissing("data/speech/librivox-pocketsphinx");
let server: TestServer;
let goForward: Int16Array;

beforeAll(async () => {
  server = await startServer();
  if (!SPEECH_MISSING)
    goForward = await readWavAsPcm16(sharedPath("data/speech/librivox-pocketsphinx/goforward.wav"));
});
afterAll(async () => {
  await server?.close();
});

const open = (params: Record<string, string> = { audioOutputEnabled: "false" }): Promise<RealtimeSocket> =>
  openSession(server.baseUrl, params);

const errors = (socket: RealtimeSocket) => socket.messages.filter((m) => m.type === "error");

/**
 * The segment's final original text once it reads `expected` (stable mode may commit it in parts,
 * the last part later on a busy machine), or the last one seen when it never does.
 */
async function finalOriginal(socket: RealtimeSocket, expected = "go forward ten meters"): Promise<string> {
  const finals = () => socket.messages.filter((m) => m.type === "original_transcript" && m.is_final);
  await socket
    .waitFor((m) => m.type === "original_transcript" && m.is_final === true && m.text === expected)
    .catch(() => undefined);
  return finals().at(-1)?.text as string;
}

async function expectServerHealthy(): Promise<void> {
  const socket = await open();
  await socket.stream(goForward, { speed: 8 });
  socket.finalize();
  expect(await finalOriginal(socket)).toBe("go forward ten meters");
  socket.close();
}

describe.skipIf(SPEECH_MISSING)("malformed input on the session socket", () => {
  it("odd-length audio frames: one clear error, the odd byte carried over, recognition intact", async () => {
    const socket = await open();
    const bytes = Buffer.from(goForward.buffer, goForward.byteOffset, goForward.byteLength);
    for (let offset = 0; offset < bytes.length; offset += 321)
      socket.sendRaw(bytes.subarray(offset, offset + 321), true);
    socket.finalize();
    expect(await finalOriginal(socket)).toBe("go forward ten meters");
    expect(errors(socket)).toHaveLength(1);
    expect(errors(socket)[0]!.error).toMatch(/321 bytes is not a whole number of PCM16 samples/);
    socket.close();
  });

  it("any frame size works: 1-sample and 1-second frames give the same transcript", async () => {
    for (const samples of [1, 16_000]) {
      const socket = await open();
      for (let offset = 0; offset < goForward.length; offset += samples) {
        socket.sendAudio(goForward.subarray(offset, offset + samples));
      }
      socket.finalize();
      expect(await finalOriginal(socket)).toBe("go forward ten meters");
      expect(errors(socket)).toHaveLength(0);
      socket.close();
    }
  });

  it("frames over 64 KiB close the socket with 1009; the server carries on", async () => {
    const binary = await open();
    binary.sendRaw(Buffer.alloc(64 * 1024 + 2), true);
    expect(await binary.closed()).toBe(1009);
    const text = await open();
    text.sendRaw(
      JSON.stringify({ type: "update_metadata", metadata: { context: "z".repeat(70_000) } }),
      false,
    );
    expect(await text.closed()).toBe(1009);
    await expectServerHealthy();
  });

  it("invalid UTF-8, malformed JSON and wrong types get error frames; the socket stays open", async () => {
    const socket = await open();
    const cases: [Buffer | string, RegExp][] = [
      [Buffer.from([0x7b, 0xff, 0xfe, 0x7d]), /not valid UTF-8/],
      ["{not json", /malformed JSON/],
      ["[1,2,3]", /must be a JSON object with a string "type"/],
      ["42", /must be a JSON object/],
      ['{"type": 5}', /string "type"/],
      ['{"type":"update_metadata","metadata":[1]}', /needs "metadata": an object/],
      ['{"type":"update_metadata"}', /needs "metadata": an object/],
      ['{"type":"update_metadata","metadata":{"context":5}}', /context must be a string/],
      ['{"type":"speak","text":"hello"}', /speak is only accepted in mode=tts/],
    ];
    for (const [payload, pattern] of cases) {
      const before = errors(socket).length;
      socket.sendRaw(payload, false);
      await expect.poll(() => errors(socket).length).toBe(before + 1);
      expect(errors(socket).at(-1)!.error).toMatch(pattern);
    }
    // unknown types are ignored: the next reply is the ack of the following message
    const before = socket.messages.length;
    socket.send({ type: "dance", steps: 3 });
    socket.send({ type: "update_metadata", metadata: { context: "ok" } });
    await socket.waitFor((m) => socket.messages.indexOf(m) >= before && m.type === "metadata_ack");
    expect(socket.messages.slice(before).map((m) => m.type)).toEqual(["metadata_ack"]);
    expect(socket.isOpen).toBe(true);
    socket.close();
  });

  it("a flood of finalize messages coalesces and the session keeps working", async () => {
    const socket = await open();
    const half = Math.floor(goForward.length / 2);
    socket.sendAudio(goForward.subarray(0, half));
    for (let i = 0; i < 2000; i++) socket.finalize();
    socket.sendAudio(goForward.subarray(half));
    await finalizeAndWait(socket);
    expect(errors(socket)).toHaveLength(0);
    const finals = socket.messages.filter((m) => m.type === "original_transcript" && m.is_final);
    expect(new Set(finals.map((m) => m.correlation_id)).size).toBeLessThanOrEqual(2);
    expect(finals.map((m) => m.text).join(" ")).toMatch(/go|forward|ten|meters/);
    socket.close();
    await expectServerHealthy();
  });

  it("audio sent before ready arrives is processed, not lost", async () => {
    const session = await createSession(server.baseUrl, API_KEY, { audioOutputEnabled: "false" });
    const socket = await RealtimeSocket.connect(session.ws_url);
    await socket.stream(goForward, { chunkMs: 40, speed: Infinity }); // no wait for ready
    socket.finalize();
    expect(await finalOriginal(socket)).toBe("go forward ten meters");
    expect(socket.messages[0]!.type).toBe("ready");
    socket.close();
  });

  it("a slow reader gets speech frames dropped, never unbounded buffering; transcripts and ends all arrive", async () => {
    const text = "This sentence is long enough to produce a few seconds of synthetic speech for the test.";
    const reference = await open({ mode: "tts", targetLanguage: "en" });
    reference.send({ type: "speak", text });
    await reference.waitFor((m) => m.type === "speech_end");
    const framesPerLine = reference.audioFrames.length;
    reference.close();

    const socket = await open({ mode: "tts", targetLanguage: "en" });
    socket.pause();
    const lines = 60;
    const dropped = server.app.sessions.droppedAudioFrames;
    for (let i = 0; i < lines; i++) socket.send({ type: "speak", text });
    // The server renders while the client reads nothing, until its queue to the client is full.
    await expect
      .poll(() => server.app.sessions.droppedAudioFrames, { interval: 100 })
      .toBeGreaterThan(dropped);
    socket.resume();
    await expect.poll(() => socket.messages.filter((m) => m.type === "speech_end").length).toBe(lines);
    expect(socket.audioFrames.length).toBeLessThan(framesPerLine * lines);
    expect(socket.audioFrames.length).toBeGreaterThan(0);
    socket.close();
  });

  it("a misbehaving session does not disturb a concurrent good one", async () => {
    const good = await open();
    const bad = await open();
    const streaming = good.stream(goForward, { speed: 1 });
    for (let i = 0; i < 200; i++) {
      bad.sendRaw(Buffer.from([0xc3, 0x28]), false);
      bad.sendRaw("{oops", false);
      bad.sendRaw(Buffer.alloc(3), true);
    }
    bad.sendRaw(Buffer.alloc(70_000), true);
    await streaming;
    good.finalize();
    expect(await finalOriginal(good)).toBe("go forward ten meters");
    expect(errors(good)).toHaveLength(0);
    expect(await bad.closed()).toBe(1009);
    good.close();
  });
});

describe.skipIf(SPEECH_MISSING)("engine failure inside a session", () => {
  it("closes the session with 4500 after an error frame; other processes' sessions are not involved", async () => {
    const broken = await startServer({}, { ownEngines: true });
    try {
      await broken.registry.recognizer("en")!.close(); // the recognizer dies under the service
      const socket = await RealtimeSocket.connect((await createSession(broken.baseUrl, API_KEY)).ws_url);
      await socket.waitFor((m) => m.type === "ready");
      await socket.stream(goForward, { speed: 8 });
      expect(await socket.closed()).toBe(4500);
      expect(socket.messages.find((m) => m.type === "error")!.error).toMatch(/speech recognition failed/);
    } finally {
      await broken.close();
    }
    await expectServerHealthy();
  });

  it("a translation that fails is an error frame naming its segment, then a translated final without it; the original transcript's finals still arrive", async () => {
    // the only translator is a remote server (a stand-in speaking its protocol) that answers 500
    const remote = await startOpenAiServer();
    remote.script("chat", ...Array.from({ length: 50 }, () => ({ status: 500, message: "model crashed" })));
    const dir = await mkdtemp(path.join(tmpdir(), "failing-mt-"));
    const enginesFile = path.join(dir, "engines.json");
    await writeFile(
      enginesFile,
      JSON.stringify({
        asr: [{ engine: "pocketsphinx" }],
        mt: [
          { engine: "openai", baseUrl: remote.baseUrl, model: "llm", languages: ["en", "es"], maxRetries: 0 },
        ],
        tts: [{ engine: "espeak-ng" }],
      }),
    );
    const failing = await startServer({ ENGINES_FILE: enginesFile });
    try {
      const session = await createSession(failing.baseUrl, API_KEY, { audioOutputEnabled: "false" });
      const socket = await RealtimeSocket.connect(session.ws_url);
      await socket.waitFor((m) => m.type === "ready");
      await socket.stream(goForward, { speed: 8 });
      socket.finalize();
      const final = await socket.waitFor(
        (m) => m.type === "original_transcript" && m.is_final === true && m.text === "go forward ten meters",
      );
      // the final line's own translation fails too, after its original
      await expect
        .poll(() => socket.messages.findLastIndex((m) => m.type === "error"))
        .toBeGreaterThan(socket.messages.indexOf(final));
      // every original final still gets its translated final (nothing translated: empty), after its error
      const translated = await socket.waitFor(
        (m) => m.type === "translated_transcript" && m.is_final === true && m.original_text === final.text,
        20_000,
      );
      expect(translated).toMatchObject({
        correlation_id: final.correlation_id,
        text: "",
        translated_text: "",
      });
      expect(socket.messages[socket.messages.indexOf(translated) - 1]).toMatchObject({ type: "error" });
      await finalizeAndWait(socket);
      const originals = socket.messages.filter((m) => m.type === "original_transcript" && m.is_final);
      const translations = socket.messages.filter((m) => m.type === "translated_transcript" && m.is_final);
      expect(translations.map((m) => [m.correlation_id, m.original_text, m.text])).toEqual(
        originals.map((m) => [m.correlation_id, m.text, ""]),
      );
      for (const error of errors(socket)) {
        expect(error).toEqual({
          type: "error",
          error: expect.stringMatching(/^translation failed: .*(HTTP 500: model crashed|circuit)/),
          correlation_id: final.correlation_id,
          timestamp: expect.any(Number),
        });
      }
      expect(socket.isOpen).toBe(true);
      socket.close();
    } finally {
      await failing.close();
      await remote.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
