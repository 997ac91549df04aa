import { spawn } from "node:child_process";
import { EventEmitter } from "node:events";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { createServer as createTcpServer, type Socket } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { TokenVerifier, type ClaimGrants } from "livekit-server-sdk";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import {
  createLiveKitBackend,
  roomServiceUrl,
  type LiveKitOptions,
} from "../../src/rooms/livekit/backend.js";
import type { AudioFrame, AudioSource, LocalAudioTrack, Room } from "@livekit/rtc-node";
import { connectLiveKitRoom, LiveKitConnection, type Rtc } from "../../src/rooms/livekit/connection.js";
import type { RoomBackend, RoomEvent, RoomLanguages, SpeechOutput } from "../../src/rooms/types.js";
import { freePort } from "../support/ports.js";
import { PROJECT_ROOT } from "../support/run-script.js";
import { WAIT } from "../support/wait.js";

/**
 * The LiveKit back-end against what can run here: no LiveKit server can (no binaries, no network),
 * so a local HTTP server plays LiveKit's Twirp room service and records what it is sent, and the
 * translator's join is tried against it (it is no signalling server), a closed port and a silent one.
 */

const API_KEY = "APItestkey";
const API_SECRET = "test-secret-with-enough-entropy-0123456789";
const verifier = new TokenVerifier(API_KEY, API_SECRET);
/** A spec room (en → es): its target's speech is the track `translated-audio`. */
const ROOM: RoomLanguages = { languages: ["en", "es"], pair: { source: "en", target: "es", twoWay: false } };
const SPANISH: SpeechOutput = { language: "es", track: "translated-audio", listeners: [] };
const GERMAN: SpeechOutput = { language: "de", track: "translated-audio-de", listeners: [] };

interface Recorded {
  readonly method: string;
  readonly path: string;
  readonly contentType: string | undefined;
  readonly authorization: string | undefined;
  readonly body: string;
}

/** A stand-in for LiveKit's HTTP side: the Twirp room service, and a 404 for anything else. */
class FakeLiveKit {
  readonly requests: Recorded[] = [];
  readonly rooms = new Set<string>();
  /** When set, room-service calls answer with this Twirp error. */
  failWith: { status: number; code: string; msg: string } | undefined;
  private server: Server | undefined;
  port = 0;

  async start(): Promise<void> {
    this.server = createServer((request, response) => {
      void this.handle(request).then(({ status, body }) => {
        response.writeHead(status, { "content-type": "application/json" });
        response.end(JSON.stringify(body));
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, "127.0.0.1", resolve));
    this.port = (this.server.address() as { port: number }).port;
  }

  get url(): string {
    return `ws://127.0.0.1:${this.port}`;
  }

  private async handle(request: IncomingMessage): Promise<{ status: number; body: unknown }> {
    let body = "";
    for await (const chunk of request) body += String(chunk);
    const path = request.url ?? "";
    this.requests.push({
      method: request.method ?? "",
      path,
      contentType: request.headers["content-type"],
      authorization: request.headers.authorization,
      body,
    });
    if (!path.startsWith("/twirp/livekit.RoomService/")) {
      return { status: 404, body: { msg: "not a LiveKit signalling server" } };
    }
    if (this.failWith) {
      return { status: this.failWith.status, body: { code: this.failWith.code, msg: this.failWith.msg } };
    }
    const request_ = JSON.parse(body) as Record<string, unknown>;
    if (path.endsWith("/CreateRoom")) {
      const name = String(request_["name"]);
      this.rooms.add(name);
      return {
        status: 200,
        body: { ...request_, sid: "RM_fake", creationTime: String(Math.floor(Date.now() / 1000)) },
      };
    }
    if (path.endsWith("/DeleteRoom")) {
      if (!this.rooms.delete(String(request_["room"]))) {
        return { status: 404, body: { code: "not_found", msg: "requested room does not exist" } };
      }
      return { status: 200, body: {} };
    }
    return { status: 404, body: { code: "bad_route", msg: "no such method" } };
  }

  twirpCalls(method: string): Recorded[] {
    return this.requests.filter((r) => r.path === `/twirp/livekit.RoomService/${method}`);
  }

  async close(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve));
  }
}

