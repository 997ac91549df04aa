import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readWavAsPcm16 } from "../../src/audio/wav.js";
import { REFERENCE_SENTENCES } from "../../src/voices/reference-sentences.js";
import { createSession, RealtimeSocket, type ServerMessage } from "../../src/cli/recording-socket.js";
import { medianPitch } from "../support/audio-measures.js";
import { makeTestVideo } from "../support/media.js";
import { startOpenAiServer, TONE_HZ, type OpenAiTestServer } from "../support/openai-server.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";
import { sharedMissing, sharedPath } from "../support/shared.js";
import { dubbingClient } from "../support/dubbing-client.js";
import { finalizeAndWait } from "../support/session-socket.js";

/**
 * The service configured (ENGINES_FILE) with OpenAI-compatible remote engines for recognition,
 * translation and speech, served by a local stand-in server: real sessions and a real dubbing job
 * go through them, and the requests the service sends are checked.
 */
const SPEECH_MISSING = sharedMissing("data/speech/librivox-pocketsphinx");
const LANGUAGES = ["en", "es", "de", "fr"];
let remote: OpenAiTestServer;
let dir: string;
let goForward: Int16Array;

async function withService<T>(engines: unknown, run: (server: TestServer) => Promise<T>): Promise<T> {
  const file = path.join(dir, `engines-${Math.random().toString(36).slice(2)}.json`);
  await writeFile(file, JSON.stringify(engines));
  const server = await startServer({
    ENGINES_FILE: file,
    REMOTE_KEY: "sk-test-remote",
    DUBBING_WORKERS: "1",
    RATE_LIMIT_PER_MINUTE: "1000",
  });
  try {
    return await run(server);
  } finally {
    await server.close();
  }
}

const remoteEntry = (extra: Record<string, unknown> = {}) => ({
  engine: "openai",
  baseUrl: remote.baseUrl,
  apiKey: "${REMOTE_KEY}",
  model: "test-model",
  languages: LANGUAGES,
  timeoutMs: 2000,
  maxRetries: 1,
  ...extra,
});

const allRemote = () => ({
  asr: [remoteEntry({ model: "whisper-large" })],
  mt: [remoteEntry({ model: "llm" })],
  tts: [remoteEntry({ model: "tts-1", voices: { female: ["nova"], male: ["onyx", "echo"] } })],
});

const finalOf = (socket: RealtimeSocket, type: string) =>
  socket.messages.filter((m) => m.type === type && m.is_final === true);

/** Speaks one utterance and waits for its own final translation (not an earlier utterance's). */
async function speak(socket: RealtimeSocket, pcm: Int16Array): Promise<void> {
  const isFinalTranslation = (m: ServerMessage) => m.type === "translated_transcript" && m.is_final === true;
  const before = socket.messages.filter(isFinalTranslation).length;
  await socket.stream(pcm, { chunkMs: 20, speed: 8 });
  await finalizeAndWait(socket);
  expect(socket.messages.filter(isFinalTranslation).length).toBeGreaterThan(before);
}

beforeAll(async () => {
  remote = await startOpenAiServer();
  dir = await mkdtemp(path.join(tmpdir(), "remote-engines-"));
  if (!SPEECH_MISSING)
    goForward = await readWavAsPcm16(sharedPath("data/speech/librivox-pocketsphinx/goforward.wav"));
});
afterAll(async () => {
  await remote?.close();
  await rm(dir, { recursive: true, force: true });
});

