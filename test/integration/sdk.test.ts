/**
 * The SDK (@relay-translate/client, packages/client) in Node against the real service: a
 * session's messages by async iteration with typed narrowing, translated speech through onAudio,
 * the bounded buffer, text to speech, a session refused at its start, the dubbing client from
 * upload to subtitles, and what a client that cannot reach the service is told.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocketServer, type WebSocket } from "ws";
import { readWavAsPcm16 } from "../../src/audio/wav.js";
import {
  ConnectionError,
  createSession,
  DubbingClient,
  HttpError,
  MAX_FRAME_BYTES,
  ProtocolError,
  RealtimeSession,
  SessionError,
  type ServerMessage,
} from "@relay-translate/client";
import { makeTestVideo } from "../support/media.js";
import { freePort } from "../support/ports.js";
import { PROJECT_ROOT } from "../support/run-script.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";
import { sharedMissing, sharedPath } from "../support/shared.js";

const SKIP = sharedMissing("data/speech");
let server: TestServer;
let speech: Int16Array;
let dir: string;

beforeAll(async () => {
  if (SKIP) return;
  server = await startServer({ DUBBING_WORKERS: "1" });
  speech = await readWavAsPcm16(sharedPath("data/speech/librivox-pocketsphinx/goforward.wav"));
  dir = await mkdtemp(path.join(tmpdir(), "relay-sdk-"));
});
afterAll(async () => {
  await server?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** How many final translations the service has timed (its `relay_pipeline_latency_seconds` histogram). */
function finalTranslations(metric: {
  values: { labels: Record<string, unknown>; metricName?: string; value: number }[];
}) {
  return (
    metric.values.find((v) => v.metricName?.endsWith("_count") && v.labels.stage === "translation")?.value ??
    0
  );
}

/** Sends the clip in 20 ms frames, as fast as the socket takes them. */
function sendClip(session: RealtimeSession): void {
  for (let offset = 0; offset < speech.length; offset += 320)
    session.sendAudio(speech.subarray(offset, offset + 320));
  session.finalize();
}

