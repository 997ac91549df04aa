/**
 * The plugin as an agents-js program uses it, in process, against the real relay service (real
 * engines, real speech from ../shared/data): STT streams driven through the agents' SpeechStream
 * (frames in at 48 kHz, events out), TTS through SynthesizeStream and ChunkedStream (text in,
 * AudioFrames out), the failures the agents' own plugins handle (a refused key, a socket dropped
 * mid-stream, a stream closed early), and the translator in a room whose LiveKit parts are stood in
 * (no LiveKit server can run here).
 */
import { EventEmitter } from "node:events";
import { createServer as createHttpServer } from "node:http";
import { createServer, Socket, type Server } from "node:net";
import { ReadableStream } from "node:stream/web";
import { APIStatusError, initializeLogger, log, stt, tts } from "@livekit/agents";

/** What the agents' STT and TTS emit on `error` (not exported by name). */
type STTError = Parameters<stt.STTCallbacks["error"]>[0];
type TTSError = Parameters<tts.TTSCallbacks["error"]>[0];
import * as rtc from "@livekit/rtc-node";
import { AudioFrame, AudioResampler } from "@livekit/rtc-node";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { WebSocketServer } from "ws";
import { readWavAsPcm16 } from "../../../../src/audio/wav.js";
import { API_KEY, startServer, type TestServer } from "../../../../test/support/server.js";
import { sharedMissing, sharedPath } from "../../../../test/support/shared.js";
import * as relay from "../../src/index.js";
import { WAIT } from "../../../../test/support/wait.js";

const SPEECH_MISSING = sharedMissing("data/speech/librivox-pocketsphinx/goforward.wav");
const GO_FORWARD = "go forward ten meters";

/** A TCP relay to the service whose open connections the test can cut: a network that drops. */
class CuttableProxy {
  private readonly sockets = new Set<Socket>();
  private server: Server | undefined;
  port = 0;
  /** Connections accepted so far. */
  connections = 0;

  async start(target: number): Promise<void> {
    this.server = createServer((client) => {
      this.connections++;
      const upstream = new Socket();
      upstream.connect(target, "127.0.0.1");
      for (const socket of [client, upstream]) {
        this.sockets.add(socket);
        socket.on("close", () => this.sockets.delete(socket));
        socket.on("error", () => undefined);
      }
      client.pipe(upstream).pipe(client);
      client.on("close", () => upstream.destroy());
      upstream.on("close", () => client.destroy());
    });
    await new Promise<void>((resolve) => this.server!.listen(0, "127.0.0.1", resolve));
    this.port = (this.server.address() as { port: number }).port;
  }

  cut(): void {
    for (const socket of this.sockets) socket.destroy();
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise((resolve) => this.server?.close(resolve));
  }
}

let server: TestServer;
let proxy: CuttableProxy;
let pcm16k: Int16Array;
/** goforward.wav as a WebRTC track delivers it: 48 kHz, 10 ms frames (the STT resamples them). */
let frames48k: AudioFrame[];

beforeAll(async () => {
  initializeLogger({ pretty: false, level: "error" });
  // No PUBLIC_BASE_URL: a session's ws_url names the host it was asked at, so sessions created
  // through the proxy have their sockets through it too.
  server = await startServer({ MAX_SESSIONS: "16", PUBLIC_BASE_URL: "" });
  proxy = new CuttableProxy();
  await proxy.start(Number(new URL(server.baseUrl).port));
  if (SPEECH_MISSING) return;
  pcm16k = await readWavAsPcm16(sharedPath("data/speech/librivox-pocketsphinx/goforward.wav"));
  const resampler = new AudioResampler(16_000, 48_000, 1);
  const upsampled = [
    ...resampler.push(new AudioFrame(pcm16k, 16_000, 1, pcm16k.length)),
    ...resampler.flush(),
  ];
  resampler.close();
  const all = Int16Array.from(upsampled.flatMap((frame) => [...frame.data]));
  frames48k = [];
  for (let i = 0; i + 480 <= all.length; i += 480)
    frames48k.push(new AudioFrame(all.slice(i, i + 480), 48_000, 1, 480));
});
afterAll(async () => {
  await proxy?.close();
  await server?.close();
});

/** 500 ms of silence at 48 kHz: what a track sends after the speaker stops. */
const silence = () => Array.from({ length: 50 }, () => new AudioFrame(new Int16Array(480), 48_000, 1, 480));

