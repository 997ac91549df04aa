import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readWavAsPcm16 } from "../../src/audio/wav.js";
import { RealtimeSocket, type ServerMessage } from "../../src/cli/recording-socket.js";
import { sharedMissing, sharedPath } from "../support/shared.js";
import { startServer, type TestServer } from "../support/server.js";
import { finalizeAndWait, openSession } from "../support/session-socket.js";

/** Real speech through the real server and the real embedded engines (Silero, PocketSphinx, Apertium, eSpeak NG). */
const SPEECH_MISSING = sharedMissing("data/speech/librivox-pocketsphinx");
let server: TestServer;
let goForward: Int16Array;
let austen: Int16Array;

beforeAll(async () => {
  server = await startServer({ MAX_SESSIONS: "16" });
  if (SPEECH_MISSING) return;
  goForward = await readWavAsPcm16(sharedPath("data/speech/librivox-pocketsphinx/goforward.wav"));
  austen = await readWavAsPcm16(
    sharedPath("data/speech/librivox-pocketsphinx/sense_and_sensibility_01_austen_64kb-0870.wav"),
  );
});
afterAll(async () => {
  await server?.close();
});

const open = (params: Record<string, string> = {}): Promise<RealtimeSocket> =>
  openSession(server.baseUrl, params);

const isFinal = (type: string) => (m: ServerMessage) => m.type === type && m.is_final === true;
const of = (socket: RealtimeSocket, type: string) => socket.messages.filter((m) => m.type === type);
const finalsOf = (socket: RealtimeSocket, type: string) =>
  of(socket, type).filter((m) => m.is_final === true);

/** Streams, finalizes and waits until the translated final for the last segment and its speech have arrived. */
async function speakAndFinalize(
  socket: RealtimeSocket,
  pcm: Int16Array,
  options = { speed: 4 },
): Promise<void> {
  await socket.stream(pcm, { chunkMs: 20, speed: options.speed });
  await finalizeAndWait(socket);
}