function options(url: string, overrides: Partial<LiveKitOptions> = {}): LiveKitOptions {
  return {
    url,
    apiKey: API_KEY,
    apiSecret: API_SECRET,
    tokenTtlSec: 900,
    emptyTimeoutSec: 120,
    maxParticipants: 6,
    ...overrides,
  };
}

function bearer(recorded: Recorded): string {
  expect(recorded.authorization).toMatch(/^Bearer \S+$/);
  return recorded.authorization!.slice("Bearer ".length);
}

/** Whether `promise` settles within `ms` (a test that would otherwise hang fails fast instead). */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  return Promise.race([
    promise.then(
      () => true,
      () => true,
    ),
    sleep(ms).then(() => false),
  ]);
}

async function timed<T>(promise: Promise<T>): Promise<{ ms: number; error: Error | undefined }> {
  const started = Date.now();
  try {
    await promise;
    return { ms: Date.now() - started, error: undefined };
  } catch (error) {
    return { ms: Date.now() - started, error: error as Error };
  }
}

let fake: FakeLiveKit;
let backend: RoomBackend;

beforeAll(async () => {
  fake = new FakeLiveKit();
  await fake.start();
  backend = createLiveKitBackend(options(fake.url));
});
afterAll(async () => {
  await backend?.close();
  await fake?.close();
});
beforeEach(() => {
  fake.requests.length = 0;
  fake.failWith = undefined;
});

describe("createRoom and clientAccess", () => {
  it("creates the room through the Twirp room service with its limits and a roomCreate token", async () => {
    expect(backend.kind).toBe("livekit");
    await backend.createRoom("api-room1", ROOM);
    const access = await backend.clientAccess(
      "api-room1",
      { identity: "client-1" },
      "http://ignored.example",
    );
    expect(access.url).toBe(fake.url);
    // Further participants' access needs no room-service call.
    await backend.clientAccess("api-room1", { identity: "client-1b" }, "http://ignored.example");

    const [call, ...more] = fake.twirpCalls("CreateRoom");
    expect(more).toHaveLength(0);
    expect(call!.method).toBe("POST");
    expect(call!.contentType).toMatch(/^application\/json/);
    expect(JSON.parse(call!.body)).toEqual({
      name: "api-room1",
      emptyTimeout: 120,
      departureTimeout: 20,
      maxParticipants: 6,
    });
    const claims = await verifier.verify(bearer(call!));
    expect(claims.video?.roomCreate).toBe(true);
    expect(claims.video?.roomJoin).toBeFalsy();
  });

  it("gives the client a token for exactly this room that LiveKit's verifier accepts", async () => {
    const { token } = await backend.clientAccess("api-room2", { identity: "client-2" }, "");
    const claims: ClaimGrants = await verifier.verify(token);
    expect(claims.iss).toBe(API_KEY);
    expect(claims.sub).toBe("client-2");
    expect(claims.video).toEqual({
      roomJoin: true,
      room: "api-room2",
      canPublish: true,
      // Its microphone only (Pinch's SDK publishes it as source "unknown"), no data and no metadata
      // of its own: nothing a translator could say.
      canPublishSources: ["microphone", "unknown"],
      canSubscribe: true,
      canPublishData: false,
      canUpdateOwnMetadata: false,
    });
    expect(claims.kind).not.toBe("agent");
    expect(claims.attributes?.["role"]).toBeUndefined();
    // Lifetime is exactly tokenTtlSec (LiveKit sets nbf and exp, no iat).
    expect(claims.exp! - claims.nbf!).toBe(900);
    expect(Math.abs(claims.exp! - (Date.now() / 1000 + 900))).toBeLessThan(5);
    await expect(
      new TokenVerifier(API_KEY, "another-secret-0123456789abcdef").verify(token),
    ).rejects.toThrow();
  });

  it("carries a participant's language in the token, as the attribute every client sees", async () => {
    const { token } = await backend.clientAccess("api-room2", { identity: "client-es", language: "es" }, "");
    const claims = await verifier.verify(token);
    expect(claims.attributes).toEqual({ language: "es" });
  });

  it("turns the token lifetime and departure options into the token's exp and the room's timeout", async () => {
    const shortLived = createLiveKitBackend(options(fake.url, { tokenTtlSec: 60, departureTimeoutSec: 5 }));
    try {
      await shortLived.createRoom("api-room3", ROOM);
      const claims = await verifier.verify(
        (await shortLived.clientAccess("api-room3", { identity: "c" }, "")).token,
      );
      expect(claims.exp! - claims.nbf!).toBe(60);
      expect(JSON.parse(fake.twirpCalls("CreateRoom")[0]!.body)).toMatchObject({ departureTimeout: 5 });
    } finally {
      await shortLived.close();
    }
  });

  it("says what the room service answered when it refuses", async () => {
    fake.failWith = { status: 401, code: "unauthenticated", msg: "invalid API key" };
    const creating = backend.createRoom("api-refused", ROOM);
    await expect(creating).rejects.toThrow(
      /could not create room "api-refused".*401 unauthenticated.*invalid API key/,
    );
  });

  it("fails fast and clearly when nothing listens at the LiveKit URL", async () => {
    const dead = createLiveKitBackend(options(`ws://127.0.0.1:${await freePort()}`));
    try {
      const { ms, error } = await timed(dead.createRoom("api-dead", ROOM));
      expect(error?.message).toMatch(
        /room service at http:\/\/127\.0\.0\.1:\d+ could not create room "api-dead"/,
      );
      expect(ms).toBeLessThan(5_000);
    } finally {
      await dead.close();
    }
  });
});

