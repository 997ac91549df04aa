import type { ServerMessage } from "../../wire/messages.js";
import type {
  AudioFrame,
  AudioSource,
  LocalAudioTrack,
  Participant,
  RemoteParticipant,
  RemoteTrack,
  RemoteTrackPublication,
  Room,
} from "@livekit/rtc-node";
import { Channel } from "../../core/channel.js";
import { INPUT_SAMPLE_RATE, OUTPUT_SAMPLE_RATE } from "@relay-translate/client/protocol";
import type { RoomConnection, RoomEvent, RoomMember, SpeechOutput } from "../types.js";

/**
 * The translator's presence in a LiveKit room, through @livekit/rtc-node (LiveKit's Rust SDK behind
 * N-API). The native library is loaded on first use only, so a service without LiveKit never maps it.
 */

/** The @livekit/rtc-node module (loaded with `import()`; tests may hand in stand-ins for parts). */
export type Rtc = typeof import("@livekit/rtc-node");

/** Topic of the reliable data messages carrying transcript events (JSON, UTF-8). */
export const TRANSCRIPT_TOPIC = "transcript";

/** Translated speech is handed to the native source in frames of 100 ms (its queue holds 1 s). */
const OUTPUT_FRAME_SAMPLES = OUTPUT_SAMPLE_RATE / 10;
const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
/** Bound on a clean disconnect, so `leave` cannot hang on a dead server. */
const DISCONNECT_TIMEOUT_MS = 5_000;

export interface LiveKitConnectOptions {
  /** How long to wait for the join to complete before giving up (default 10 s). */
  readonly timeoutMs?: number;
}

/** A `RoomConnection` that also says when it has closed (left, or disconnected by the server). */
export interface LiveKitRoomConnection extends RoomConnection {
  /** Resolves once the connection is closed, whichever side closed it. */
  readonly closed: Promise<void>;
}

// --- The native runtime -------------------------------------------------------------------------

/**
 * rtc-node's FFI runtime keeps the Node.js event loop alive from the first `Room` on until it is
 * disposed, and once disposed it cannot be used again unless its (global) client is re-created.
 * `liveConnections` counts connections open or still connecting; the runtime is disposed only when
 * it reaches zero after `releaseLiveKitRuntime` was asked for.
 */
let rtcModule: Promise<Rtc> | undefined;
let liveConnections = 0;
let releaseWanted = false;
let disposing: Promise<void> | undefined;

async function loadRtc(): Promise<Rtc> {
  releaseWanted = false;
  await disposing;
  rtcModule ??= import("@livekit/rtc-node");
  return rtcModule;
}

function connectionEnded(): void {
  liveConnections -= 1;
  if (liveConnections === 0 && releaseWanted) void disposeRuntime();
}

async function disposeRuntime(): Promise<void> {
  const loaded = rtcModule;
  if (!loaded || disposing) return disposing;
  rtcModule = undefined;
  releaseWanted = false;
  disposing = (async () => {
    try {
      const rtc = await loaded;
      await rtc.dispose();
      // rtc-node keeps its FFI client in this global; cleared, the next use initialises afresh.
      delete (globalThis as { _ffiClientInstance?: unknown })._ffiClientInstance;
    } catch {
      // Disposal is best effort: at worst the runtime stays loaded.
    } finally {
      disposing = undefined;
    }
  })();
  return disposing;
}

/**
 * Lets the process exit once no LiveKit connection is left: disposes the native runtime now if
 * nothing is open or connecting, otherwise as soon as the last connection ends. A later
 * `connectLiveKitRoom` loads it again.
 */
export async function releaseLiveKitRuntime(): Promise<void> {
  if (!rtcModule) return disposing;
  releaseWanted = true;
  if (liveConnections === 0) await disposeRuntime();
}

// --- Connecting ---------------------------------------------------------------------------------