describe.skipIf(SPEECH_MISSING)("speech-to-speech session", () => {
  it("streams interim and final transcripts, translations and float32 24 kHz speech with every spec field", async () => {
    const socket = await open({ sourceLanguage: "en-US", targetLanguage: "es" });
    await speakAndFinalize(socket, goForward);

    const ready = socket.messages[0]!;
    expect(ready).toEqual({ type: "ready", session_id: expect.any(String), worker_id: expect.any(String) });

    const originals = of(socket, "original_transcript");
    expect(originals.some((m) => m.is_final === false)).toBe(true);
    const finalOriginal = finalsOf(socket, "original_transcript").at(-1)!;
    expect(finalOriginal).toEqual({
      type: "original_transcript",
      text: "go forward ten meters",
      correlation_id: expect.any(String),
      is_final: true,
      source_language: "en",
      target_language: "es",
      detected_language: "en",
      timestamp: expect.any(Number),
    });
    expect(Math.abs((finalOriginal.timestamp as number) - Date.now() / 1000)).toBeLessThan(60);

    const finalTranslation = finalsOf(socket, "translated_transcript").at(-1)!;
    expect(finalTranslation).toEqual({
      type: "translated_transcript",
      text: expect.stringMatching(/diez metros/i),
      translated_text: finalTranslation.text,
      original_text: "go forward ten meters",
      correlation_id: finalOriginal.correlation_id,
      is_final: true,
      source_language: "en",
      target_language: "es",
      detected_language: "en",
      timestamp: expect.any(Number),
    });

    const frames = socket.audioFrames;
    expect(frames.length).toBeGreaterThan(5);
    expect(frames.slice(0, -1).every((f) => f.length <= 1920)).toBe(true);
    expect(frames.filter((f) => f.length === 1920).length).toBeGreaterThan(frames.length / 2);
    const samples = frames.flatMap((f) => Array.from(f));
    expect(samples.every((s) => Number.isFinite(s) && Math.abs(s) <= 1)).toBe(true);
    const rms = Math.sqrt(samples.reduce((sum, s) => sum + s * s, 0) / samples.length);
    expect(rms).toBeGreaterThan(0.01);
    expect(samples.length / 24_000).toBeGreaterThan(0.8); // "va de frente diez metros" takes about a second or more

    // The finalize is answered last: after the final, its translation and every frame of its speech.
    const { received } = socket;
    const finalized = received.findIndex((r) => r.message?.type === "finalized");
    expect(received[finalized]!.message).toEqual({ type: "finalized", timestamp: expect.any(Number) });
    expect(finalized).toBe(received.length - 1);
    expect(received.findLastIndex((r) => r.audio !== undefined)).toBeLessThan(finalized);
    expect(received.findIndex((r) => r.message === finalTranslation)).toBeLessThan(finalized);
    socket.close();
  });

  it("stable mode: several finals per segment, each a prefix extension of the previous, never revised", async () => {
    const socket = await open({ finalizeMode: "stable", audioOutputEnabled: "false" });
    await speakAndFinalize(socket, austen, { speed: 2 });
    const finals = finalsOf(socket, "original_transcript");
    const segments = new Map<string, string[]>();
    for (const m of finals)
      segments.set(m.correlation_id as string, [
        ...(segments.get(m.correlation_id as string) ?? []),
        m.text as string,
      ]);
    expect([...segments.values()].some((texts) => texts.length > 1)).toBe(true);
    for (const texts of segments.values()) {
      for (let i = 1; i < texts.length; i++) expect(texts[i]!.startsWith(texts[i - 1]!)).toBe(true);
    }
    const translatedFinals = finalsOf(socket, "translated_transcript");
    for (const id of segments.keys()) {
      const texts = translatedFinals.filter((m) => m.correlation_id === id).map((m) => m.text as string);
      for (let i = 1; i < texts.length; i++) expect(texts[i]!.startsWith(texts[i - 1]!)).toBe(true);
    }
    // no interim of a segment arrives after that segment's last final
    for (const [id] of segments) {
      const lastFinal = socket.messages.findLastIndex(
        (m) => m.correlation_id === id && m.type === "original_transcript" && m.is_final,
      );
      expect(
        socket.messages
          .slice(lastFinal + 1)
          .some((m) => m.correlation_id === id && m.type === "original_transcript" && !m.is_final),
      ).toBe(false);
    }
    expect(socket.audioFrames).toHaveLength(0);
    socket.close();
  });

  it("stable mode: no final repeats the one before it, and each translation keeps the case of the words already shown", async () => {
    for (const pcm of [goForward, austen]) {
      const socket = await open({ finalizeMode: "stable", audioOutputEnabled: "false" });
      await speakAndFinalize(socket, pcm, { speed: 2 });
      const segments = new Set(of(socket, "original_transcript").map((m) => m.correlation_id));
      expect(segments.size).toBeGreaterThan(0);
      for (const id of segments) {
        for (const type of ["original_transcript", "translated_transcript"]) {
          const texts = finalsOf(socket, type)
            .filter((m) => m.correlation_id === id)
            .map((m) => m.text as string);
          for (let i = 1; i < texts.length; i++) expect(texts[i]).not.toBe(texts[i - 1]);
        }
        // interim and final translations alike: a word shown again at its place has the same case
        const translations = of(socket, "translated_transcript")
          .filter((m) => m.correlation_id === id)
          .map((m) => m.text as string);
        for (let i = 1; i < translations.length; i++) {
          const before = translations[i - 1]!.split(" ");
          translations[i]!.split(" ").forEach((word, k) => {
            if (before[k]?.toLowerCase() === word.toLowerCase())
              expect(word, `${translations[i - 1]} → ${translations[i]}`).toBe(before[k]);
          });
        }
      }
      socket.close();
    }
  });

  it("sentence mode: one final per segment (PocketSphinx has no punctuation, so the utterance is the sentence)", async () => {
    const socket = await open({ finalizeMode: "sentence", audioOutputEnabled: "false" });
    await speakAndFinalize(socket, goForward);
    const finals = finalsOf(socket, "original_transcript");
    expect(finals.map((m) => m.text)).toEqual(["go forward ten meters"]);
    expect(of(socket, "original_transcript").some((m) => m.is_final === false)).toBe(true);
    socket.close();
  });

  it("finalize keeps the session open; the next audio starts a new correlation_id", async () => {
    const socket = await open({ audioOutputEnabled: "false" });
    await speakAndFinalize(socket, goForward);
    const first = finalsOf(socket, "original_transcript").at(-1)!.correlation_id;
    expect(socket.isOpen).toBe(true);
    const before = socket.messages.length;
    await socket.stream(goForward, { speed: 4 });
    await finalizeAndWait(socket);
    expect(socket.messages.slice(before).some(isFinal("original_transcript"))).toBe(true);
    const second = finalsOf(socket, "original_transcript").at(-1)!;
    expect(second.text).toBe("go forward ten meters");
    expect(second.correlation_id).not.toBe(first);
    socket.close();
  });

  it("trailing silence ends a segment without finalize", async () => {
    const socket = await open({ audioOutputEnabled: "false" });
    const withSilence = new Int16Array(goForward.length + 16_000);
    withSilence.set(goForward);
    await socket.stream(withSilence, { speed: 4 });
    const final = await socket.waitFor(
      (m) => isFinal("translated_transcript")(m) && m.original_text === "go forward ten meters",
    );
    expect(final.text).toMatch(/diez metros/i);
    socket.close();
  });

  it("about 300 ms of PCM16 zeros after speech, then nothing (no finalize), ends the segment", async () => {
    const socket = await open({ audioOutputEnabled: "false" });
    // goforward.wav's speech ends at 2.27 s; the room noise after it is cut, so only the zeros are silence
    const speech = goForward.subarray(0, Math.round(2.27 * 16_000));
    const withZeros = new Int16Array(speech.length + 300 * 16);
    withZeros.set(speech);
    await socket.stream(withZeros, { speed: 4 });
    const final = await socket.waitFor(
      (m) => isFinal("translated_transcript")(m) && m.original_text === "go forward ten meters",
    );
    expect(final.text).toMatch(/diez metros/i);
    expect(finalsOf(socket, "original_transcript").at(-1)!.text).toBe("go forward ten meters");
    socket.close();
  });

  it("relay-2 adds start_ms/end_ms positions in the session audio; relay-1 omits them", async () => {
    const relay2 = await open({ modelName: "relay-2", audioOutputEnabled: "false" });
    const lead = new Int16Array(16_000); // one second of silence first
    await relay2.stream(lead, { speed: 8 });
    await speakAndFinalize(relay2, goForward);
    const transcripts = relay2.messages.filter((m) => m.type.endsWith("_transcript"));
    expect(transcripts.length).toBeGreaterThan(0);
    const totalMs = ((lead.length + goForward.length) / 16_000) * 1000;
    for (const m of transcripts) {
      expect(Number.isInteger(m.start_ms) && Number.isInteger(m.end_ms)).toBe(true);
      expect(m.start_ms as number).toBeGreaterThanOrEqual(900); // speech starts after the second of silence (less pre-roll)
      expect(m.end_ms as number).toBeGreaterThan(m.start_ms as number);
      expect(m.end_ms as number).toBeLessThanOrEqual(totalMs + 50);
      expect(m.speaker).toBe("1"); // one voice: speaker 1 from the first word
    }
    relay2.close();

    const relay1 = await open({ audioOutputEnabled: "false" });
    await speakAndFinalize(relay1, goForward);
    for (const m of relay1.messages.filter((m) => m.type.endsWith("_transcript"))) {
      expect(m).not.toHaveProperty("start_ms");
      expect(m).not.toHaveProperty("speaker");
    }
    relay1.close();
  });

  it("translates through the Spanish pivot (en→fr) and passes through when source and target match", async () => {
    const french = await open({ targetLanguage: "fr", audioOutputEnabled: "false" });
    await speakAndFinalize(french, goForward);
    const fr = finalsOf(french, "translated_transcript").at(-1)!;
    expect(fr.text).toMatch(/dix m[eè]tres/i);
    french.close();

    const same = await open({ targetLanguage: "en" });
    await speakAndFinalize(same, goForward);
    expect(finalsOf(same, "translated_transcript").at(-1)!.text).toBe("go forward ten meters");
    expect(same.audioFrames.length).toBeGreaterThan(0);
    same.close();
  });

  it("update_metadata applies context live, refuses other keys by name and validates values", async () => {
    const socket = await open({ audioOutputEnabled: "false" });
    socket.send({ type: "update_metadata", metadata: { context: "Robotics lab, distances in meters" } });
    expect(await socket.waitFor((m) => m.type === "metadata_ack")).toEqual({
      type: "metadata_ack",
      applied: { context: true },
    });

    socket.send({ type: "update_metadata", metadata: { context: "", targetLanguage: "fr", voiceId: "3" } });
    await expect.poll(() => of(socket, "metadata_ack").length).toBe(2);
    expect(of(socket, "metadata_ack")[1]).toEqual({ type: "metadata_ack", applied: { context: true } });
    const refusal = await socket.waitFor((m) => m.type === "error");
    expect(refusal.error).toMatch(/targetLanguage, voiceId/);

    socket.send({ type: "update_metadata", metadata: { context: "x".repeat(2001) } });
    await expect.poll(() => of(socket, "error").length).toBe(2);
    expect(of(socket, "error")[1]!.error).toMatch(/2001 characters.*2000/);

    // the session still works after all of that
    await speakAndFinalize(socket, goForward);
    expect(finalsOf(socket, "original_transcript").at(-1)!.text).toBe("go forward ten meters");
    socket.close();
  });

  it("several concurrent sessions are isolated from each other", async () => {
    const targets = ["es", "fr", "pt", "it"];
    const sockets = await Promise.all(
      targets.map((targetLanguage) => open({ targetLanguage, audioOutputEnabled: "false" })),
    );
    await Promise.all(sockets.map((socket) => speakAndFinalize(socket, goForward, { speed: 1 })));
    sockets.forEach((socket, i) => {
      expect(finalsOf(socket, "original_transcript").at(-1)!.text).toBe("go forward ten meters");
      const translation = finalsOf(socket, "translated_transcript").at(-1)!;
      expect(translation.target_language).toBe(targets[i]);
      expect((translation.text as string).length).toBeGreaterThan(5);
      socket.close();
    });
    const texts = sockets.map((s) => finalsOf(s, "translated_transcript").at(-1)!.text);
    expect(new Set(texts).size).toBe(4);
  });
});