describe.skipIf(SKIP)("the SDK in Node", () => {
  it("iterates over a session's typed messages and hears the translated speech", async () => {
    const session = await RealtimeSession.open(
      { baseUrl: server.baseUrl, apiKey: API_KEY },
      { sourceLanguage: "en", targetLanguage: "es" },
    );
    expect(session.ready).toMatchObject({ type: "ready", session_id: expect.any(String) });
    let audioSamples = 0;
    session.onAudio = (samples) => (audioSamples += samples.length);
    sendClip(session);
    let translation: string | undefined;
    for await (const message of session) {
      // The union narrows on `type`: original_text exists only on translated transcripts.
      if (message.type === "translated_transcript" && message.is_final && /metros/u.test(message.text)) {
        translation = `${message.original_text} → ${message.text}`;
        break;
      }
    }
    expect(translation).toMatch(/go forward ten meters → .*diez metros/iu);
    await expect.poll(() => audioSamples).toBeGreaterThan(24_000 * 0.5);
    session.updateMetadata({ context: "directions" });
    expect(await session.next()).toMatchObject({ type: "metadata_ack", applied: { context: true } });
    session.close();
    expect(await session.closed).toMatchObject({ code: 1000 });
    expect(await session.next()).toBeUndefined();
  });

  it("keeps at most maxBufferedMessages unread, dropping interims first", async () => {
    const session = await RealtimeSession.open(
      { baseUrl: server.baseUrl, apiKey: API_KEY, maxBufferedMessages: 3 },
      { sourceLanguage: "en", targetLanguage: "es", audioOutputEnabled: false },
    );
    const translations = () => server.app.metrics.pipelineLatency.get().then(finalTranslations);
    const before = await translations();
    sendClip(session);
    // Read nothing until the final translation is in: the server has counted it, and an
    // update_metadata sent after that is answered after it (a socket keeps its order); the ack's
    // arrival shows as one more message dropped from the full buffer.
    while ((await translations()) === before) await new Promise((resolve) => setTimeout(resolve, 50));
    const droppedBefore = session.dropped;
    session.updateMetadata({ context: "ordering" });
    while (session.dropped === droppedBefore) await new Promise((resolve) => setTimeout(resolve, 20));
    session.close();
    // Messages may still arrive until the close completes; read once nothing more can.
    await session.closed;
    const kept: ServerMessage[] = [];
    for await (const message of session) kept.push(message);
    expect(kept.length).toBeLessThanOrEqual(3);
    expect(session.dropped).toBeGreaterThan(0);
    expect(kept.filter((m) => m.type === "translated_transcript" && m.is_final).length).toBeGreaterThan(0);
  });

  it("speaks in a tts session", async () => {
    const session = await RealtimeSession.open(
      { baseUrl: server.baseUrl, apiKey: API_KEY },
      { mode: "tts", targetLanguage: "es" },
    );
    let samples = 0;
    session.onAudio = (audio) => (samples += audio.length);
    session.speak("Buenos días.", { correlationId: "line-1" });
    const seen: string[] = [];
    for await (const message of session) {
      seen.push(message.type);
      if (message.type === "speech_end") break;
    }
    // The second ready of a tts session comes through; the SDK's acceptance check leaves no trace.
    expect(seen).toEqual(["ready", "speak_ack", "speech_end"]);
    expect(samples).toBeGreaterThan(0);
    session.close();
  });

  it("rejects open() with the server's message when the session is refused right after ready", async () => {
    const options = { baseUrl: server.baseUrl, apiKey: API_KEY };
    // A language no configured engine recognizes.
    const unservable = await RealtimeSession.open(options, {
      sourceLanguage: "vo",
      targetLanguage: "es",
    }).catch((e: unknown) => e);
    expect(unservable).toBeInstanceOf(SessionError);
    expect((unservable as SessionError).message).toMatch(
      /^sourceLanguage="vo" cannot be recognized by the configured engines; recognition is available for: /u,
    );
    expect((unservable as SessionError).close).toEqual({ code: 1000, reason: "session parameters rejected" });
    // A combination the spec refuses, through connect() with a ws_url made elsewhere.
    const { ws_url } = await createSession(options, { voiceId: "auto", modelName: "relay-1" });
    await expect(RealtimeSession.connect(ws_url)).rejects.toMatchObject({
      name: "SessionError",
      message: "voiceId=auto needs modelName=relay-2",
      close: { code: 1000 },
    });
  });

  it("says a ws_url was refused at the handshake, without showing its token", async () => {
    const { ws_url } = await createSession({ baseUrl: server.baseUrl, apiKey: API_KEY });
    const forged = new URL(ws_url);
    forged.searchParams.set("token", "forged-token");
    const error = await RealtimeSession.connect(forged.href).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConnectionError);
    expect((error as ConnectionError).message).toBe(
      `cannot connect to ${forged.origin}${forged.pathname}: ` +
        "HTTP 401 (the ws_url is invalid or expired; create a new session)",
    );
  });

  it("refuses a bad key with the service's error code", async () => {
    const error = await RealtimeSession.open({ baseUrl: server.baseUrl, apiKey: "wrong" }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(HttpError);
    expect((error as HttpError).code).toBe("unauthorized");
  });

  it("dubs through the dubbing client: upload with progress, job, backoff polling, download, subtitles", async () => {
    const client = new DubbingClient(server.baseUrl, API_KEY);
    const video = await readFile(await makeTestVideo(dir));
    const progress: number[] = [];
    const { sourceUrl } = await client.upload("talk.mp4", video, {
      onProgress: (sent) => progress.push(sent),
    });
    expect(progress.at(-1)).toBe(video.byteLength);
    const created = await client.create({ sourceUrl, sourceLang: "en", targetLang: "es" });
    const statuses: string[] = [];
    const job = await client.wait(created.job_id, { onUpdate: (update) => statuses.push(update.status) });
    expect(job.status).toBe("completed");
    expect(statuses.at(-1)).toBe("completed");
    const result = await client.download(job);
    expect(result.headers.get("content-type")).toBe("video/mp4");
    expect((await result.arrayBuffer()).byteLength).toBeGreaterThan(1000);
    expect(await client.subtitles(job.job_id, "translated", "vtt")).toMatch(/^WEBVTT/u);
  });
});