/** rtc-node dials ws(s) URLs; an http(s) LiveKit URL means the same server. */
function signalUrl(url: string): string {
  return url.replace(/^http(s?):\/\//iu, "ws$1://");
}

/**
 * Joins a LiveKit room with `token`. Rejects with an error saying why (server unreachable, token
 * refused, no LiveKit server at `url`, or no answer within `timeoutMs`); it never hangs.
 */
export async function connectLiveKitRoom(
  url: string,
  token: string,
  options: LiveKitConnectOptions = {},
): Promise<LiveKitRoomConnection> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  const rtc = await loadRtc();
  liveConnections += 1;
  const room = new rtc.Room();
  // Listeners go on before connecting: rtc-node releases the room's first events right after.
  const connection = new LiveKitConnection(rtc, room, connectionEnded);
  const connecting = room.connect(signalUrl(url), token, { autoSubscribe: true, dynacast: false });
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    await Promise.race([connecting, timedOut]);
  } catch (error) {
    connection.abandon();
    // A join that completes after we gave up is closed at once; the runtime is released after it.
    connecting.then(
      () =>
        void room
          .disconnect()
          .catch(() => undefined)
          .finally(connectionEnded),
      () => connectionEnded(),
    );
    throw new Error(`could not join the LiveKit room at ${url}: ${(error as Error).message}`, {
      cause: error,
    });
  } finally {
    clearTimeout(timer);
  }
  connection.start();
  return connection;
}

// --- The connection -----------------------------------------------------------------------------

/** The audio track a participant is heard through (one per participant, the microphone preferred). */
interface Listening {
  readonly trackSid: string;
  readonly microphone: boolean;
  readonly reader: ReadableStreamDefaultReader<AudioFrame>;
}

interface Output {
  readonly source: AudioSource;
  readonly track: LocalAudioTrack;
}

/** One published track of translated speech (one per language) and the frames queued for it. */
interface Track {
  output: Promise<Output> | undefined;
  queue: Promise<unknown>;
}

/**
 * A joined rtc-node `Room` seen as a `RoomConnection`. Exported for tests, which drive it with a
 * stand-in room; everything else gets one from `connectLiveKitRoom`. `onEnded` runs once, after
 * the connection has closed and released what it published.
 */
export class LiveKitConnection implements LiveKitRoomConnection {
  private readonly channel = new Channel<RoomEvent>();
  readonly events: AsyncIterable<RoomEvent> = this.channel;
  participants: readonly RoomMember[] = [];
  readonly closed: Promise<void>;

  /** Remote people (not agents) in the room, as announced to the translator. */
  private readonly present = new Set<string>();
  private readonly listening = new Map<string, Listening>();
  /** The translator's tracks by name: each language's speech is queued and paced on its own. */
  private readonly tracks = new Map<string, Track>();
  private snapshotTaken = false;
  private isClosed = false;
  private leaving: Promise<void> | undefined;
  private markClosed!: () => void;

  constructor(
    private readonly rtc: Rtc,
    private readonly room: Room,
    private readonly onEnded: () => void = () => undefined,
  ) {
    this.closed = new Promise((resolve) => (this.markClosed = resolve));
    room.on(rtc.RoomEvent.ConnectionStateChanged, (state) => {
      // Emitted inside `connect`, after the participants already there are known and before any
      // room event is processed: the exact moment to take the initial list.
      if (state === rtc.ConnectionState.CONN_CONNECTED) this.snapshot();
    });
    room.on(rtc.RoomEvent.ParticipantConnected, (participant) => this.joined(participant));
    room.on(rtc.RoomEvent.ParticipantDisconnected, (participant) => this.left(participant.identity));
    room.on(rtc.RoomEvent.TrackSubscribed, (track, publication, participant) =>
      this.subscribed(track, publication, participant),
    );
    room.on(rtc.RoomEvent.TrackUnsubscribed, (_track, publication, participant) =>
      this.unsubscribed(publication, participant),
    );
    room.on(rtc.RoomEvent.Disconnected, () => this.serverClosed());
  }

  private isAgent(participant: Participant): boolean {
    return (
      participant.kind === this.rtc.ParticipantKind.AGENT || participant.attributes["role"] === "translator"
    );
  }

  private snapshot(): void {
    if (this.snapshotTaken) return;
    this.snapshotTaken = true;
    const members: RoomMember[] = [];
    for (const participant of this.room.remoteParticipants.values()) {
      if (this.isAgent(participant)) continue;
      this.present.add(participant.identity);
      members.push(memberOf(participant));
    }
    this.participants = members;
  }

  /** Called once joined (the snapshot is normally taken already, inside `connect`). */
  start(): void {
    this.snapshot();
  }

