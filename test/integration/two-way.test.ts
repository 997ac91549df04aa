import {
  replyTaggedWithLanguage,
  serviceOnStandIn,
  type StandInService,
} from "../support/stand-in-engines.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readWavAsPcm16 } from "../../src/audio/wav.js";
import { RealtimeSocket, type ServerMessage } from "../../src/cli/recording-socket.js";
import { medianPitch } from "../support/audio-measures.js";
import { TONE_HZ, type OpenAiTestServer } from "../support/openai-server.js";
import type { TestServer } from "../support/server.js";
import { sharedMissing, sharedPath } from "../support/shared.js";
import { finalizeAndWait, openSession } from "../support/session-socket.js";

/**
 * twoWay=true through the real server over HTTP and WebSocket, with a stand-in OpenAI-compatible
 * server as the recognizer (it identifies the language each utterance is scripted to be in) and
 * translator, and speech from two synthesizers: the stand-in's for Spanish, eSpeak NG for English.
 */
const SPEECH_MISSING = sharedMissing("data/speech/librivox-pocketsphinx");
let remote: OpenAiTestServer;
let server: TestServer;
let service: StandInService;
let goForward: Int16Array;
let austen: Int16Array;

const systemLineOf = (request: { json?: Record<string, unknown> }) =>
  (request.json!["messages"] as { content: string }[])[0]!.content.split("\n")[0];

beforeAll(async () => {
  if (SPEECH_MISSING) return;
  service = await serviceOnStandIn("two-way", (entry) => ({
    // ja is recognized but not translated; it is neither; de is not spoken.
    asr: [entry("whisper-large", ["en", "es", "de", "fr", "ja"])],
    mt: [entry("llm", ["en", "es", "de", "fr"])],
    tts: [
      entry("tts-1", ["es"], { voices: { female: ["nova"], male: ["onyx", "echo"] } }),
      { engine: "espeak-ng", languages: ["en"] },
    ],
  }));
  ({ remote, server } = service);
  goForward = await readWavAsPcm16(sharedPath("data/speech/librivox-pocketsphinx/goforward.wav"));
  austen = await readWavAsPcm16(
    sharedPath("data/speech/librivox-pocketsphinx/sense_and_sensibility_01_austen_64kb-0880.wav"),
  );
});
afterAll(async () => {
  await service?.close();
});

const open = (params: Record<string, string> = {}): Promise<RealtimeSocket> =>
  openSession(server.baseUrl, params);

const finalsOf = (socket: RealtimeSocket, type: string) =>
  socket.messages.filter((m: ServerMessage) => m.type === type && m.is_final === true);

/** Streams one utterance, finalizes, and waits for `finalized`: its translated final and speech are in. */
async function speak(socket: RealtimeSocket, pcm: Int16Array): Promise<void> {
  const before = finalsOf(socket, "translated_transcript").length;
  await socket.stream(pcm, { chunkMs: 20, speed: 2 });
  await finalizeAndWait(socket);
  expect(finalsOf(socket, "translated_transcript")).toHaveLength(before + 1);
}