/**
 * The README's first example as a program: its placeholders defined (the key, `play`, and a
 * `microphone` that sends `pcmFile` as fast as the socket takes it, then finalizes and closes the
 * session once `finalized` says every result is out), the SDK imported from its build.
 */
async function readmeExample(pcmFile: string): Promise<string> {
  const readme = await readFile(path.join(PROJECT_ROOT, "packages/client/README.md"), "utf8");
  const section = readme.slice(readme.indexOf("## Real-time translation"));
  const example = /```ts\n([\s\S]*?)```/u.exec(section)![1]!;
  const sdk = pathToFileURL(path.join(PROJECT_ROOT, "packages/client/dist/index.js")).href;
  const program = `import { readFileSync } from "node:fs";
const apiKey = process.env.RELAY_API_KEY;
const play = (_samples: Float32Array) => undefined;
const microphone = {
  on(_event: "frame", listener: (pcm16: Int16Array) => void) {
    const bytes = readFileSync(${JSON.stringify(pcmFile)});
    const pcm = new Int16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >> 1);
    for (let at = 0; at < pcm.length; at += 320) listener(pcm.subarray(at, at + 320));
    session.onMessage = (message) => message.type === "finalized" && session.close();
    session.finalize();
  },
};
${example
  .replace('"@relay-translate/client"', JSON.stringify(sdk))
  .replace('"https://translate.example.com"', "process.env.RELAY_SERVER")}`;
  const file = path.join(dir, "readme-example.mts");
  await writeFile(file, program);
  const { stdout } = await promisify(execFile)(process.execPath, ["--import", "tsx", file], {
    cwd: PROJECT_ROOT,
    env: { ...process.env, RELAY_SERVER: server.baseUrl, RELAY_API_KEY: API_KEY },
  });
  return stdout;
}

describe.skipIf(SKIP)("the SDK README's first example", () => {
  it("prints each utterance's translation once, on one line, however many growing finals it had", async () => {
    // A reading with long utterances: in finalizeMode "stable" each comes as several finals.
    const clip = await readWavAsPcm16(sharedPath("data/speech/misc/librispeech-1995-1837-0001.wav"));
    const pcmFile = path.join(dir, "reading.pcm");
    await writeFile(pcmFile, new Uint8Array(clip.buffer, clip.byteOffset, clip.byteLength));
    const lines = (await readmeExample(pcmFile)).split("\n").filter((line) => line.trim());
    expect(lines.length).toBeGreaterThan(0);
    // No line is an earlier, shorter version of a later one.
    for (const [i, line] of lines.entries())
      for (const later of lines.slice(i + 1)) expect(later.startsWith(line)).toBe(false);
  });
});

describe("the SDK when the service cannot be reached", () => {
  it("names the URL and the network's reason, keeping fetch's error as the cause", async () => {
    const origin = `127.0.0.1:${await freePort()}`;
    const open = await RealtimeSession.open({ baseUrl: `http://${origin}`, apiKey: API_KEY }).catch(
      (e: unknown) => e,
    );
    expect(open).toBeInstanceOf(ConnectionError);
    expect(open).toBeInstanceOf(TypeError);
    expect((open as ConnectionError).message).toBe(`cannot reach http://${origin}/v1/session: ECONNREFUSED`);
    expect((open as ConnectionError).cause).toMatchObject({ name: "TypeError", message: "fetch failed" });

    const connect = await RealtimeSession.connect(`ws://${origin}/v1/ws?token=secret`).catch(
      (e: unknown) => e,
    );
    expect(connect).toBeInstanceOf(ConnectionError);
    expect((connect as ConnectionError).message).toBe(`cannot connect to ws://${origin}/v1/ws: ECONNREFUSED`);
    expect((connect as ConnectionError).cause).toMatchObject({ code: "ECONNREFUSED" });

    const dubbing = new DubbingClient(`http://${origin}`, API_KEY);
    await expect(dubbing.job("job-1")).rejects.toThrow(
      `cannot reach http://${origin}/api/dubbing/jobs/job-1: ECONNREFUSED`,
    );
  });
});