  /** Gives up on a connection whose join failed or timed out. */
  abandon(): void {
    this.isClosed = true;
    this.room.removeAllListeners();
    this.channel.close();
    this.markClosed();
  }

  private joined(participant: RemoteParticipant): void {
    if (this.isClosed || this.isAgent(participant) || this.present.has(participant.identity)) return;
    this.present.add(participant.identity);
    this.channel.push({ type: "participant_joined", ...memberOf(participant) });
  }

  private left(identity: string): void {
    this.stopListening(identity);
    if (this.isClosed || !this.present.delete(identity)) return;
    this.channel.push({ type: "participant_left", identity });
  }

  private subscribed(
    track: RemoteTrack,
    publication: RemoteTrackPublication,
    participant: RemoteParticipant,
  ) {
    if (this.isClosed || track.kind !== this.rtc.TrackKind.KIND_AUDIO || this.isAgent(participant)) return;
    // A participant whose join was not announced yet (events can race) is announced now.
    this.joined(participant);
    const microphone = publication.source === this.rtc.TrackSource.SOURCE_MICROPHONE;
    const current = this.listening.get(participant.identity);
    if (current && (current.microphone || !microphone)) return;
    this.listen(participant.identity, track, publication.sid ?? "", microphone);
  }

  private unsubscribed(publication: RemoteTrackPublication, participant: RemoteParticipant): void {
    const current = this.listening.get(participant.identity);
    if (!current || current.trackSid !== publication.sid) return;
    this.stopListening(participant.identity);
    if (this.isClosed) return;
    // Another audio track of the same participant (a second microphone, screen-share audio) takes over.
    const others = [...participant.trackPublications.values()].filter(
      (other) =>
        other.sid !== publication.sid &&
        other.subscribed &&
        other.track?.kind === this.rtc.TrackKind.KIND_AUDIO,
    );
    const next = others.find((other) => other.source === this.rtc.TrackSource.SOURCE_MICROPHONE) ?? others[0];
    if (next?.track) {
      const microphone = next.source === this.rtc.TrackSource.SOURCE_MICROPHONE;
      this.listen(participant.identity, next.track, next.sid ?? "", microphone);
    }
  }

  private listen(identity: string, track: RemoteTrack, trackSid: string, microphone: boolean): void {
    this.stopListening(identity);
    const stream = new this.rtc.AudioStream(track, { sampleRate: INPUT_SAMPLE_RATE, numChannels: 1 });
    const listening: Listening = { trackSid, microphone, reader: stream.getReader() };
    this.listening.set(identity, listening);
    void (async () => {
      try {
        for (;;) {
          const { done, value: frame } = await listening.reader.read();
          if (done || this.listening.get(identity) !== listening) break;
          const pcm = frame.data.subarray(0, frame.samplesPerChannel);
          if (pcm.length > 0) this.channel.push({ type: "audio", identity, pcm });
        }
      } catch {
        // The stream was torn down (track gone, room closed): nothing more to hear from it.
      }
    })();
  }

  private stopListening(identity: string): void {
    const listening = this.listening.get(identity);
    if (!listening) return;
    this.listening.delete(identity);
    listening.reader.cancel().catch(() => undefined);
  }

  // --- Publishing ---

  private publishOutput(track: Track, output: SpeechOutput): Promise<Output> {
    track.output ??= (async () => {
      const source = new this.rtc.AudioSource(OUTPUT_SAMPLE_RATE, 1);
      const local = this.rtc.LocalAudioTrack.createAudioTrack(output.track, source);
      const participant = this.room.localParticipant!;
      // rtc-node gives a track no field for its language: the attribute `track:<name>` names it for
      // clients. Sent before the track, best effort (LiveKit needs the canUpdateOwnMetadata grant
      // for it), never holding speech back.
      participant.setAttributes({ [`track:${output.track}`]: output.language }).catch(() => undefined);
      try {
        const options = new this.rtc.TrackPublishOptions({ source: this.rtc.TrackSource.SOURCE_MICROPHONE });
        await participant.publishTrack(local, options);
        return { source, track: local };
      } catch (error) {
        track.output = undefined;
        await local.close(true).catch(() => undefined);
        throw error;
      }
    })();
    return track.output;
  }