describe("deleteRoom", () => {
  it("deletes through the room service with a roomCreate token, and ignores a room already gone", async () => {
    await backend.createRoom("api-gone", ROOM);
    await backend.deleteRoom("api-gone");
    const [call] = fake.twirpCalls("DeleteRoom");
    expect(JSON.parse(call!.body)).toEqual({ room: "api-gone" });
    expect((await verifier.verify(bearer(call!))).video?.roomCreate).toBe(true);
    expect(fake.rooms.has("api-gone")).toBe(false);

    await expect(backend.deleteRoom("api-gone")).resolves.toBeUndefined();
    expect(fake.twirpCalls("DeleteRoom")).toHaveLength(2);
  });

  it("reports other room-service failures", async () => {
    fake.failWith = { status: 500, code: "internal", msg: "database is down" };
    await expect(backend.deleteRoom("api-x")).rejects.toThrow(
      /could not delete room "api-x".*500.*database is down/,
    );
  });
});

/**
 * The connection's own logic (who counts as a participant, which track is heard, what is
 * published and how) on a stand-in for a joined rtc-node Room that emits rtc-node's events with
 * their real signatures. rtc-node's real AudioSource, LocalAudioTrack and AudioFrame are used, so
 * the pacing of translated speech is the native source's; only the remote side (Room, AudioStream
 * of a remote track) is played here. Runs before the join tests: those end by disposing the runtime.
 */
