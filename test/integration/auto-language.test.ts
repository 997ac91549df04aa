import { serviceOnStandIn, type StandInService } from "../support/stand-in-engines.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readWavAsPcm16 } from "../../src/audio/wav.js";
import { RealtimeSocket, type ServerMessage } from "../../src/cli/recording-socket.js";
import { makeTestVideo } from "../support/media.js";
import type { OpenAiTestServer } from "../support/openai-server.js";
import { API_KEY, type TestServer } from "../support/server.js";
import { sharedMissing, sharedPath } from "../support/shared.js";
import { dubbingClient } from "../support/dubbing-client.js";
import { finalizeAndWait, openSession } from "../support/session-socket.js";

/**
 * sourceLanguage=auto (relay-2) with languageHints, and dubbing's source_lang=auto, through the
 * real server over HTTP and WebSocket. A stand-in OpenAI-compatible server recognizes (reporting
 * the language each utterance is scripted to be in), translates and speaks; the requests the
 * service sends it are checked.
 */
const SPEECH_MISSING = sharedMissing("data/speech/librivox-pocketsphinx");
let service: StandInService;
let remote: OpenAiTestServer;
let server: TestServer;
let goForward: Int16Array;
let austen: Int16Array;

beforeAll(async () => {
  if (SPEECH_MISSING) return;
  service = await serviceOnStandIn(
    "auto-language",
    (entry) => ({
      // ja is recognized but cannot be translated; it is not recognized at all; nl is served but is
      // not a dubbing language.
      asr: [entry("whisper-large", ["en", "es", "de", "fr", "ja", "nl"])],
      mt: [entry("llm", ["en", "es", "de", "fr", "nl"])],
      tts: [entry("tts-1", ["en", "es", "de", "fr"], { voices: { female: ["nova"], male: ["onyx"] } })],
    }),
    { DUBBING_WORKERS: "1", RATE_LIMIT_PER_MINUTE: "1000" },
  );
  ({ remote, server } = service);
  goForward = await readWavAsPcm16(sharedPath("data/speech/librivox-pocketsphinx/goforward.wav"));
  austen = await readWavAsPcm16(
    sharedPath("data/speech/librivox-pocketsphinx/sense_and_sensibility_01_austen_64kb-0880.wav"),
  );
});
afterAll(async () => {
  await service?.close();
});

const open = (params: Record<string, string>): Promise<RealtimeSocket> =>
  openSession(server.baseUrl, {
    sourceLanguage: "auto",
    modelName: "relay-2",
    targetLanguage: "es",
    // one final per utterance (the stand-in punctuates), so each line is one translation
    finalizeMode: "sentence",
    ...params,
  });

const of = (socket: RealtimeSocket, type: string) =>
  socket.messages.filter((m: ServerMessage) => m.type === type);
const finalsOf = (socket: RealtimeSocket, type: string) =>
  of(socket, type).filter((m) => m.is_final === true);

/** Streams one utterance in real time, finalizes, and waits for its translated final and any speech after it. */
async function speak(socket: RealtimeSocket, pcm: Int16Array): Promise<void> {
  const before = finalsOf(socket, "translated_transcript").length;
  await socket.stream(pcm, { chunkMs: 20, speed: 1 });
  await finalizeAndWait(socket);
  expect(finalsOf(socket, "translated_transcript")).toHaveLength(before + 1);
}

const requestedLanguages = () =>
  remote.ofEndpoint("transcriptions").map((request) => request.fields!["language"]?.[0]);

