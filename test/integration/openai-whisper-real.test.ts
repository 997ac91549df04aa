import { execFile } from "node:child_process";
import { readFile, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readWavAsPcm16 } from "../../src/audio/wav.js";
import type { RealtimeSocket, ServerMessage } from "../../src/cli/recording-socket.js";
import { scoringWords, wordErrorRate } from "../../src/engines/kit/models/check-metrics.js";
import { dubbingClient } from "../support/dubbing-client.js";
import { joinRoom } from "../support/room-client.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";
import { finalizeAndWait, openSession } from "../support/session-socket.js";
import { sharedMissing, sharedPath } from "../support/shared.js";
import {
  startWhisperServer,
  WHISPER_SERVER_MODEL,
  whisperServerProblem,
  type WhisperServer,
} from "../support/whisper-server.js";

/**
 * Real recognition through relay's OpenAI-compatible engine, configured by ENGINES_FILE as a user
 * would: two faster-whisper-server processes (test/support/whisper-server.ts) serve the real
 * CTranslate2 models, tiny.en for English and base (multilingual) for the other languages and for
 * identification; Apertium translates, eSpeak NG speaks. One relay server serves every test.
 *
 * The word-error bounds (percent) are lenient, well above what was measured here (0 for tiny.en on
 * LibriSpeech and JFK, 13 and 22 for base on two FLEURS clips): they catch broken plumbing (wrong
 * audio, wrong language, lost words), not a model a few points worse.
 */
const problem =
  whisperServerProblem() ??
  (sharedMissing("data/speech/misc") ||
  sharedMissing("data/speech/fleurs-dev") ||
  sharedMissing("data/speech/librivox-pocketsphinx")
    ? "../shared speech is missing"
    : undefined);
if (problem) console.warn(`real Whisper through the openai engine not run: ${problem}`);

const run = promisify(execFile);
const JFK_REFERENCE =
  "and so my fellow americans ask not what your country can do for you ask what you can do for your country";

let tiny: WhisperServer;
let base: WhisperServer;
let server: TestServer;
let dir: string;

beforeAll(async () => {
  if (problem) return;
  dir = await mkdtemp(path.join(tmpdir(), "openai-whisper-real-"));
  [tiny, base] = await Promise.all([
    startWhisperServer("whisper-tiny.en"),
    startWhisperServer("whisper-base"),
  ]);
  const enginesFile = path.join(dir, "engines.json");
  await writeFile(
    enginesFile,
    JSON.stringify({
      asr: [
        {
          engine: "openai",
          id: "whisper-tiny-en",
          baseUrl: tiny.baseUrl,
          model: WHISPER_SERVER_MODEL,
          languages: ["en"],
        },
        {
          engine: "openai",
          id: "whisper-base",
          baseUrl: base.baseUrl,
          model: WHISPER_SERVER_MODEL,
          languages: ["en", "es", "fr", "pt"],
        },
      ],
      mt: [{ engine: "apertium" }],
      tts: [{ engine: "espeak-ng" }],
    }),
  );
  server = await startServer({
    ENGINES_FILE: enginesFile,
    DUBBING_WORKERS: "1",
    RATE_LIMIT_PER_MINUTE: "1000",
  });
});

afterAll(async () => {
  await server?.close();
  await Promise.all([tiny?.close(), base?.close()]);
  if (dir) await rm(dir, { recursive: true, force: true });
});

const speech = (...parts: string[]) => readWavAsPcm16(sharedPath("data/speech", ...parts));
const fleurs = async (clip: string) => ({
  pcm: await speech("fleurs-dev", `${clip}.wav`),
  reference: (await readFile(sharedPath("data/speech/fleurs-dev", `${clip}.txt`), "utf8")).trim(),
});

/**
 * The last final of each segment, in order: in the default `finalizeMode=stable` each final of a
 * segment repeats the one before it and adds to it.
 */
function finalsOf(socket: RealtimeSocket, type: string): ServerMessage[] {
  const last = new Map<unknown, ServerMessage>();
  for (const m of socket.messages) if (m.type === type && m.is_final === true) last.set(m.correlation_id, m);
  return [...last.values()];
}
const textOf = (messages: ServerMessage[], field = "text") =>
  messages.map((m) => m[field] as string).join(" ");
const wer = (reference: string, hypothesis: string) =>
  wordErrorRate([scoringWords(reference).join(" ")], [scoringWords(hypothesis).join(" ")]);