describe("LiveKitConnection (on a stand-in for a joined rtc-node room)", () => {
  let rtc: Rtc;
  const captured: Int16Array[] = [];
  /** The frames each of the translator's tracks received, by track name. */
  const capturedOn = new Map<string, Int16Array[]>();
  /** Tracks whose source takes no frame until the gate opens (a stalled track). */
  const gates = new Map<string, Promise<void>>();

  /** Stalls the source of `track`; returns what lets it go on. */
  function hold(track: string): () => void {
    let release!: () => void;
    gates.set(track, new Promise<void>((resolve) => (release = resolve)));
    return () => {
      gates.delete(track);
      release();
    };
  }

  /** One AudioStream opened on a remote track. */
  interface StandInStream {
    controller: ReadableStreamDefaultController<AudioFrame>;
    options: unknown;
    cancelled: boolean;
  }
  interface StandInTrack {
    kind: number;
    streams: StandInStream[];
  }
  /** The track's stream being read now, if any. */
  const reading = (track: StandInTrack) => track.streams.find((stream) => !stream.cancelled);
  interface StandInPublication {
    sid: string;
    source: number;
    subscribed: boolean;
    track?: StandInTrack;
  }
  interface StandInParticipant {
    identity: string;
    kind: number;
    attributes: Record<string, string>;
    trackPublications: Map<string, StandInPublication>;
  }

  class StandInRoom extends EventEmitter {
    readonly remoteParticipants = new Map<string, StandInParticipant>();
    readonly published: { name: string | undefined; source: number | undefined }[] = [];
    readonly data: { payload: string; options: unknown }[] = [];
    readonly attributeUpdates: Record<string, string>[] = [];
    disconnects = 0;
    readonly localParticipant = {
      setAttributes: async (attributes: Record<string, string>) => {
        this.attributeUpdates.push(attributes);
      },
      publishTrack: async (track: { name?: string }, options: { source?: number }) => {
        this.published.push({ name: track.name, source: options.source });
        return { sid: "TR_translation" };
      },
      publishData: async (payload: Uint8Array, options: unknown) => {
        this.data.push({ payload: new TextDecoder().decode(payload), options });
      },
    };
    async disconnect(): Promise<void> {
      this.disconnects += 1;
      this.emit(rtc.RoomEvent.Disconnected, rtc.DisconnectReason.CLIENT_INITIATED);
      this.removeAllListeners();
    }
  }

  function person(identity: string, overrides: Partial<StandInParticipant> = {}): StandInParticipant {
    return {
      identity,
      kind: rtc.ParticipantKind.STANDARD,
      attributes: {},
      trackPublications: new Map(),
      ...overrides,
    };
  }

  function subscribe(room: StandInRoom, participant: StandInParticipant, sid: string, source: number) {
    const track: StandInTrack = { kind: rtc.TrackKind.KIND_AUDIO, streams: [] };
    const publication: StandInPublication = { sid, source, subscribed: true, track };
    participant.trackPublications.set(sid, publication);
    room.emit(rtc.RoomEvent.TrackSubscribed, track, publication, participant);
    return { track, publication };
  }

  function frame(track: StandInTrack, samples: number[]): void {
    const data = Int16Array.from(samples);
    reading(track)!.controller.enqueue(new rtc.AudioFrame(data, 16_000, 1, data.length));
  }

  /** Joins the stand-in room the way connectLiveKitRoom does. */
  function join(room: StandInRoom, participants: StandInParticipant[] = []): LiveKitConnection {
    const connection = new LiveKitConnection(rtc, room as unknown as Room);
    for (const participant of participants) room.remoteParticipants.set(participant.identity, participant);
    room.emit(rtc.RoomEvent.ConnectionStateChanged, rtc.ConnectionState.CONN_CONNECTED);
    connection.start();
    return connection;
  }

  async function take(iterator: AsyncIterator<RoomEvent>, count: number): Promise<RoomEvent[]> {
    const events: RoomEvent[] = [];
    while (events.length < count) {
      const next = await iterator.next();
      if (next.done) break;
      events.push(next.value);
    }
    return events;
  }

  beforeAll(async () => {
    const real = await import("@livekit/rtc-node");
    class StandInAudioStream extends ReadableStream<AudioFrame> {
      constructor(track: StandInTrack, options: unknown) {
        let stream: StandInStream;
        super({
          start: (controller) => {
            stream = { controller, options, cancelled: false };
            track.streams.push(stream);
          },
          cancel: () => {
            stream.cancelled = true;
          },
        });
      }
    }
    const trackOfSource = new WeakMap<AudioSource, string>();
    class NamingLocalAudioTrack extends real.LocalAudioTrack {
      static override createAudioTrack(name: string, source: AudioSource): LocalAudioTrack {
        trackOfSource.set(source, name);
        return super.createAudioTrack(name, source);
      }
    }
    class RecordingAudioSource extends real.AudioSource {
      override async captureFrame(audio: AudioFrame): Promise<void> {
        const track = trackOfSource.get(this) ?? "";
        await gates.get(track);
        const pcm = Int16Array.from(audio.data);
        captured.push(pcm);
        capturedOn.set(track, [...(capturedOn.get(track) ?? []), pcm]);
        return super.captureFrame(audio);
      }
    }
    rtc = {
      ...real,
      AudioStream: StandInAudioStream,
      AudioSource: RecordingAudioSource,
      LocalAudioTrack: NamingLocalAudioTrack,
    } as unknown as Rtc;
  });

  beforeEach(() => {
    captured.length = 0;
    capturedOn.clear();
    gates.clear();
  });

  it("lists the people present at join, not agents or other translators", async () => {
    const room = new StandInRoom();
    const connection = join(room, [
      person("alice"),
      person("some-agent", { kind: rtc.ParticipantKind.AGENT }),
      person("old-translator", { attributes: { role: "translator" } }),
      person("bob"),
    ]);
    expect(connection.participants).toEqual([{ identity: "alice" }, { identity: "bob" }]);
    await connection.leave();
  });

  it("announces people joining and leaving, once each, and ignores agents", async () => {
    const room = new StandInRoom();
    const connection = join(room, [person("alice")]);
    const events = connection.events[Symbol.asyncIterator]();
    const carol = person("carol");
    room.emit(rtc.RoomEvent.ParticipantConnected, carol);
    room.emit(rtc.RoomEvent.ParticipantConnected, carol);
    room.emit(rtc.RoomEvent.ParticipantConnected, person("bot", { kind: rtc.ParticipantKind.AGENT }));
    room.emit(rtc.RoomEvent.ParticipantDisconnected, person("bot", { kind: rtc.ParticipantKind.AGENT }));
    room.emit(rtc.RoomEvent.ParticipantDisconnected, person("alice"));
    room.emit(rtc.RoomEvent.ParticipantDisconnected, carol);
    await connection.leave();
    expect(await take(events, 10)).toEqual([
      { type: "participant_joined", identity: "carol" },
      { type: "participant_left", identity: "alice" },
      { type: "participant_left", identity: "carol" },
    ]);
  });

  it("hears each person's audio at 16 kHz mono, preferring the microphone, and not agents' audio", async () => {
    const room = new StandInRoom();
    const alice = person("alice");
    const bot = person("bot", { kind: rtc.ParticipantKind.AGENT });
    const connection = join(room, [alice, bot]);
    const events = connection.events[Symbol.asyncIterator]();

    const screen = subscribe(room, alice, "TR_screen", rtc.TrackSource.SOURCE_SCREENSHARE_AUDIO);
    expect(reading(screen.track)!.options).toEqual({ sampleRate: 16_000, numChannels: 1 });
    frame(screen.track, [1, 2, 3]);
    expect(await take(events, 1)).toEqual([
      { type: "audio", identity: "alice", pcm: Int16Array.of(1, 2, 3) },
    ]);

    // The microphone takes over from screen-share audio; the bot is never listened to.
    const mic = subscribe(room, alice, "TR_mic", rtc.TrackSource.SOURCE_MICROPHONE);
    expect(reading(screen.track)).toBeUndefined();
    expect(subscribe(room, bot, "TR_bot", rtc.TrackSource.SOURCE_MICROPHONE).track.streams).toEqual([]);
    frame(mic.track, [4, 5]);
    expect(await take(events, 1)).toEqual([{ type: "audio", identity: "alice", pcm: Int16Array.of(4, 5) }]);

    // A second non-microphone track does not displace the microphone.
    const other = subscribe(room, alice, "TR_other", rtc.TrackSource.SOURCE_UNKNOWN);
    expect(other.track.streams).toEqual([]);

    // The microphone going away: another subscribed audio track of hers is heard instead.
    mic.publication.subscribed = false;
    room.emit(rtc.RoomEvent.TrackUnsubscribed, mic.track, mic.publication, alice);
    expect(reading(mic.track)).toBeUndefined();
    const fallback = [screen.track, other.track].filter((track) => reading(track) !== undefined);
    expect(fallback).toHaveLength(1);
    frame(fallback[0]!, [6]);
    expect(await take(events, 1)).toEqual([{ type: "audio", identity: "alice", pcm: Int16Array.of(6) }]);

    // A participant joining later is announced before their audio.
    const dave = person("dave");
    room.emit(rtc.RoomEvent.ParticipantConnected, dave);
    const daveMic = subscribe(room, dave, "TR_dave", rtc.TrackSource.SOURCE_MICROPHONE);
    frame(daveMic.track, [7]);
    expect(await take(events, 2)).toEqual([
      { type: "participant_joined", identity: "dave" },
      { type: "audio", identity: "dave", pcm: Int16Array.of(7) },
    ]);
    room.emit(rtc.RoomEvent.ParticipantDisconnected, dave);
    expect(reading(daveMic.track)).toBeUndefined();
    expect(await take(events, 1)).toEqual([{ type: "participant_left", identity: "dave" }]);
    await connection.leave();
  });

  it("publishes each transcript event as reliable UTF-8 JSON on the topic transcript", async () => {
    const room = new StandInRoom();
    const connection = join(room);
    const event = {
      type: "original_transcript" as const,
      text: "¿Qué tal? ✓",
      is_final: true,
      correlation_id: "c1",
      source_language: "es",
      target_language: "en",
      detected_language: "es",
      timestamp: 1,
    };
    await connection.publishData(event);
    expect(room.data).toHaveLength(1);
    expect(JSON.parse(room.data[0]!.payload)).toEqual(event);
    expect(room.data[0]!.options).toEqual({ reliable: true, topic: "transcript" });
    await connection.leave();
  });

  it("publishes one translated-audio track and speaks float audio as PCM16, in order and in real time", async () => {
    const room = new StandInRoom();
    const connection = join(room);
    await connection.publishAudio(Float32Array.of(0, 1, -1, 0.5, -0.5, 2, -2, Number.NaN), SPANISH);
    // The track name Pinch's clients look for (with the identity translation-agent).
    expect(room.published).toEqual([{ name: "translated-audio", source: rtc.TrackSource.SOURCE_MICROPHONE }]);
    expect(captured).toEqual([Int16Array.of(0, 32767, -32768, 16384, -16384, 32767, -32768, 0)]);

    // 3 s of speech in 100 ms frames, from calls not awaited one by one: order is kept, the
    // track is published once, and the native source's 1 s queue makes the rest wait for playout.
    captured.length = 0;
    const started = Date.now();
    const seconds = [0.1, 0.2, 0.3].map((level) => new Float32Array(24_000).fill(level));
    await Promise.all(seconds.map((samples) => connection.publishAudio(samples, SPANISH)));
    const elapsed = Date.now() - started;
    expect(room.published).toHaveLength(1);
    expect(captured).toHaveLength(30);
    expect(captured.every((frame) => frame.length === 2_400)).toBe(true);
    expect(captured.map((frame) => frame[0])).toEqual(
      [0.1, 0.2, 0.3].flatMap((level) => Array<number>(10).fill(Math.round(level * 32767))),
    );
    expect(elapsed).toBeGreaterThan(1_500);
    expect(elapsed).toBeLessThan(5_000);
    await connection.leave();
  });

  it("publishes a track per output, named from it, each in order: one stalled does not hold back the other", async () => {
    const room = new StandInRoom();
    const connection = join(room);
    const level = (value: number) => Math.round(value * 32767);
    // German's source takes nothing until released; Spanish must go out meanwhile.
    const releaseGerman = hold("translated-audio-de");
    const german = [0.5, 0.6].map((value) =>
      connection.publishAudio(new Float32Array(4_800).fill(value), GERMAN),
    );
    const spanish = Promise.all(
      [0.1, 0.2, 0.3].map((value) => connection.publishAudio(new Float32Array(4_800).fill(value), SPANISH)),
    );
    const spanishWentOut = await settlesWithin(spanish, 3_000);
    releaseGerman();
    expect(spanishWentOut).toBe(true);
    await spanish;
    await Promise.all(german);

    expect(room.published.map((track) => track.name).sort()).toEqual([
      "translated-audio",
      "translated-audio-de",
    ]);
    // Each track's 100 ms frames in the order they were passed (two frames per clip).
    expect(capturedOn.get("translated-audio")!.map((frame) => frame[0])).toEqual(
      [0.1, 0.1, 0.2, 0.2, 0.3, 0.3].map(level),
    );
    expect(capturedOn.get("translated-audio-de")!.map((frame) => frame[0])).toEqual(
      [0.5, 0.5, 0.6, 0.6].map(level),
    );
    // Each track's language, for clients: the attribute track:<name>, once per track.
    expect(Object.assign({}, ...room.attributeUpdates)).toEqual({
      "track:translated-audio": "es",
      "track:translated-audio-de": "de",
    });
    expect(room.attributeUpdates).toHaveLength(2);
    await connection.leave();
  });

  it("speaks whether LiveKit refuses the track's language attribute or never answers", async () => {
    const room = new StandInRoom();
    const connection = join(room);
    room.localParticipant.setAttributes = () => new Promise<void>(() => undefined);
    expect(await settlesWithin(connection.publishAudio(new Float32Array(2_400), SPANISH), 3_000)).toBe(true);
    room.localParticipant.setAttributes = () =>
      Promise.reject(new Error("does not have permission to update own metadata"));
    await connection.publishAudio(new Float32Array(2_400), GERMAN);
    expect(room.published.map((track) => track.name)).toEqual(["translated-audio", "translated-audio-de"]);
    expect(capturedOn.get("translated-audio")).toHaveLength(1);
    expect(capturedOn.get("translated-audio-de")).toHaveLength(1);
    await connection.leave();
  });

  it("sends a transcript to its listeners only when they are named, to everyone otherwise", async () => {
    const room = new StandInRoom();
    const connection = join(room);
    await connection.publishData({ type: "speech_end" }, ["bea", "ben"]);
    await connection.publishData({ type: "speech_end" });
    await connection.publishData({ type: "speech_end" }, []);
    expect(room.data.map((data) => data.options)).toEqual([
      { reliable: true, topic: "transcript", destination_identities: ["bea", "ben"] },
      { reliable: true, topic: "transcript" },
    ]);
    await connection.leave();
  });

  it("reads each participant's language from their language attribute", async () => {
    const room = new StandInRoom();
    const connection = join(room, [person("ana", { attributes: { language: "en" } }), person("pinch")]);
    expect(connection.participants).toEqual([{ identity: "ana", language: "en" }, { identity: "pinch" }]);
    const events = connection.events[Symbol.asyncIterator]();
    room.emit(rtc.RoomEvent.ParticipantConnected, person("ben", { attributes: { language: "es" } }));
    // Announced on its track's subscription (events can race): with its language too.
    subscribe(
      room,
      person("cleo", { attributes: { language: "de" } }),
      "TR_cleo",
      rtc.TrackSource.SOURCE_MICROPHONE,
    );
    expect(await take(events, 2)).toEqual([
      { type: "participant_joined", identity: "ben", language: "es" },
      { type: "participant_joined", identity: "cleo", language: "de" },
    ]);
    await connection.leave();
  });

  it("ends its events when the room disconnects, and then drops what is published", async () => {
    const room = new StandInRoom();
    const connection = join(room, [person("alice")]);
    const events = connection.events[Symbol.asyncIterator]();
    room.emit(rtc.RoomEvent.Disconnected, rtc.DisconnectReason.ROOM_DELETED);
    expect(await events.next()).toEqual({ value: undefined, done: true });
    await connection.closed;
    await connection.publishData({ type: "speech_end" });
    await connection.publishAudio(new Float32Array(2_400), SPANISH);
    expect(room.data).toHaveLength(0);
    expect(room.published).toHaveLength(0);
    await connection.leave();
    expect(room.disconnects).toBe(0);
  });

  it("leaves once: disconnects the room, ends events, and lets speech in progress finish at once", async () => {
    const room = new StandInRoom();
    const connection = join(room);
    const events = connection.events[Symbol.asyncIterator]();
    const speaking = connection.publishAudio(new Float32Array(24_000 * 5), SPANISH);
    // Speaking: the output track is published and the audio is being queued.
    await vi.waitFor(() => expect(room.published).toHaveLength(1), { ...WAIT, interval: 20 });
    const started = Date.now();
    await Promise.all([connection.leave(), connection.leave()]);
    await speaking;
    // 4.7 s of speech were still to play: leaving cut them short instead of waiting them out.
    expect(Date.now() - started).toBeLessThan(4_000);
    expect(room.disconnects).toBe(1);
    expect(await events.next()).toEqual({ value: undefined, done: true });
  });
});