describe.skipIf(SPEECH_MISSING)("sourceLanguage=auto with languageHints", () => {
  it("shows the original before the language is identified (detected_language null); translation waits for it", async () => {
    remote.reset();
    // The recognizer can tell the language only from 1.5 s of audio on (interims before say nothing).
    remote.languageOf = ({ durationMs }) => (durationMs < 1500 ? undefined : "german");
    remote.reply = (text) => `[es] ${text.trim()}`;
    const socket = await open({ languageHints: "de-DE,fr,de" });
    await speak(socket, goForward);
    socket.close();

    const originals = of(socket, "original_transcript");
    const firstIdentified = originals.findIndex((m) => m.detected_language !== null);
    expect(originals[0]).toMatchObject({ is_final: false, detected_language: null, source_language: "auto" });
    expect(originals.slice(firstIdentified).every((m) => m.detected_language === "de")).toBe(true);
    expect(originals.at(-1)).toMatchObject({ is_final: true, detected_language: "de" });
    // No translation of text whose language was unknown: each one follows an identified original.
    const translated = of(socket, "translated_transcript");
    expect(translated.every((m) => m.detected_language === "de")).toBe(true);
    const firstTranslation = socket.messages.indexOf(translated[0]!);
    expect(firstTranslation).toBeGreaterThan(socket.messages.indexOf(originals[firstIdentified]!));
    expect(translated.at(-1)!.text).toBe(`[es] ${originals.at(-1)!.text as string}`);
    expect(JSON.stringify(remote.ofEndpoint("chat").at(-1)!.json!["messages"])).toContain(
      "from German into Spanish",
    );
    // Two hints (de-DE and de are one): the recognizer identifies, no language is named.
    expect(requestedLanguages().length).toBeGreaterThanOrEqual(2);
    expect(requestedLanguages().every((language) => language === undefined)).toBe(true);
    expect(socket.audioFrames.length).toBeGreaterThan(0);
  });

  it("passes an utterance already in the target language through, with its own text and no speech", async () => {
    remote.reset();
    remote.languageOf = ({ utterance }) => (utterance === 0 ? "french" : "spanish");
    remote.reply = (text) => `[es] ${text.trim()}`;
    const socket = await open({ languageHints: "fr,es" });
    await speak(socket, goForward);
    const frames = socket.audioFrames.length;
    const chats = remote.count("chat");
    expect(frames).toBeGreaterThan(0);
    await speak(socket, austen);
    socket.close();

    const [translated, passed] = finalsOf(socket, "translated_transcript");
    expect(translated).toMatchObject({
      detected_language: "fr",
      text: `[es] ${translated!.original_text as string}`,
    });
    expect(passed).toMatchObject({
      detected_language: "es",
      text: passed!.original_text,
      target_language: "es",
    });
    expect(passed!.text).toMatch(/^speech of \d+ ms\.$/);
    expect(socket.audioFrames.length).toBe(frames);
    expect(remote.count("chat")).toBe(chats);
    expect(remote.count("speech")).toBe(1);
  });

  it("names the only hint as the recognizer's language; with several, speech identified outside them is transcribed again in the first", async () => {
    remote.reset();
    remote.languageOf = () => "english";
    const single = await open({ languageHints: "fr-CA", audioOutputEnabled: "false" });
    await speak(single, goForward);
    single.close();
    expect(finalsOf(single, "original_transcript").at(-1)).toMatchObject({ detected_language: "fr" });
    expect(new Set(requestedLanguages())).toEqual(new Set(["fr"]));

    remote.reset();
    remote.languageOf = () => "english";
    const several = await open({ languageHints: "de,fr", audioOutputEnabled: "false" });
    await speak(several, goForward);
    several.close();
    expect(finalsOf(several, "original_transcript").at(-1)).toMatchObject({ detected_language: "de" });
    expect(JSON.stringify(remote.ofEndpoint("chat").at(-1)!.json!["messages"])).toContain(
      "from German into Spanish",
    );
    // The whole utterance was identified, then transcribed again as German (as interims were, unless
    // the final request cancelled one first).
    const languages = requestedLanguages();
    expect(languages.slice(-2)).toEqual([undefined, "de"]);
    expect(new Set(languages)).toEqual(new Set([undefined, "de"]));
  });

  describe("session-start rejections: ready, then an error frame, then close 1000", () => {
    const cases: [string, Record<string, string>, RegExp][] = [
      [
        "a hint the recognizer cannot identify",
        { languageHints: "de,it" },
        /languageHints="it" cannot be identified.*knows: en, es, de, fr, ja, nl/,
      ],
      [
        "a hint that cannot be translated into the target",
        { languageHints: "ja", audioOutputEnabled: "false" },
        /languageHints="ja": no translation from "ja" to "es"/,
      ],
      ["a malformed hint", { languageHints: "de,," }, /languageHints="" is not a language code/],
      [
        "auto on relay-1",
        { modelName: "relay-1", languageHints: "de" },
        /sourceLanguage=auto needs modelName=relay-2/,
      ],
    ];
    it.each(cases)("%s", async (_name, params, pattern) => {
      const socket = await open(params);
      expect(await socket.closed()).toBe(1000);
      expect(socket.messages.map((m) => m.type)).toEqual(["ready", "error"]);
      expect(socket.messages[1]!.error).toMatch(pattern);
    });
  });
});

describe.skipIf(SPEECH_MISSING)("dubbing with source_lang auto", () => {
  it("resolves the language the recognizer identifies and dubs from it", async () => {
    remote.reset();
    remote.languageOf = () => "french";
    remote.reply = (text) => `[en] ${text.trim()}`;
    const client = dubbingClient(server.baseUrl, API_KEY);
    const { body: created } = await client.request("POST", "/api/dubbing/jobs", {
      source_url: await client.upload(await makeTestVideo(service.dir)),
      target_lang: "en",
      source_lang: "auto",
    });
    const job = await client.finished(created.job_id as string);
    expect(job).toMatchObject({ status: "completed", source_lang: "fr", target_lang: "en" });
    const segments = job.segments as { text: string; translated_text: string }[];
    expect(segments.length).toBeGreaterThan(0);
    for (const segment of segments) expect(segment.translated_text).toBe(`[en] ${segment.text}`);
    // Identified without a language, then recognized as French; translated from French.
    expect(requestedLanguages()[0]).toBeUndefined();
    expect(requestedLanguages().at(-1)).toBe("fr");
    expect(JSON.stringify(remote.ofEndpoint("chat").at(-1)!.json!["messages"])).toContain(
      "from French into English",
    );
  });

  it("refuses speech identified as a language outside the spec's list, even one the engines serve", async () => {
    remote.reset();
    remote.languageOf = () => "dutch";
    const client = dubbingClient(server.baseUrl, API_KEY);
    const { body: created } = await client.request("POST", "/api/dubbing/jobs", {
      source_url: await client.upload(await makeTestVideo(service.dir)),
      target_lang: "en",
    });
    const job = await client.finished(created.job_id as string);
    expect(job).toMatchObject({
      status: "failed",
      source_lang: "auto",
      error_message: expect.stringMatching(
        /identified as nl, which cannot be dubbed into "en".*languages: en, es, de, fr\)$/,
      ),
    });
    expect(remote.count("chat")).toBe(0);
  });
});