describe("session-start rejections: ready, then an error frame, then close 1000", () => {
  const cases: [string, Record<string, string>, RegExp][] = [
    ["unknown modelName", { modelName: "relay-9" }, /modelName="relay-9".*relay-1, relay-2/],
    ["unknown voiceId", { voiceId: "999" }, /voiceId "999" does not exist/],
    ["non-numeric voiceId", { voiceId: "bob" }, /voiceId "bob" does not exist/],
    ["voiceId=auto on relay-1", { voiceId: "auto" }, /voiceId=auto needs modelName=relay-2/],
    [
      "sourceLanguage=auto on relay-1",
      { sourceLanguage: "auto" },
      /sourceLanguage=auto needs modelName=relay-2/,
    ],
    [
      "auto with twoWay",
      { sourceLanguage: "auto", twoWay: "true", modelName: "relay-2" },
      /cannot be combined with twoWay/,
    ],
    [
      "tts without audio",
      { mode: "tts", audioOutputEnabled: "false" },
      /mode=tts needs audioOutputEnabled=true/,
    ],
    ["clone voices in tts mode", { mode: "tts", voiceType: "clone" }, /voiceType=clone .*mode=tts has none/],
    ["unknown voiceType", { voiceType: "robot" }, /voiceType="robot".*male, female, clone/],
    [
      "target without voice output",
      { targetLanguage: "xh" },
      /targetLanguage="xh" has no voice output.*available for: .*es/,
    ],
    [
      "unrecognizable source",
      { sourceLanguage: "de" },
      /sourceLanguage="de" cannot be recognized.*available for: en/,
    ],
    [
      "untranslatable pair",
      { targetLanguage: "ja", audioOutputEnabled: "false" },
      /no translation from "en" to "ja".*targets are: .*es/,
    ],
    [
      "context over 2000 characters",
      { context: "y".repeat(2001) },
      /context is 2001 characters long; the limit is 2000/,
    ],
    ["invalid boolean", { audioOutputEnabled: "maybe" }, /audioOutputEnabled="maybe" is not a boolean/],
    ["invalid finalizeMode", { finalizeMode: "eager" }, /finalizeMode="eager".*stable, sentence/],
    ["invalid language code", { targetLanguage: "español" }, /not a language code/],
    [
      "relay-2 auto language without a language-identifying recognizer",
      { sourceLanguage: "auto", modelName: "relay-2" },
      /sourceLanguage=auto needs a recognizer that identifies languages/,
    ],
    [
      "invalid languageHints",
      { sourceLanguage: "auto", modelName: "relay-2", languageHints: "en,english" },
      /languageHints="english" is not a language code/,
    ],
    [
      "auto voice in a tts session (no speakers to match)",
      { voiceId: "auto", modelName: "relay-2", mode: "tts" },
      /voiceId=auto matches voices to speakers, and mode=tts has none/,
    ],
    [
      "two-way with one language twice",
      { twoWay: "true", sourceLanguage: "en-US", targetLanguage: "en" },
      /twoWay=true needs two different languages.*"en"/,
    ],
    [
      "two-way without a language-identifying recognizer",
      { twoWay: "true", sourceLanguage: "en", targetLanguage: "es" },
      /twoWay=true \(telling the two languages apart\) needs a recognizer that identifies languages/,
    ],
  ];
  it.each(cases)("%s", async (_name, params, pattern) => {
    const socket = await open(params);
    expect(await socket.closed()).toBe(1000);
    expect(socket.messages.map((m) => m.type)).toEqual(["ready", "error"]);
    expect(socket.messages[1]!.error).toMatch(pattern);
    expect(socket.messages[1]!.timestamp).toEqual(expect.any(Number));
  });
});