/** Reads a speech stream until END_OF_SPEECH, then ends its input and reads the rest. */
async function eventsOf(stream: stt.SpeechStream, frames: AudioFrame[]): Promise<stt.SpeechEvent[]> {
  for (const frame of frames) stream.pushFrame(frame);
  const events: stt.SpeechEvent[] = [];
  for await (const event of stream) {
    events.push(event);
    if (event.type === stt.SpeechEventType.END_OF_SPEECH) stream.endInput();
  }
  return events;
}

const texts = (events: stt.SpeechEvent[], type: stt.SpeechEventType) =>
  events.filter((event) => event.type === type).map((event) => event.alternatives![0].text);

async function liveSessions(): Promise<number> {
  const health = (await (await fetch(`${server.baseUrl}/healthz`)).json()) as { sessions: { live: number } };
  return health.sessions.live;
}

describe.skipIf(SPEECH_MISSING)("relay.STT through the agents' SpeechStream", () => {
  it("turns 48 kHz frames into start, interim, final and end-of-speech events with the language and times", async () => {
    const recognizer = new relay.STT({ baseUrl: server.baseUrl, apiKey: API_KEY });
    expect(recognizer.capabilities).toMatchObject({
      streaming: true,
      interimResults: true,
      diarization: false,
    });
    const events = await eventsOf(recognizer.stream(), [...frames48k, ...silence()]);

    const types = events.map((event) => event.type);
    expect(types[0]).toBe(stt.SpeechEventType.START_OF_SPEECH);
    expect(types.at(-1)).toBe(stt.SpeechEventType.END_OF_SPEECH);
    expect(types).toContain(stt.SpeechEventType.INTERIM_TRANSCRIPT);
    // Finals add to each other (agents appends them to the user's turn); end of speech joins them.
    const finals = texts(events, stt.SpeechEventType.FINAL_TRANSCRIPT);
    expect(finals.join(" ")).toBe(GO_FORWARD);
    expect(texts(events, stt.SpeechEventType.END_OF_SPEECH)).toEqual([GO_FORWARD]);
    const last = events.filter((e) => e.type === stt.SpeechEventType.FINAL_TRANSCRIPT).at(-1)!
      .alternatives![0];
    expect(last.language).toBe("en");
    // relay-1 sends no times: these are the audio sent by the time the transcripts came.
    expect(last.endTime).toBeGreaterThanOrEqual(last.startTime);
    expect(last.speakerId).toBeUndefined();
    await recognizer.close();
  });

  it("labels the speaker on relay-2 and recognizes a whole buffer with recognize()", async () => {
    const recognizer = new relay.STT({ baseUrl: server.baseUrl, apiKey: API_KEY, model: "relay-2" });
    expect(recognizer.capabilities.diarization).toBe(true);
    const events = await eventsOf(recognizer.stream(), [...frames48k, ...silence()]);
    const finals = events.filter((event) => event.type === stt.SpeechEventType.FINAL_TRANSCRIPT);
    expect(finals.map((event) => event.alternatives![0].text).join(" ")).toBe(GO_FORWARD);
    expect(new Set(finals.map((event) => event.alternatives![0].speakerId))).toEqual(new Set(["1"]));
    // relay-2's utterance times: where the words are in the audio sent.
    const last = finals.at(-1)!.alternatives![0];
    expect(last.startTime).toBeGreaterThanOrEqual(0);
    expect(last.endTime).toBeGreaterThan(last.startTime + 0.5);
    expect(last.endTime).toBeLessThanOrEqual(pcm16k.length / 16_000 + 0.1);

    const whole = await new relay.STT({ baseUrl: server.baseUrl, apiKey: API_KEY }).recognize(frames48k);
    expect(whole.type).toBe(stt.SpeechEventType.FINAL_TRANSCRIPT);
    expect(whole.alternatives![0].text).toBe(GO_FORWARD);
  });

  it("sends keywords and the session's keyterms as context, live to an open stream", async () => {
    const recognizer = new relay.STT({
      baseUrl: server.baseUrl,
      apiKey: API_KEY,
      context: "A robot drill.",
      keywords: ["Kubernetes"],
    });
    expect(recognizer.sessionParams).toMatchObject({
      sourceLanguage: "en",
      targetLanguage: "en",
      audioOutputEnabled: false,
      context: "A robot drill.\nKubernetes",
    });
    const stream = recognizer.stream();
    const changed = vi.spyOn(stream, "updateContext");
    recognizer._updateSessionKeyterms(["meters", "Kubernetes"]);
    expect(changed).toHaveBeenCalledWith("A robot drill.\nKubernetes, meters");
    // 60 keywords: past relay's 50 terms, a notice (logged), never an error that ends the stream.
    recognizer.updateOptions({ keywords: Array.from({ length: 60 }, (_, i) => `Term${i}`) });
    const events = await eventsOf(stream, [...frames48k, ...silence()]);
    expect(texts(events, stt.SpeechEventType.END_OF_SPEECH)).toEqual([GO_FORWARD]);
  });

  it("reconnects when the socket drops mid-stream and goes on recognizing", async () => {
    const recognizer = new relay.STT({ baseUrl: `http://127.0.0.1:${proxy.port}`, apiKey: API_KEY });
    const errors: unknown[] = [];
    recognizer.on("error", (error) => errors.push(error));
    const stream = recognizer.stream({
      connOptions: { maxRetry: 3, retryIntervalMs: 100, timeoutMs: 10_000 },
    });
    // Speech, then the network drops before relay has finished the utterance…
    const collected: stt.SpeechEvent[] = [];
    let cut = false;
    const reading = (async () => {
      for await (const event of stream) {
        collected.push(event);
        if (event.type === stt.SpeechEventType.END_OF_SPEECH && cut) stream.endInput();
      }
    })();
    for (const frame of frames48k.slice(0, 100)) stream.pushFrame(frame);
    await vi.waitFor(() => expect(collected.length).toBeGreaterThan(0), { ...WAIT, interval: 50 });
    const connections = proxy.connections;
    proxy.cut();
    cut = true;
    // Audio sent before the drop is noticed is lost with the socket. Once the stream has a new
    // session (its request and its socket through the proxy), the whole utterance is said again.
    await vi.waitFor(() => expect(proxy.connections).toBeGreaterThanOrEqual(connections + 2), {
      ...WAIT,
      interval: 20,
    });
    for (const frame of [...frames48k, ...silence()]) stream.pushFrame(frame);
    await reading;
    expect(errors).toEqual([]);
    expect(texts(collected, stt.SpeechEventType.END_OF_SPEECH)).toEqual([GO_FORWARD]);
  });

  it("reports a refused key as a non-retryable error naming the service and relay's message", async () => {
    const recognizer = new relay.STT({ baseUrl: server.baseUrl, apiKey: "not-a-key" });
    const errors: STTError[] = [];
    recognizer.on("error", (error) => errors.push(error));
    const stream = recognizer.stream();
    stream.pushFrame(frames48k[0]!);
    const events: stt.SpeechEvent[] = [];
    for await (const event of stream) events.push(event);
    expect(events).toEqual([]);
    expect(errors).toHaveLength(1);
    expect(errors[0]!.recoverable).toBe(false);
    expect(errors[0]!.error).toBeInstanceOf(APIStatusError);
    expect((errors[0]!.error as APIStatusError).statusCode).toBe(401);
    expect(errors[0]!.error.message).toMatch(
      new RegExp(
        `^relay\\.SpeechStream: ${server.baseUrl} refused the session \\(HTTP 401 unauthorized\\): .+`,
      ),
    );
    expect(() => new relay.STT({ baseUrl: server.baseUrl, apiKey: "" })).toThrow(/RELAY_API_KEY/u);
  });

  it("closes its relay session when the stream is closed early, with no error", async () => {
    const recognizer = new relay.STT({ baseUrl: server.baseUrl, apiKey: API_KEY });
    const errors: unknown[] = [];
    recognizer.on("error", (error) => errors.push(error));
    const stream = recognizer.stream();
    for (const frame of frames48k.slice(0, 50)) stream.pushFrame(frame);
    await vi.waitFor(async () => expect(await liveSessions()).toBe(1), { ...WAIT, interval: 50 });
    stream.close();
    const after: stt.SpeechEvent[] = [];
    for await (const event of stream) after.push(event);
    expect(() => stream.pushFrame(frames48k[0]!)).toThrow(/closed/u);
    await vi.waitFor(async () => expect(await liveSessions()).toBe(0), { ...WAIT, interval: 50 });
    expect(errors).toEqual([]);
  });
});

