/**
 * The SDK (@relay-translate/client, packages/client) in Node against the real service: a
 * session's messages by async iteration with typed narrowing, translated speech through onAudio,
 * the bounded buffer, text to speech, and the dubbing client from upload to subtitles.
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readWavAsPcm16 } from "../../src/audio/wav.js";
import { DubbingClient, HttpError, RealtimeSession, type ServerMessage } from "@relay-translate/client";
import { makeTestVideo } from "../support/media.js";
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
}, 60_000);
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
    expect(seen).toContain("speak_ack");
    expect(samples).toBeGreaterThan(0);
    session.close();
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
  }, 120_000);
});
