import type { RemoteParticipant, RemoteTrack, RemoteTrackPublication, Room } from "@livekit/rtc-node";

/**
 * A participant of a room on a real LiveKit server, joined with LiveKit's own Node SDK
 * (@livekit/rtc-node), as a user's app joins: it publishes a microphone track, subscribes to the
 * translator's audio and reads the data messages. What it hears and reads is kept for assertions.
 */

type Rtc = typeof import("@livekit/rtc-node");

/** Every data message received, with who sent it (undefined: the server). */
export interface ReceivedData {
  readonly topic: string | undefined;
  readonly from: string | undefined;
  readonly message: Record<string, unknown>;
}

/** What arrived, in order, with its arrival time (performance.now()): as `RealtimeSocket.received`. */
export interface Arrival {
  readonly at: number;
  readonly message?: Record<string, unknown>;
  /** A frame of translated speech that holds sound (silent frames are not kept here). */
  readonly audio?: Int16Array;
}

const MICROPHONE_RATE = 16_000;
/** A frame holds sound when a sample reaches -40 dBFS. */
const SOUND_PEAK = 328;
const HEARD_RATE = 24_000;
/** 10 ms frames, as WebRTC sends them. */
const FRAME_SAMPLES = MICROPHONE_RATE / 100;

export class LiveKitParticipant {
  readonly data: ReceivedData[] = [];
  /** Data messages from the translator and frames of sound, in arrival order. */
  readonly received: Arrival[] = [];
  /** PCM16 24 kHz mono heard per remote track name (`<identity>/<track name>`). */
  readonly heard = new Map<string, Int16Array[]>();
  /** Remote tracks published, as `<identity>/<track name>`. */
  readonly published = new Set<string>();
  /** Names of this participant's own tracks someone has subscribed to. */
  readonly subscribedByOthers = new Set<string>();
  disconnected = false;
  private microphone: { source: InstanceType<Rtc["AudioSource"]> } | undefined;

  private constructor(
    private readonly rtc: Rtc,
    readonly room: Room,
    private readonly wanted: ((trackName: string) => boolean) | undefined,
  ) {
    room
      .on(rtc.RoomEvent.DataReceived, (payload, participant, _kind, topic) => {
        let message: Record<string, unknown>;
        try {
          message = JSON.parse(new TextDecoder().decode(payload)) as Record<string, unknown>;
        } catch {
          message = { unparsed: new TextDecoder().decode(payload) };
        }
        this.data.push({ topic, from: participant?.identity, message });
        this.received.push({ at: performance.now(), message });
      })
      .on(rtc.RoomEvent.TrackPublished, (publication, participant) => {
        this.published.add(`${participant.identity}/${publication.name}`);
        if (this.wanted?.(publication.name ?? "")) publication.setSubscribed(true);
      })
      .on(rtc.RoomEvent.TrackSubscribed, (track, publication, participant) =>
        this.listen(track, publication, participant),
      )
      .on(rtc.RoomEvent.LocalTrackSubscribed, (track) => this.subscribedByOthers.add(track.name ?? ""))
      .on(rtc.RoomEvent.Disconnected, () => (this.disconnected = true));
  }

  /**
   * Joins `url` with `token`: auto-subscribing, as LiveKit's SDKs do by default, or, with
   * `tracks`, subscribing only to the tracks whose names it accepts (as the meeting page does).
   */
  static async join(
    url: string,
    token: string,
    options: { tracks?: (trackName: string) => boolean } = {},
  ): Promise<LiveKitParticipant> {
    const rtc = await import("@livekit/rtc-node");
    const room = new rtc.Room();
    const participant = new LiveKitParticipant(rtc, room, options.tracks);
    await room.connect(url, token, { autoSubscribe: options.tracks === undefined, dynacast: false });
    for (const remote of room.remoteParticipants.values()) {
      for (const publication of remote.trackPublications.values()) {
        participant.published.add(`${remote.identity}/${publication.name}`);
        if (options.tracks?.(publication.name ?? "")) publication.setSubscribed(true);
      }
    }
    return participant;
  }

  get identity(): string {
    return this.room.localParticipant!.identity;
  }