/**
 * A relay that answers like relay except for one frame: `GET /v1/session`, then a session that
 * answers the first audio with a frame that is not JSON and then a final transcript, and
 * `finalize` with `finalized`.
 */
async function relayWithABadFrame(): Promise<{ baseUrl: string; close: () => Promise<void> }> {
  const http = createHttpServer((request, response) => {
    const { port } = http.address() as { port: number };
    response.setHeader("content-type", "application/json");
    response.end(
      JSON.stringify({
        session_id: "s-1",
        ws_url: `ws://127.0.0.1:${port}/v1/ws?token=t`,
        expires_in: 60,
        model_version_id: "relay-1/fake",
      }),
    );
    request.resume();
  });
  const sockets = new WebSocketServer({ server: http });
  sockets.on("connection", (socket) => {
    socket.send(JSON.stringify({ type: "ready", session_id: "s-1", worker_id: "w-1" }));
    let heard = false;
    socket.on("message", (data, isBinary) => {
      if (isBinary) {
        if (heard) return;
        heard = true;
        socket.send("<html>502 Bad Gateway</html>");
        const transcript = {
          type: "original_transcript",
          text: "hello there",
          correlation_id: "c-1",
          is_final: true,
          source_language: "en",
          target_language: "en",
          detected_language: "en",
          timestamp: 1,
        };
        return socket.send(JSON.stringify(transcript));
      }
      const { type } = JSON.parse(String(data)) as { type: string };
      if (type === "update_metadata") socket.send(JSON.stringify({ type: "metadata_ack", applied: {} }));
      if (type === "finalize") socket.send(JSON.stringify({ type: "finalized", timestamp: 2 }));
    });
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  const { port } = http.address() as { port: number };
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    close: () => new Promise((resolve) => sockets.close(() => http.close(() => resolve()))),
  };
}

describe("relay.STT when relay's socket carries a frame that is not relay's", () => {
  it("logs it and goes on: the stream's transcripts still come, nothing ends the process", async () => {
    const fake = await relayWithABadFrame();
    const warn = vi.spyOn(log(), "warn");
    const recognizer = new relay.STT({ baseUrl: fake.baseUrl, apiKey: API_KEY });
    const errors: unknown[] = [];
    recognizer.on("error", (error) => errors.push(error));
    const stream = recognizer.stream();
    // 200 ms: enough for the agents' resampler to hand some on.
    for (let i = 0; i < 20; i++) stream.pushFrame(new AudioFrame(new Int16Array(480), 48_000, 1, 480));
    const events: stt.SpeechEvent[] = [];
    for await (const event of stream) {
      events.push(event);
      if (event.type === stt.SpeechEventType.END_OF_SPEECH) stream.endInput();
    }
    expect(texts(events, stt.SpeechEventType.FINAL_TRANSCRIPT)).toEqual(["hello there"]);
    expect(errors).toEqual([]);
    expect(warn).toHaveBeenCalledWith(
      expect.stringMatching(
        /^relay\.SpeechStream: ws:\/\/127\.0\.0\.1:\d+\/v1\/ws sent a frame that is not a relay message: "<html>502 Bad Gateway<\/html>"$/u,
      ),
    );
    warn.mockRestore();
    await fake.close();
  });
});

/** Reads a TTS stream to its end: the frames, and where END_OF_STREAM came. */
async function drain(
  stream: AsyncIterable<tts.SynthesizedAudio | typeof tts.SynthesizeStream.END_OF_STREAM>,
) {
  const items: (tts.SynthesizedAudio | "end")[] = [];
  for await (const item of stream) {
    items.push(item === tts.SynthesizeStream.END_OF_STREAM ? "end" : item);
    if (item === tts.SynthesizeStream.END_OF_STREAM) break;
  }
  return items;
}

const rms = (frames: AudioFrame[]) => {
  let sum = 0;
  let count = 0;
  for (const frame of frames)
    for (const sample of frame.data) {
      sum += sample * sample;
      count++;
    }
  return Math.sqrt(sum / Math.max(1, count));
};

describe("relay.TTS through the agents' SynthesizeStream and ChunkedStream", () => {
  it("speaks streamed text sentence by sentence: 24 kHz frames, one final per flushed segment, then END_OF_STREAM", async () => {
    const speaker = new relay.TTS({ baseUrl: server.baseUrl, apiKey: API_KEY, voiceType: "female" });
    expect(speaker.sampleRate).toBe(24_000);
    expect(speaker.numChannels).toBe(1);
    const stream = speaker.stream();
    // Text as an LLM streams it: pieces that cut words, two sentences, a flush, one more, the end.
    for (const piece of ["Good morn", "ing, every", "one. The meeting starts ", "in five minutes."])
      stream.pushText(piece);
    stream.flush();
    stream.pushText("Thank you for waiting.");
    stream.endInput();
    const items = await drain(stream);

    expect(items.at(-1)).toBe("end");
    const audio = items.filter((item): item is tts.SynthesizedAudio => item !== "end");
    expect(audio.length).toBeGreaterThan(10);
    for (const { frame } of audio) {
      expect(frame.sampleRate).toBe(24_000);
      expect(frame.channels).toBe(1);
    }
    // One final per segment; 100 ms frames, but the last of each spoken sentence.
    const finals = audio.filter((item) => item.final);
    expect(finals).toHaveLength(2);
    expect(audio.at(-1)!.final).toBe(true);
    expect(audio.every((item) => item.frame.samplesPerChannel <= 2400)).toBe(true);
    const short = audio.filter((item) => item.frame.samplesPerChannel < 2400);
    expect(short.length).toBeLessThanOrEqual(3);
    expect(new Set(audio.map((item) => item.segmentId)).size).toBe(2);
    expect(rms(audio.map((item) => item.frame))).toBeGreaterThan(300);
    // Two segments' worth of speech: several seconds.
    const seconds = audio.reduce((sum, item) => sum + item.frame.samplesPerChannel, 0) / 24_000;
    expect(seconds).toBeGreaterThan(3);
  });

  it("speaks one text with synthesize(), by voice id, its last frame final", async () => {
    const speaker = new relay.TTS({ baseUrl: server.baseUrl, apiKey: API_KEY, voice: 12 });
    const audio: tts.SynthesizedAudio[] = [];
    for await (const item of speaker.synthesize("This line is spoken in one piece.")) audio.push(item);
    expect(audio.length).toBeGreaterThan(5);
    expect(audio.filter((item) => item.final)).toEqual([audio.at(-1)]);
    expect(rms(audio.map((item) => item.frame))).toBeGreaterThan(300);
  });

  it("reports a refused key, and a voice relay does not have, naming the service and relay's message", async () => {
    const refusedKey = new relay.TTS({ baseUrl: server.baseUrl, apiKey: "not-a-key" });
    const errors: TTSError[] = [];
    refusedKey.on("error", (error) => errors.push(error));
    const stream = refusedKey.stream();
    stream.pushText("Hello.");
    stream.endInput();
    expect(await drain(stream)).toEqual([]);
    expect(errors.map((error) => [error.recoverable, (error.error as APIStatusError).statusCode])).toEqual([
      [false, 401],
    ]);

    const unknownVoice = new relay.TTS({ baseUrl: server.baseUrl, apiKey: API_KEY, voice: 9999 });
    const voiceErrors: TTSError[] = [];
    unknownVoice.on("error", (error) => voiceErrors.push(error));
    const chunked = unknownVoice.synthesize("Hello.");
    await expect(
      (async () => {
        for await (const item of chunked) void item;
      })(),
    ).resolves.toBeUndefined();
    expect(voiceErrors).toHaveLength(1);
    expect(voiceErrors[0]!.error.message).toMatch(
      new RegExp(`^relay\\.ChunkedStream: ${server.baseUrl} cannot serve this session: .*voiceId`, "u"),
    );
  });
});

/** The LiveKit side of a room, stood in: a remote participant's microphone and what is published. */
class StandInRoom extends EventEmitter {
  readonly remoteParticipants = new Map<string, unknown>();
  readonly published: { name: string; sid: string }[] = [];
  readonly unpublished: string[] = [];
  readonly texts: { text: string; topic?: string; attributes?: Record<string, string> }[] = [];
  readonly localParticipant = {
    identity: "agent",
    publishTrack: async (track: { name: string }) => {
      const sid = `TR_out_${this.published.length}`;
      this.published.push({ name: track.name, sid });
      return { sid };
    },
    unpublishTrack: async (sid: string) => void this.unpublished.push(sid),
    sendText: async (text: string, options: { topic?: string; attributes?: Record<string, string> }) => {
      this.texts.push({ text, ...options });
      return {};
    },
  };
}

describe.skipIf(SPEECH_MISSING)("relay.Translator in a room", () => {
  it("translates a participant's microphone into a track of their own, with transcripts to the room", async () => {
    // What a native source is handed is recorded (it would pace it into a LiveKit track).
    const captured: AudioFrame[] = [];
    class RecordingSource {
      async captureFrame(frame: AudioFrame) {
        captured.push(frame);
      }
      async close() {}
    }
    class TrackStream extends ReadableStream<AudioFrame> {
      constructor(track: { frames: AudioFrame[] }, options: { sampleRate: number }) {
        expect(options.sampleRate).toBe(16_000);
        let i = 0;
        super({
          pull(controller) {
            // The participant speaks, then stays on the line in silence.
            const frame = track.frames[i++] ?? new AudioFrame(new Int16Array(160), 16_000, 1, 160);
            controller.enqueue(frame);
            return new Promise((resolve) => setTimeout(resolve, i < track.frames.length ? 0 : 10));
          },
        });
      }
    }
    const standIns = {
      ...rtc,
      AudioSource: RecordingSource,
      AudioStream: TrackStream,
      LocalAudioTrack: { createAudioTrack: (name: string) => ({ name }) },
    } as unknown as typeof rtc;
    const translator = new relay.Translator(
      { baseUrl: server.baseUrl, apiKey: API_KEY, targetLanguage: "es" },
      { rtc: standIns },
    );
    const transcripts: relay.RoomTranscript[] = [];
    translator.on("transcript", (transcript) => transcripts.push(transcript));
    const room = new StandInRoom();
    translator.start(room as unknown as rtc.Room);

    const micFrames: AudioFrame[] = [];
    for (let i = 0; i + 160 <= pcm16k.length; i += 160)
      micFrames.push(new AudioFrame(pcm16k.slice(i, i + 160), 16_000, 1, 160));
    const alice = { identity: "alice", kind: rtc.ParticipantKind.STANDARD, trackPublications: new Map() };
    const bot = { identity: "bot", kind: rtc.ParticipantKind.AGENT, trackPublications: new Map() };
    const mic = { sid: "TR_alice", source: rtc.TrackSource.SOURCE_MICROPHONE };
    for (const who of [bot, alice])
      room.emit(
        rtc.RoomEvent.TrackSubscribed,
        { kind: rtc.TrackKind.KIND_AUDIO, frames: micFrames },
        mic,
        who,
      );

    await vi.waitFor(
      () =>
        expect(
          transcripts.some(
            (t) => t.type === "translated_transcript" && t.is_final && t.original_text === GO_FORWARD,
          ),
        ).toBe(true),
      { ...WAIT, interval: 50 },
    );
    // Only alice is translated (an agent is not), on her own track.
    expect(room.published).toEqual([{ name: "translated-audio-alice", sid: "TR_out_0" }]);
    // Finals of a segment extend each other; the room gets each under the segment's id.
    const original = transcripts.filter((t) => t.type === "original_transcript" && t.is_final).at(-1)!;
    expect(original).toMatchObject({ participant: "alice", text: GO_FORWARD });
    const finals = room.texts.filter((text) => text.topic === "lk.transcription");
    expect(finals.find((text) => text.text === GO_FORWARD)).toMatchObject({
      text: GO_FORWARD,
      attributes: {
        "lk.transcription_final": "true",
        "lk.transcribed_track_id": "TR_alice",
        language: "en",
        "relay.participant": "alice",
        "relay.kind": "original",
      },
    });
    await vi.waitFor(() => expect(room.texts.some((t) => t.attributes?.["language"] === "es")).toBe(true), {
      ...WAIT,
      interval: 50,
    });
    // Translated speech reached the track's source: 100 ms frames at 24 kHz, not silence.
    await vi.waitFor(() => expect(captured.length).toBeGreaterThan(5), { ...WAIT, interval: 50 });
    expect(captured.every((frame) => frame.sampleRate === 24_000)).toBe(true);
    expect(rms(captured)).toBeGreaterThan(300);

    // She leaves: her session ends and her track is unpublished.
    room.emit(rtc.RoomEvent.ParticipantDisconnected, alice);
    await vi.waitFor(() => expect(room.unpublished).toEqual(["TR_out_0"]), { ...WAIT, interval: 50 });
    await vi.waitFor(async () => expect(await liveSessions()).toBe(0), { ...WAIT, interval: 50 });
    await translator.close();
  });
});