describe.skipIf(SPEECH_MISSING)("remote OpenAI-compatible engines in real sessions", () => {
  it("recognizes, translates (with context, labels and history) and speaks through the remote server", async () => {
    remote.reset();
    remote.reply = (text) => `[es] ${text.trim()}`;
    await withService(allRemote(), async (server) => {
      const languages = (await (await fetch(new URL("/v1/languages", server.baseUrl))).json()) as {
        recognition: { language: string; engine: string }[];
      };
      expect(languages.recognition.map((r) => r.language).sort()).toEqual([...LANGUAGES].sort());

      const session = await createSession(server.baseUrl, API_KEY, {
        sourceLanguage: "en",
        targetLanguage: "es",
        // one final per utterance (the remote recognizer punctuates), so each line is one translation
        finalizeMode: "sentence",
        context: "A robotics lab",
        sourceLanguageLabel: "English (US)",
        targetLanguageLabel: "Spanish (Mexico)",
        voiceId: "37",
      });
      expect(session.model_version_id).toMatch(/openai-asr@whisper-large@127\.0\.0\.1/);
      const socket = await RealtimeSocket.connect(session.ws_url);
      await socket.waitFor((m) => m.type === "ready");
      await speak(socket, goForward);
      await speak(socket, goForward);

      const originals = finalOf(socket, "original_transcript");
      expect(originals[0]!.text).toMatch(/^speech of \d+ ms\.?$/);
      const translated = finalOf(socket, "translated_transcript");
      expect(translated[0]!.text).toBe(`[es] ${originals[0]!.text as string}`);

      const transcription = remote.ofEndpoint("transcriptions").at(-1)!;
      expect(transcription.fields).toMatchObject({
        model: ["whisper-large"],
        language: ["en"],
        response_format: ["verbose_json"],
        prompt: ["A robotics lab"],
      });
      expect(transcription.fields!["timestamp_granularities[]"]).toEqual(expect.arrayContaining(["word"]));
      expect(transcription.file!.audio).toMatchObject({ sampleRate: 16_000, channels: 1 });
      expect(transcription.headers.authorization).toBe("Bearer sk-test-remote");

      const chats = remote.ofEndpoint("chat");
      const lastChat = JSON.stringify(chats.at(-1)!.json!.messages);
      expect(chats.at(-1)!.json!.model).toBe("llm");
      expect(lastChat).toContain("English (US)");
      expect(lastChat).toContain("Spanish (Mexico)");
      expect(lastChat).toContain("A robotics lab");
      // the second utterance's request carries the first sentence and its translation
      expect(lastChat).toContain(translated[0]!.text as string);

      const speech = remote.ofEndpoint("speech").at(-1)!.json!;
      // voice 37 is the second male library voice: the second male server voice
      expect(speech).toMatchObject({ model: "tts-1", voice: "echo", input: translated.at(-1)!.text });
      const audio = Float32Array.from(socket.audioFrames.flatMap((frame) => Array.from(frame)));
      expect(audio.length / 24_000).toBeGreaterThan(0.5);
      expect(Math.abs(medianPitch({ samples: audio, sampleRate: 24_000 }) - TONE_HZ)).toBeLessThan(10);
      socket.close();
    });
  });

  it("identifies the language per utterance with sourceLanguage=auto (relay-2)", async () => {
    remote.reset();
    remote.detectedLanguage = "german";
    remote.reply = (text) => `[es] ${text.trim()}`;
    await withService(allRemote(), async (server) => {
      const session = await createSession(server.baseUrl, API_KEY, {
        sourceLanguage: "auto",
        targetLanguage: "es",
        modelName: "relay-2",
      });
      const socket = await RealtimeSocket.connect(session.ws_url);
      await socket.waitFor((m) => m.type === "ready");
      await speak(socket, goForward);
      const original = finalOf(socket, "original_transcript").at(-1)!;
      expect(original).toMatchObject({ source_language: "auto", detected_language: "de" });
      expect(finalOf(socket, "translated_transcript").at(-1)).toMatchObject({ detected_language: "de" });
      expect(remote.ofEndpoint("transcriptions").at(-1)!.fields!.language).toBeUndefined();
      expect(JSON.stringify(remote.ofEndpoint("chat").at(-1)!.json!.messages)).toContain("German");

      // An utterance already in the target language is passed through, unspoken.
      remote.detectedLanguage = "spanish";
      const framesBefore = socket.audioFrames.length;
      await speak(socket, goForward);
      const passed = finalOf(socket, "translated_transcript").at(-1)!;
      expect(passed).toMatchObject({ detected_language: "es", text: passed.original_text });
      expect(socket.audioFrames.length).toBe(framesBefore);
      socket.close();
    });
  });

  it("falls back to the embedded engines while the remote translator fails, and reports a timeout clearly", async () => {
    remote.reset();
    const engines = {
      asr: [{ engine: "pocketsphinx" }],
      mt: [
        remoteEntry({ model: "llm", maxRetries: 0, circuit: { failureThreshold: 1, resetAfterMs: 60_000 } }),
      ],
      tts: [{ engine: "espeak-ng" }],
    };
    // No fallback: a translator that never answers in time is an error frame, not a hung session.
    await withService(engines, async (server) => {
      remote.script("chat", { delayMs: 5000 });
      const socket = await RealtimeSocket.connect((await createSession(server.baseUrl, API_KEY)).ws_url);
      await socket.waitFor((m) => m.type === "ready");
      await socket.stream(goForward, { speed: 8 });
      await finalizeAndWait(socket);
      const error = socket.messages.find((m) => m.type === "error");
      expect(error?.error).toMatch(/translation failed: .*timed out after 2000 ms/);
      socket.close();
    });
    // With Apertium behind it, the session keeps translating while the remote server fails.
    remote.reset();
    await withService({ ...engines, mt: [...engines.mt, { engine: "apertium" }] }, async (server) => {
      remote.script(
        "chat",
        { status: 500, message: "model crashed" },
        { status: 500, message: "model crashed" },
      );
      const socket = await RealtimeSocket.connect((await createSession(server.baseUrl, API_KEY)).ws_url);
      await socket.waitFor((m) => m.type === "ready");
      await speak(socket, goForward);
      expect(finalOf(socket, "translated_transcript").at(-1)!.text).toMatch(/diez metros/i);
      expect(socket.messages.filter((m) => m.type === "error")).toEqual([]);
      expect(remote.count("chat")).toBeGreaterThanOrEqual(1);
      socket.close();
    });
  });

  it("dubs a video with remote recognition, translation and speech", async () => {
    remote.reset();
    remote.reply = (text) => `[es] ${text.trim()}`;
    const video = await makeTestVideo(dir);
    await withService(allRemote(), async (server) => {
      const client = dubbingClient(server.baseUrl, API_KEY);
      const { body: created } = await client.request("POST", "/api/dubbing/jobs", {
        source_url: await client.upload(video),
        target_lang: "es",
        source_lang: "en",
      });
      const job = await client.finished(created.job_id as string);
      expect(job.status).toBe("completed");
      const segments = job.segments as { text: string; translated_text: string }[];
      expect(segments.length).toBeGreaterThan(0);
      for (const segment of segments) expect(segment.translated_text).toBe(`[es] ${segment.text}`);
      expect(remote.count("transcriptions")).toBeGreaterThanOrEqual(segments.length);
      expect(remote.ofEndpoint("transcriptions").every((r) => r.fields!.language?.[0] === "en")).toBe(true);
      // Each line is spoken once; the other speech requests are the library measurements behind
      // voice=auto (the default: one reference sentence per library voice, once per process).
      const spoken = remote.ofEndpoint("speech").map((r) => r.json?.input);
      for (const segment of segments)
        expect(spoken.filter((input) => input === segment.translated_text)).toHaveLength(1);
      const references = Object.values(REFERENCE_SENTENCES);
      expect(
        spoken.every(
          (input) =>
            segments.some((segment) => segment.translated_text === input) ||
            references.includes(input as string),
        ),
      ).toBe(true);
    });
  });
});