/** Speech with a second of silence after it, so that the utterance ends on its own. */
function withSilence(pcm: Int16Array, seconds = 1): Int16Array {
  const padded = new Int16Array(pcm.length + seconds * 16_000);
  padded.set(pcm);
  return padded;
}

describe.skipIf(problem)("real Whisper (faster-whisper-server) as the openai recognizer", () => {
  it("routes English to tiny.en, the other languages and identification to base", () => {
    // Both engines are `openai-asr`; their versions name the server (`<model>@<host>`).
    const on = (whisper: WhisperServer) => `${WHISPER_SERVER_MODEL}@${new URL(whisper.baseUrl).host}`;
    const { registry } = server;
    expect(registry.recognizer("en")!.info.version).toBe(on(tiny));
    expect(registry.recognizer("es")!.info.version).toBe(on(base));
    // tiny.en, configured for English alone, identifies nothing: base, behind it, does.
    expect(registry.languageIdentifier()!.info.version).toBe(on(base));
  });

  it("a live English session into Spanish: interims, finals close to the reference, finalized", async () => {
    const [, , reference] = (await readFile(sharedPath("data/speech/misc/transcripts.tsv"), "utf8"))
      .split("\n")
      .map((line) => line.split("\t"))
      .find(([file]) => file === "librispeech-1995-1837-0001.wav")!;
    const socket = await openSession(server.baseUrl, {
      sourceLanguage: "en-US",
      targetLanguage: "es",
      audioOutputEnabled: "false",
    });
    // Real time: interims come while the speaker talks; finalize ends the utterance.
    await socket.stream(await speech("misc/librispeech-1995-1837-0001.wav"), { chunkMs: 20, speed: 1 });
    const finalizedAt = performance.now();
    await finalizeAndWait(socket);
    const lastFinal = socket.received.findLast(
      (r) => r.message?.type === "original_transcript" && r.message.is_final === true,
    )!;
    socket.close();

    const interims = socket.messages.filter((m) => m.type === "original_transcript" && m.is_final === false);
    expect(interims.some((m) => (m.text as string).trim() !== "")).toBe(true);
    const originals = finalsOf(socket, "original_transcript");
    const heard = textOf(originals);
    const measured = wer(reference!, heard);
    console.info(
      `tiny.en live: WER ${measured.toFixed(3)} ("${heard}"); finalize → final ${Math.round(lastFinal.at - finalizedAt)} ms`,
    );
    expect(measured).toBeLessThan(20);
    for (const message of originals)
      expect(message).toMatchObject({
        source_language: "en",
        target_language: "es",
        detected_language: "en",
      });
    const translated = finalsOf(socket, "translated_transcript");
    expect(translated.map((m) => m.correlation_id)).toEqual(originals.map((m) => m.correlation_id));
    expect(textOf(translated)).toMatch(/\b(primera|pena|vida|algod[oó]n)\b/iu);
    expect(socket.messages.filter((m) => m.type === "error")).toEqual([]);
  });

  it("base identifies a Spanish clip as es in a sourceLanguage=auto session, translated into English", async () => {
    const { pcm, reference } = await fleurs("fleurs-es-006");
    const socket = await openSession(server.baseUrl, {
      sourceLanguage: "auto",
      modelName: "relay-2",
      targetLanguage: "en",
      audioOutputEnabled: "false",
    });
    await socket.stream(withSilence(pcm), { chunkMs: 20, speed: 4 });
    await finalizeAndWait(socket);
    socket.close();
    const originals = finalsOf(socket, "original_transcript");
    expect(originals.length).toBeGreaterThan(0);
    expect(originals.map((m) => m.detected_language)).toEqual(originals.map(() => "es"));
    const measured = wer(reference, textOf(originals));
    console.info(`base auto es: WER ${measured.toFixed(3)} ("${textOf(originals)}")`);
    expect(measured).toBeLessThan(50);
    expect(textOf(finalsOf(socket, "translated_transcript"))).toMatch(/\b(the|also|fighters?)\b/iu);
  });

  it("a two-way session: English comes out in Spanish and Spanish in English", async () => {
    const socket = await openSession(server.baseUrl, {
      twoWay: "true",
      sourceLanguage: "en",
      targetLanguage: "es",
      audioOutputEnabled: "false",
    });
    // One short sentence each way: a long one is cut into sentences at estimated word times
    // (the server gives segment times only), each decoded again (seconds apiece with base).
    await socket.stream(withSilence(await speech("librivox-pocketsphinx/goforward.wav")), {
      chunkMs: 20,
      speed: 4,
    });
    await finalizeAndWait(socket);
    const { pcm } = await fleurs("fleurs-es-006");
    await socket.stream(withSilence(pcm), { chunkMs: 20, speed: 4 });
    await finalizeAndWait(socket);
    socket.close();

    const originals = finalsOf(socket, "original_transcript");
    const translated = finalsOf(socket, "translated_transcript");
    const sides = [...new Set(originals.map((m) => m.detected_language))];
    expect(sides).toEqual(["en", "es"]);
    const side = (language: string) => translated.filter((m) => m.detected_language === language);
    console.info(`base two-way: en "${textOf(side("en"))}"; es "${textOf(side("es"))}"`);
    expect(textOf(side("en"))).toMatch(/\b(adelante|diez|metros)\b/iu);
    expect(textOf(side("es"))).toMatch(/\b(the|also|fighters?)\b/iu);
    for (const message of translated)
      expect(message).toMatchObject({ source_language: "en", target_language: "es" });
    expect(socket.messages.filter((m) => m.type === "error")).toEqual([]);
  });

  it("dubs a short English clip whose words tiny.en recognizes", async () => {
    const video = path.join(dir, "jfk.mp4");
    await run("ffmpeg", [
      ...["-v", "error", "-y", "-i", sharedPath("data/speech/misc/jfk.wav")],
      ...["-f", "lavfi", "-i", "testsrc=size=160x120:rate=10", "-shortest"],
      ...["-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "aac", video],
    ]);
    const client = dubbingClient(server.baseUrl, API_KEY);
    const { status, body } = await client.request("POST", "/api/dubbing/jobs", {
      source_url: await client.upload(video),
      source_lang: "en",
      target_lang: "es",
    });
    expect(status, JSON.stringify(body)).toBe(201);
    const job = await client.finished(body.job_id as string);
    expect(job.error ?? null).toBeNull();
    expect(job.status).toBe("completed");
    const segments = job.segments as ServerMessage[];
    const measured = wer(JFK_REFERENCE, textOf(segments));
    console.info(`tiny.en dubbing: WER ${measured.toFixed(3)} ("${textOf(segments)}")`);
    expect(measured).toBeLessThan(20);
    expect(textOf(segments, "translated_text")).toMatch(/\bpa[ií]s\b/iu);
  });

  it("a room: a Spanish speaker is heard by base and an English participant gets the translation", async () => {
    const { pcm, reference } = await fleurs("fleurs-es-005");
    const post = async (route: string, request: unknown) => {
      const response = await fetch(new URL(route, server.baseUrl), {
        method: "POST",
        headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" },
        body: JSON.stringify(request),
      });
      expect(response.status).toBe(200);
      return (await response.json()) as { url: string; token: string; room_name: string };
    };
    const created = await post("/api/beta1/session", { languages: ["es", "en"], voice_type: "female" });
    const listenerAccess = await post(`/api/beta1/session/${created.room_name}/participants`, {
      language: "en",
    });
    const speaker = await joinRoom(created);
    const listener = await joinRoom(listenerAccess);
    try {
      await speaker.stream(withSilence(pcm, 1.5), { chunkMs: 20, speed: 4 });
      const speakerIdentity = (speaker.messages.find((m) => m.type === "joined") as { identity?: string })
        .identity;
      // Rooms have no finalize: the translation of the utterance that ends with the clip is awaited.
      const last = await listener.waitFor(
        (m) =>
          m.type === "original_transcript" &&
          m.is_final === true &&
          (m.end_ms as number) > pcm.length / 16 - 4000,
        300_000,
      );
      await listener.waitFor(
        (m) =>
          m.type === "translated_transcript" &&
          m.is_final === true &&
          m.correlation_id === last.correlation_id,
        300_000,
      );
      const heard = textOf(finalsOf(listener, "original_transcript"));
      const measured = wer(reference, heard);
      console.info(`base room es: WER ${measured.toFixed(3)} ("${heard}")`);
      expect(measured).toBeLessThan(35);
      const translations = finalsOf(listener, "translated_transcript");
      for (const message of translations)
        expect(message).toMatchObject({ participant: speakerIdentity, language: "en" });
      expect(textOf(translations, "translated_text")).toMatch(/\b(people|screens?|computers?|today)\b/iu);
    } finally {
      speaker.close();
      listener.close();
    }
  });
});