  private listen(
    track: RemoteTrack,
    publication: RemoteTrackPublication,
    participant: RemoteParticipant,
  ): void {
    if (track.kind !== this.rtc.TrackKind.KIND_AUDIO) return;
    const key = `${participant.identity}/${publication.name}`;
    this.published.add(key);
    const chunks: Int16Array[] = [];
    this.heard.set(key, chunks);
    const stream = new this.rtc.AudioStream(track, { sampleRate: HEARD_RATE, numChannels: 1 });
    void (async () => {
      try {
        for await (const frame of stream) {
          const pcm = frame.data.slice(0, frame.samplesPerChannel);
          chunks.push(pcm);
          if (pcm.some((sample) => Math.abs(sample) >= SOUND_PEAK)) {
            this.received.push({ at: performance.now(), audio: pcm });
          }
        }
      } catch {
        // the track went away
      }
    })();
  }

  /**
   * Speaks a 16 kHz PCM16 recording into the microphone track (published on first use), at real
   * time (the native source paces it), then `silenceSec` of silence so the utterance ends.
   */
  async speak(pcm: Int16Array, silenceSec = 1.5): Promise<void> {
    await this.publishMicrophone();
    const padded = new Int16Array(pcm.length + Math.round(silenceSec * MICROPHONE_RATE));
    padded.set(pcm);
    for (let offset = 0; offset < padded.length; offset += FRAME_SAMPLES) {
      const frame = padded.slice(offset, offset + FRAME_SAMPLES);
      await this.microphone!.source.captureFrame(
        new this.rtc.AudioFrame(frame, MICROPHONE_RATE, 1, frame.length),
      );
    }
  }

  /**
   * Hands one chunk of 16 kHz PCM16 to the microphone track at once (the caller paces it; the
   * native source queues up to 1 s). The track must be published (`speak` or `publishMicrophone`).
   */
  sendAudio(pcm: Int16Array): void {
    if (!this.microphone) throw new Error("publish the microphone first");
    const copy = pcm.slice();
    void this.microphone.source
      .captureFrame(new this.rtc.AudioFrame(copy, MICROPHONE_RATE, 1, copy.length))
      .catch(() => undefined);
  }

  /**
   * Publishes the microphone track (if not yet) and resolves once someone (the translator) has
   * subscribed to it: speech sent before then is heard by nobody, however loaded the machine.
   */
  async untilHeard(timeoutMs = 60_000): Promise<void> {
    await this.publishMicrophone();
    const deadline = performance.now() + timeoutMs;
    while (!this.subscribedByOthers.has("microphone")) {
      if (performance.now() > deadline)
        throw new Error(`nobody subscribed to the microphone in ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** Publishes the microphone track (silent until audio is sent). */
  async publishMicrophone(): Promise<void> {
    if (this.microphone) return;
    const source = new this.rtc.AudioSource(MICROPHONE_RATE, 1);
    const track = this.rtc.LocalAudioTrack.createAudioTrack("microphone", source);
    const options = new this.rtc.TrackPublishOptions({ source: this.rtc.TrackSource.SOURCE_MICROPHONE });
    await this.room.localParticipant!.publishTrack(track, options);
    this.microphone = { source };
  }

  /** Resolves once nothing has arrived for `quietMs` (rejects after `timeoutMs`). */
  async settle(quietMs = 1000, timeoutMs = 30_000): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const last = this.received.at(-1)?.at ?? 0;
      if (performance.now() - last >= quietMs) return;
      if (performance.now() > deadline) throw new Error(`still receiving after ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  close(): void {
    void this.leave();
  }

  /** Data messages on the `transcript` topic from `from` (default: anyone). */
  transcripts(from?: string): Record<string, unknown>[] {
    return this.data
      .filter((received) => received.topic === "transcript" && (from === undefined || received.from === from))
      .map((received) => received.message);
  }

  /** All samples heard on `key` (`<identity>/<track name>`), joined. */
  samplesOf(key: string): Int16Array {
    const chunks = this.heard.get(key) ?? [];
    const joined = new Int16Array(chunks.reduce((sum, chunk) => sum + chunk.length, 0));
    let offset = 0;
    for (const chunk of chunks) {
      joined.set(chunk, offset);
      offset += chunk.length;
    }
    return joined;
  }

  /** Seconds of sound (20 ms windows with RMS above -40 dBFS) heard on `key`. */
  soundSeconds(key: string): number {
    const samples = this.samplesOf(key);
    const window = HEARD_RATE / 50;
    let loud = 0;
    for (let offset = 0; offset + window <= samples.length; offset += window) {
      let sum = 0;
      for (let i = offset; i < offset + window; i += 1) sum += (samples[i]! / 32768) ** 2;
      if (Math.sqrt(sum / window) > 0.01) loud += 1;
    }
    return loud / 50;
  }

  async leave(): Promise<void> {
    await this.room.disconnect().catch(() => undefined);
  }
}