describe("joinAsTranslator", () => {
  it("rejects quickly with a clear error against a server that is no LiveKit signalling server", async () => {
    const { ms, error } = await timed(backend.joinAsTranslator("api-join"));
    expect(error?.message).toMatch(
      /^the translator could not join LiveKit room "api-join": could not join the LiveKit room at ws:\/\/127\.0\.0\.1:\d+: .*404/,
    );
    expect(ms).toBeLessThan(10_000);

    // rtc-node dialled the signalling endpoint with the translator's token.
    const joins = fake.requests.filter((r) => r.path.startsWith("/rtc"));
    expect(joins.length).toBeGreaterThan(0);
    const tokens = new Set(joins.map((r) => r.authorization).filter((a) => a !== undefined));
    expect(tokens.size).toBe(1);
    const claims = await verifier.verify(bearer(joins.find((r) => r.authorization)!));
    // The identity Pinch's clients look for.
    expect(claims.sub).toBe("translation-agent");
    expect(claims.kind).toBe("agent");
    expect(claims.attributes).toEqual({ role: "translator" });
    expect(claims.video).toMatchObject({
      roomJoin: true,
      room: "api-join",
      canPublish: true,
      canSubscribe: true,
      canPublishData: true,
      agent: true,
    });
    expect(claims.exp! - claims.nbf!).toBe(900);
  });

  it("rejects quickly when nothing listens at the LiveKit URL", async () => {
    const dead = createLiveKitBackend(options(`ws://127.0.0.1:${await freePort()}`));
    try {
      const { ms, error } = await timed(dead.joinAsTranslator("api-dead"));
      expect(error?.message).toMatch(/could not join LiveKit room "api-dead".*(refused|connect)/i);
      expect(ms).toBeLessThan(10_000);
    } finally {
      await dead.close();
    }
  });

  it("gives up after the join timeout when the server accepts the connection but never answers", async () => {
    const sockets = new Set<Socket>();
    const silent = createTcpServer((socket) => {
      sockets.add(socket);
      socket.on("error", () => undefined);
    });
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const url = `ws://127.0.0.1:${(silent.address() as { port: number }).port}`;
    const impatient = createLiveKitBackend(options(url, { joinTimeoutMs: 1_500 }));
    try {
      const { ms, error } = await timed(impatient.joinAsTranslator("api-silent"));
      expect(error?.message).toMatch(/could not join LiveKit room "api-silent".*no answer within 1500 ms/);
      expect(ms).toBeGreaterThanOrEqual(1_400);
      expect(ms).toBeLessThan(4_000);
      expect(sockets.size).toBeGreaterThan(0);

      // The same bound applies to connectLiveKitRoom itself.
      const direct = await timed(connectLiveKitRoom(url, "not-a-token", { timeoutMs: 500 }));
      expect(direct.error?.message).toMatch(
        /^could not join the LiveKit room at .*: no answer within 500 ms$/,
      );
      expect(direct.ms).toBeLessThan(3_000);
    } finally {
      await impatient.close();
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });
});

describe("close", () => {
  it("refuses new rooms and joins once closed", async () => {
    const closing = createLiveKitBackend(options(fake.url));
    await closing.close();
    await expect(closing.createRoom("api-late", ROOM)).rejects.toThrow(/closed/);
    await expect(closing.clientAccess("api-late", { identity: "c" }, "")).rejects.toThrow(/closed/);
    await expect(closing.joinAsTranslator("api-late")).rejects.toThrow(/closed/);
    expect(fake.requests).toHaveLength(0);
  });

  it("releases rtc-node's native runtime so a process can exit, and a later back-end loads it again", async () => {
    // rtc-node keeps the event loop alive once loaded; this runs in its own process to see it exit
    // (the build, kept fresh by test/support/global-setup.ts).
    const port = await freePort();
    const script = `
      const { createLiveKitBackend } = await import("./dist/rooms/livekit/backend.js");
      const options = { url: "ws://127.0.0.1:${port}", apiKey: "k", apiSecret: "${API_SECRET}",
        tokenTtlSec: 60, emptyTimeoutSec: 60, maxParticipants: 2 };
      for (const round of [1, 2]) {
        const backend = createLiveKitBackend(options);
        const error = await backend.joinAsTranslator("r").then(() => undefined, (e) => e);
        console.error("round " + round + ": " + error?.message);
        await backend.close();
      }
    `;
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
      cwd: PROJECT_ROOT,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
    const killer = setTimeout(() => child.kill("SIGKILL"), 20_000);
    try {
      expect(await exited).toBe(0);
    } finally {
      clearTimeout(killer);
    }
    // Both rounds failed the same clear way: the second did not hang on a disposed runtime.
    expect(stderr).toMatch(/round 1: the translator could not join LiveKit room "r": .*refused/i);
    expect(stderr).toMatch(/round 2: the translator could not join LiveKit room "r": .*refused/i);
  });
});

describe("roomServiceUrl", () => {
  it("turns the LiveKit ws(s) URL into the room service's http(s) URL", () => {
    expect(roomServiceUrl("wss://lk.example.com")).toBe("https://lk.example.com");
    expect(roomServiceUrl("ws://127.0.0.1:7880")).toBe("http://127.0.0.1:7880");
    expect(roomServiceUrl("https://lk.example.com/")).toBe("https://lk.example.com/");
  });
});