describe.skipIf(SPEECH_MISSING)("two-way sessions (twoWay=true)", () => {
  it("translates each side into the other and speaks it in that language, one final per sentence", async () => {
    remote.reset();
    remote.languageOf = ({ utterance }) => (utterance === 0 ? "english" : "spanish");
    remote.reply = replyTaggedWithLanguage;
    const socket = await open({
      twoWay: "true",
      sourceLanguage: "en-US",
      targetLanguage: "es",
      // ignored: two-way always finalises per sentence
      finalizeMode: "stable",
      voiceId: "37",
      sourceLanguageLabel: "English (US)",
      targetLanguageLabel: "Spanish (Mexico)",
    });

    await speak(socket, goForward);
    expect(socket.audioFrames.length).toBeGreaterThan(0);
    const firstClip = socket.audioFrames.length;
    // Spanish speech comes from the stand-in (voice 37 is its second male voice).
    expect(remote.ofEndpoint("speech").map((r) => r.json!["voice"])).toEqual(["echo"]);
    await speak(socket, austen);
    // English speech comes from eSpeak NG: more audio, no further request to the stand-in.
    expect(socket.audioFrames.length).toBeGreaterThan(firstClip);
    expect(remote.count("speech")).toBe(1);
    socket.close();

    const originals = finalsOf(socket, "original_transcript");
    const translated = finalsOf(socket, "translated_transcript");
    expect(originals.map((m) => m.detected_language)).toEqual(["en", "es"]);
    expect(translated.map((m) => m.detected_language)).toEqual(["en", "es"]);
    for (const message of [...originals, ...translated]) {
      expect(message).toMatchObject({ source_language: "en", target_language: "es" });
    }
    expect(translated.map((m) => m.text)).toEqual([
      `[Spanish (Mexico)] ${originals[0]!.text as string}`,
      `[English (US)] ${originals[1]!.text as string}`,
    ]);
    expect(translated.map((m) => m.original_text)).toEqual(originals.map((m) => m.text));
    expect(remote.ofEndpoint("speech")[0]!.json!["input"]).toBe(translated[0]!.text);
    // Interims are translated too; every request of the first line goes one way, of the second the other.
    const directions = remote.ofEndpoint("chat").map((r) => /from .* into .*\./u.exec(systemLineOf(r)!)![0]);
    const secondLine = directions.indexOf("from Spanish (Mexico) into English (US).");
    expect(secondLine).toBeGreaterThan(0);
    expect(new Set(directions.slice(0, secondLine))).toEqual(
      new Set(["from English (US) into Spanish (Mexico)."]),
    );
    expect(new Set(directions.slice(secondLine))).toEqual(
      new Set(["from Spanish (Mexico) into English (US)."]),
    );

    // Sentence mode: interims came first, yet each line has one final, the whole sentence.
    const first = originals[0]!.correlation_id;
    expect(socket.messages.some((m) => m.correlation_id === first && m.is_final === false)).toBe(true);
    expect(new Set(originals.map((m) => m.correlation_id)).size).toBe(2);
    for (const original of originals) expect(original.text).toMatch(/^speech of \d+ ms\.$/);

    // Identification between the two languages: no language named in any request.
    const transcriptions = remote.ofEndpoint("transcriptions");
    expect(transcriptions.length).toBeGreaterThanOrEqual(2);
    expect(transcriptions.every((r) => r.fields!["language"] === undefined)).toBe(true);

    const spanishClip = Float32Array.from(
      socket.audioFrames.slice(0, firstClip).flatMap((frame) => Array.from(frame)),
    );
    expect(Math.abs(medianPitch({ samples: spanishClip, sampleRate: 24_000 }) - TONE_HZ)).toBeLessThan(10);
  });

  it("takes speech identified outside the pair for the first language, transcribing it again in it", async () => {
    remote.reset();
    remote.languageOf = () => "german";
    remote.reply = replyTaggedWithLanguage;
    const socket = await open({
      twoWay: "true",
      sourceLanguage: "en",
      targetLanguage: "es",
      audioOutputEnabled: "false",
    });
    await speak(socket, goForward);
    socket.close();

    expect(finalsOf(socket, "original_transcript").map((m) => m.detected_language)).toEqual(["en"]);
    const [translated] = finalsOf(socket, "translated_transcript");
    expect(translated).toMatchObject({ detected_language: "en" });
    expect(translated!.text).toMatch(/^\[Spanish\] speech of \d+ ms\.$/);
    // The whole utterance was identified as German, then transcribed again as English (as interims
    // were, unless the final request cancelled one first).
    const languages = remote.ofEndpoint("transcriptions").map((r) => r.fields!["language"]?.[0]);
    expect(languages.slice(-2)).toEqual([undefined, "en"]);
    expect(new Set(languages)).toEqual(new Set([undefined, "en"]));
  });

  it("works between languages one of which has no voice output when audio output is off", async () => {
    remote.reset();
    remote.languageOf = () => "german";
    remote.reply = replyTaggedWithLanguage;
    const socket = await open({
      twoWay: "true",
      sourceLanguage: "en",
      targetLanguage: "de",
      audioOutputEnabled: "false",
    });
    await speak(socket, goForward);
    socket.close();
    const [translated] = finalsOf(socket, "translated_transcript");
    expect(translated).toMatchObject({
      detected_language: "de",
      source_language: "en",
      target_language: "de",
    });
    expect(translated!.text).toMatch(/^\[English\] speech of \d+ ms\.$/);
    expect(socket.audioFrames).toEqual([]);
    expect(socket.messages.filter((m) => m.type === "error")).toEqual([]);
  });

  it("applies the spec's defaults (en, es) to the language not given", async () => {
    remote.reset();
    remote.languageOf = () => "spanish";
    remote.reply = replyTaggedWithLanguage;
    // Neither language: the pair is en–es; only the target: the source is en.
    for (const params of [{}, { targetLanguage: "fr" }] as Record<string, string>[]) {
      const socket = await open({ twoWay: "true", audioOutputEnabled: "false", ...params });
      await speak(socket, goForward);
      socket.close();
      expect(socket.messages.filter((m) => m.type === "error")).toEqual([]);
      const [translated] = finalsOf(socket, "translated_transcript");
      expect(translated).toMatchObject({
        source_language: "en",
        target_language: params.targetLanguage ?? "es",
      });
    }
    // Spoken Spanish went into English in the en–es pair; in the en–fr pair it is taken to be the first side (en).
    const directions = remote.ofEndpoint("chat").map((r) => /into (.*)\.$/u.exec(systemLineOf(r)!)![1]);
    expect(directions).toContain("English");
    expect(directions).toContain("French");
  });

  describe("session-start rejections: ready, then an error frame, then close 1000", () => {
    const cases: [string, Record<string, string>, RegExp][] = [
      [
        "the target language has no voice output",
        { sourceLanguage: "en", targetLanguage: "de" },
        /targetLanguage="de" has no voice output.*available for: es, en/,
      ],
      [
        "the source language has no voice output",
        { sourceLanguage: "de", targetLanguage: "es" },
        /sourceLanguage="de" has no voice output.*available for: es, en/,
      ],
      [
        "no translation between the two",
        { sourceLanguage: "en", targetLanguage: "ja", audioOutputEnabled: "false" },
        /no translation from "en" to "ja".*targets are: /,
      ],
      [
        "a language the recognizer cannot identify",
        { sourceLanguage: "en", targetLanguage: "it", audioOutputEnabled: "false" },
        /targetLanguage="it" cannot be identified.*knows: en, es, de, fr, ja/,
      ],
      [
        "auto as one of the pair",
        { sourceLanguage: "auto", targetLanguage: "es", modelName: "relay-2" },
        /sourceLanguage=auto cannot be combined with twoWay=true/,
      ],
    ];
    it.each(cases)("%s", async (_name, params, pattern) => {
      const socket = await open({ twoWay: "true", ...params });
      expect(await socket.closed()).toBe(1000);
      expect(socket.messages.map((m) => m.type)).toEqual(["ready", "error"]);
      expect(socket.messages[1]!.error).toMatch(pattern);
    });
  });
});
