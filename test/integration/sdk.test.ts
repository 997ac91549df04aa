/**
 * The SDK (@relay-translate/client, packages/client) in Node against the real service: a
 * session's messages by async iteration with typed narrowing, translated speech through onAudio,
 * the bounded buffer, text to speech, a session refused at its start, the dubbing client from
 * upload to subtitles, and what a client that cannot reach the service is told.
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readWavAsPcm16 } from "../../src/audio/wav.js";
import {
  ConnectionError,
  createSession,
  DubbingClient,
  HttpError,
  RealtimeSession,
  SessionError,
  type ServerMessage,
} from "@relay-translate/client";
import { makeTestVideo } from "../support/media.js";
import { freePort } from "../support/ports.js";
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
    await expect.poll(() => audioSamples, { timeout: 10_000 }).toBeGreaterThan(24_000 * 0.5);
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