  /**
   * Speaks `samples` (float32, 24 kHz mono) on the track `output.track` (published with its first
   * speech), after everything passed before for that track; tracks do not wait for each other.
   * Resolves once the native source has queued the audio (its queue holds about 1 s, so this paces
   * a fast producer to real time). After the connection closed it drops the audio.
   */
  publishAudio(samples: Float32Array, output: SpeechOutput): Promise<void> {
    const current = this.trackFor(output);
    const run = current.queue.then(() => this.speak(samples, current, output));
    current.queue = run.catch(() => undefined);
    return run;
  }

  async openOutput(output: SpeechOutput): Promise<void> {
    if (this.isClosed) return;
    await this.publishOutput(this.trackFor(output), output);
  }

  private trackFor(output: SpeechOutput): Track {
    let track = this.tracks.get(output.track);
    if (!track) this.tracks.set(output.track, (track = { output: undefined, queue: Promise.resolve() }));
    return track;
  }

  private async speak(samples: Float32Array, track: Track, output: SpeechOutput): Promise<void> {
    try {
      await this.capture(samples, track, output);
    } catch (error) {
      if (!this.isClosed) throw error;
    }
  }

  private async capture(samples: Float32Array, track: Track, output: SpeechOutput): Promise<void> {
    if (this.isClosed || samples.length === 0) return;
    const { source } = await this.publishOutput(track, output);
    for (let offset = 0; offset < samples.length && !this.isClosed; offset += OUTPUT_FRAME_SAMPLES) {
      const chunk = samples.subarray(offset, offset + OUTPUT_FRAME_SAMPLES);
      // A fresh buffer per frame: rtc-node hands the native side its ArrayBuffer from offset 0.
      const pcm = new Int16Array(chunk.length);
      for (let i = 0; i < chunk.length; i += 1) {
        const sample = Math.max(-1, Math.min(1, chunk[i]!));
        pcm[i] = Math.round(sample < 0 ? sample * 0x8000 : sample * 0x7fff);
      }
      const frame = new this.rtc.AudioFrame(pcm, OUTPUT_SAMPLE_RATE, 1, pcm.length);
      await Promise.race([source.captureFrame(frame), this.closed]);
    }
  }

  /**
   * Sends one transcript event as a reliable data message (topic "transcript") to `listeners`, or
   * to every participant.
   */
  async publishData(message: ServerMessage, listeners?: readonly string[]): Promise<void> {
    if (this.isClosed || listeners?.length === 0) return;
    const payload = new TextEncoder().encode(JSON.stringify(message));
    try {
      await Promise.race([
        this.room.localParticipant!.publishData(payload, {
          reliable: true,
          topic: TRANSCRIPT_TOPIC,
          ...(listeners ? { destination_identities: [...listeners] } : {}),
        }),
        this.closed,
      ]);
    } catch (error) {
      if (!this.isClosed) throw error;
    }
  }

  // --- Closing ---

  /** Ends the connection's events and listeners; returns false when it was already closed. */
  private close(): boolean {
    if (this.isClosed) return false;
    this.isClosed = true;
    for (const identity of [...this.listening.keys()]) this.stopListening(identity);
    this.channel.close();
    this.markClosed();
    return true;
  }

  private async releaseOutput(): Promise<void> {
    const tracks = [...this.tracks.values()];
    this.tracks.clear();
    await Promise.all(
      tracks.map(async (track) => {
        const output = await track.output?.catch(() => undefined);
        await output?.track.close(true).catch(() => undefined);
      }),
    );
  }

  /** The server ended the connection (room deleted, kicked, network lost for good). */
  private serverClosed(): void {
    if (!this.close()) return;
    this.leaving = this.releaseOutput().finally(this.onEnded);
  }

  async leave(): Promise<void> {
    if (this.close()) {
      this.leaving = (async () => {
        // Disconnecting unpublishes the translation track and ends every subscription.
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          this.room.disconnect().catch(() => undefined),
          new Promise((resolve) => (timer = setTimeout(resolve, DISCONNECT_TIMEOUT_MS))),
        ]);
        clearTimeout(timer);
        await this.releaseOutput();
      })().finally(this.onEnded);
    }
    await this.leaving;
  }
}

/** A participant as the translator knows them: the language their token declared (attribute `language`). */
function memberOf(participant: Participant): RoomMember {
  const language = participant.attributes["language"];
  return { identity: participant.identity, ...(language ? { language } : {}) };
}