/**
 * A server that is not quite relay: it accepts sessions as relay does (`ready`, then a
 * `metadata_ack` for the SDK's empty `update_metadata`) and runs `misbehave` on the client's next
 * message, or on connection when `beforeReady`. `closedWith` has the close codes it was sent.
 */
async function misbehavingServer(
  misbehave: (socket: WebSocket) => void,
  beforeReady = false,
): Promise<{ url: string; closedWith: number[]; close: () => Promise<void> }> {
  const server = new WebSocketServer({ host: "127.0.0.1", port: 0 });
  await new Promise((resolve) => server.once("listening", resolve));
  const closedWith: number[] = [];
  server.on("connection", (socket) => {
    socket.on("close", (code) => closedWith.push(code));
    if (beforeReady) return misbehave(socket);
    socket.send(JSON.stringify({ type: "ready", session_id: "s-1", worker_id: "w-1" }));
    socket.once("message", () => {
      socket.send(JSON.stringify({ type: "metadata_ack", applied: {} }));
      socket.once("message", () => misbehave(socket));
    });
  });
  const { port } = server.address() as { port: number };
  return {
    url: `ws://127.0.0.1:${port}/v1/ws?token=secret`,
    closedWith,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

describe("the SDK when the server breaks the protocol", () => {
  it("rejects connect() with a ProtocolError showing the frame when the first frame is not a relay message", async () => {
    const server = await misbehavingServer(
      (socket) => socket.send("<html><body>502 Bad Gateway</body></html>"),
      true,
    );
    const error = await RealtimeSession.connect(server.url).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProtocolError);
    expect((error as ProtocolError).message).toBe(
      `${server.url.split("?")[0]} sent a frame that is not a relay message: "<html><body>502 Bad Gateway</body></html>"`,
    );
    await expect.poll(() => server.closedWith).toEqual([1002]);
    await server.close();
  });

  it("reports frames that are not relay messages on onError and goes on with the session", async () => {
    const server = await misbehavingServer((socket) => {
      socket.send("not json");
      socket.send("null");
      socket.send(JSON.stringify({ type: "notice", code: "c", message: "still here", timestamp: 1 }));
    });
    const session = await RealtimeSession.connect(server.url);
    const errors: ProtocolError[] = [];
    session.onError = (error) => errors.push(error);
    session.finalize();
    expect(await session.next()).toMatchObject({ type: "notice", message: "still here" });
    expect(errors.map((error) => error.message)).toEqual([
      expect.stringMatching(/sent a frame that is not a relay message: "not json"$/u),
      expect.stringMatching(/sent a frame that is not a relay message: "null"$/u),
    ]);
    expect(session.isOpen).toBe(true);
    session.close();
    await session.closed;
    await server.close();
  });

  it("closes the socket (1009 to the server) on a frame over MAX_FRAME_BYTES instead of taking it", async () => {
    // 64 MiB: what a server, or whatever answers in its place, could make a client hold.
    const server = await misbehavingServer((socket) => socket.send(Buffer.alloc(64 << 20)));
    const session = await RealtimeSession.connect(server.url);
    const errors: ProtocolError[] = [];
    session.onError = (error) => errors.push(error);
    let audio = 0;
    session.onAudio = (samples) => (audio += samples.length);
    session.finalize();
    await session.closed;
    expect(audio).toBe(0);
    expect(errors.map((error) => error.message)).toEqual([
      `${server.url.split("?")[0]} sent a frame over MAX_FRAME_BYTES (${MAX_FRAME_BYTES} bytes)`,
    ]);
    await expect.poll(() => server.closedWith).toEqual([1009]);
    await server.close();
  });
});
