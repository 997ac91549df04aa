import { EventEmitter } from "node:events";
import type { ReadableStreamDefaultReader, ReadableStreamReadResult } from "node:stream/web";
import { log } from "@livekit/agents";
import * as livekit from "@livekit/rtc-node";
import type {
  AudioFrame,
  AudioSource,
  LocalTrackPublication,
  RemoteParticipant,
  RemoteTrack,
  RemoteTrackPublication,
  Room,
} from "@livekit/rtc-node";
import type { RealtimeSession, SessionParams, TranscriptMessage } from "@relay-translate/client";
import { INPUT_SAMPLE_RATE, OUTPUT_SAMPLE_RATE, SpeechFramer } from "./audio.js";
import { openSession, relayConnection, type RelayConnection, type RelayOptions } from "./connection.js";

export interface TranslatorOptions extends RelayOptions {
  /** The language everyone's speech is translated into. */
  readonly targetLanguage: string;
  /** The language spoken [en], or "auto" (needs `model: "relay-2"`): identified per utterance. */
  readonly sourceLanguage?: string;
  /** The two languages are a pair: each utterance goes into the other one [false]. */
  readonly twoWay?: boolean;
  /** The voice's gender [male]; "clone": each speaker in their own voice, where the service can. */
  readonly voiceType?: "male" | "female" | "clone";
  /** relay-2 adds speaker labels and `sourceLanguage: "auto"` [relay-1]. */
  readonly model?: "relay-1" | "relay-2";
  /** Names and jargon to expect (relay's `context`). */
  readonly context?: string;
  /** Whose speech is translated [every participant that is not an agent]. */
  readonly translates?: (participant: RemoteParticipant) => boolean;
}

/** A transcript of someone's speech in the room: theirs, or its translation. */
export type RoomTranscript = TranscriptMessage & {
  /** Whose speech it is. */
  readonly participant: string;
};

export interface TranslatorEvents {
  transcript: [RoomTranscript];
  /** Something went wrong for one participant's translation; the others go on. */
  error: [Error & { readonly participant: string }];
}

/** The track a participant's translated speech is published on. */
export const translatedTrackName = (identity: string): string => `translated-audio-${identity}`;

/** The LiveKit transcription topic and attributes, as agents publishes them. */
const TRANSCRIPTION_TOPIC = "lk.transcription";
/** A session that drops is reopened this many times in a row before the participant is given up. */
const MAX_REOPENS = 3;

interface Listener {
  readonly identity: string;
  readonly trackSid: string;
  readonly stop: AbortController;
  pending?: Promise<ReadableStreamReadResult<AudioFrame>> | undefined;
}

/**
 * relay's room translation run inside your own agent: each participant's microphone is streamed
 * into a relay session of their own, their translated speech is published on a track of its own
 * (`translated-audio-<identity>`, so overlapping speakers never mix) and transcripts go to the room
 * on the `lk.transcription` topic (finals) and to `transcript` listeners (all).
 */
export class Translator extends EventEmitter<TranslatorEvents> {
  readonly #connection: RelayConnection;
  readonly #options: TranslatorOptions;
  readonly #rtc: typeof livekit;
  readonly #listeners = new Map<string, Listener>();
  #room: Room | undefined;

  /** `rtc` is for tests: stand-ins for the parts that need a LiveKit server. */
  constructor(options: TranslatorOptions, internals: { rtc?: typeof livekit } = {}) {
    super();
    this.#connection = relayConnection(options);
    this.#options = options;
    this.#rtc = internals.rtc ?? livekit;
  }

  /** The session each participant gets. */
  get sessionParams(): SessionParams {
    const { sourceLanguage, targetLanguage, twoWay, voiceType, model, context } = this.#options;
    return {
      sourceLanguage: sourceLanguage ?? "en",
      targetLanguage,
      ...(twoWay ? { twoWay } : {}),
      ...(voiceType ? { voiceType } : {}),
      ...(model ? { modelName: model } : {}),
      ...(context ? { context } : {}),
    };
  }

  /** Starts translating a connected room (`ctx.room` after `ctx.connect()`): who is there now, and who comes. */
  start(room: Room): void {
    if (this.#room) throw new Error("relay.Translator: already started");
    this.#room = room;
    const { RoomEvent } = this.#rtc;
    room.on(RoomEvent.TrackSubscribed, this.#subscribed);
    room.on(RoomEvent.TrackUnsubscribed, this.#unsubscribed);
    room.on(RoomEvent.ParticipantDisconnected, this.#left);
    for (const participant of room.remoteParticipants.values())
      for (const publication of participant.trackPublications.values())
        if (publication.track) this.#subscribed(publication.track, publication, participant);
  }

  /** Stops every translation and unpublishes their tracks. */
  async close(): Promise<void> {
    const room = this.#room;
    if (room) {
      const { RoomEvent } = this.#rtc;
      room.off(RoomEvent.TrackSubscribed, this.#subscribed);
      room.off(RoomEvent.TrackUnsubscribed, this.#unsubscribed);
      room.off(RoomEvent.ParticipantDisconnected, this.#left);
    }
    for (const listener of this.#listeners.values()) listener.stop.abort();
    this.#listeners.clear();
  }

  #isTranslated(participant: RemoteParticipant): boolean {
    if (this.#options.translates) return this.#options.translates(participant);
    return participant.kind !== this.#rtc.ParticipantKind.AGENT;
  }

  readonly #subscribed = (
    track: RemoteTrack,
    publication: RemoteTrackPublication,
    participant: RemoteParticipant,
  ): void => {
    const { TrackKind, TrackSource } = this.#rtc;
    if (track.kind !== TrackKind.KIND_AUDIO || publication.source !== TrackSource.SOURCE_MICROPHONE) return;
    if (!this.#isTranslated(participant) || this.#listeners.has(participant.identity)) return;
    const listener: Listener = {
      identity: participant.identity,
      trackSid: publication.sid ?? "",
      stop: new AbortController(),
    };
    this.#listeners.set(participant.identity, listener);
    void this.#translate(listener, track).finally(() => {
      if (this.#listeners.get(listener.identity) === listener) this.#listeners.delete(listener.identity);
    });
  };

  readonly #unsubscribed = (
    _track: RemoteTrack,
    publication: RemoteTrackPublication,
    participant: RemoteParticipant,
  ): void => {
    const listener = this.#listeners.get(participant.identity);
    if (listener?.trackSid !== (publication.sid ?? "")) return;
    listener.stop.abort();
    this.#listeners.delete(participant.identity);
  };

  readonly #left = (participant: RemoteParticipant): void => {
    this.#listeners.get(participant.identity)?.stop.abort();
    this.#listeners.delete(participant.identity);
  };

  /** One participant: their audio into relay sessions (reopened when one drops), the speech out on their track. */
  async #translate(listener: Listener, track: RemoteTrack): Promise<void> {
    const { identity, stop } = listener;
    const rtc = this.#rtc;
    const room = this.#room!;
    const source = new rtc.AudioSource(OUTPUT_SAMPLE_RATE, 1);
    const local = rtc.LocalAudioTrack.createAudioTrack(translatedTrackName(identity), source);
    let publication: LocalTrackPublication | undefined;
    const frames = new rtc.AudioStream(track, { sampleRate: INPUT_SAMPLE_RATE, numChannels: 1 });
    const reader = frames.getReader();
    stop.signal.addEventListener("abort", () => void reader.cancel().catch(() => undefined), { once: true });
    try {
      const options = new rtc.TrackPublishOptions({ source: rtc.TrackSource.SOURCE_MICROPHONE });
      publication = await room.localParticipant!.publishTrack(local, options);
      let failures = 0;
      while (!stop.signal.aborted) {
        let session: RealtimeSession;
        try {
          session = await openSession(this.#connection, this.sessionParams, "relay.Translator");
        } catch (error) {
          if (++failures > MAX_REOPENS || !(error as { retryable?: boolean }).retryable) throw error;
          await new Promise((resolve) => setTimeout(resolve, 1000 * failures));
          continue;
        }
        const ended = await this.#run(session, listener, reader, source);
        if (ended) break;
        failures = 0;
        log().warn({ participant: identity }, "relay session closed unexpectedly, reopening");
      }
    } catch (error) {
      if (!stop.signal.aborted)
        this.emit(
          "error",
          Object.assign(error instanceof Error ? error : new Error(String(error)), { participant: identity }),
        );
    } finally {
      reader.cancel().catch(() => undefined);
      if (publication?.sid)
        await room.localParticipant?.unpublishTrack(publication.sid).catch(() => undefined);
      await source.close().catch(() => undefined);
    }
  }

  /**
   * One session: true when the participant's audio ended or translation was stopped, false when
   * the session dropped first (the caller opens another).
   */
  async #run(
    session: RealtimeSession,
    listener: Listener,
    reader: ReadableStreamDefaultReader<AudioFrame>,
    source: AudioSource,
  ): Promise<boolean> {
    const framer = new SpeechFramer();
    // The native source paces playback (it holds 1 s): frames are handed over one at a time.
    let playing = Promise.resolve();
    session.onAudio = (samples) => {
      for (const frame of framer.push(samples))
        playing = playing.then(() => source.captureFrame(frame)).catch(() => undefined);
    };
    const reading = (async () => {
      for await (const message of session) {
        if (message.type === "original_transcript" || message.type === "translated_transcript") {
          this.#transcript({ ...message, participant: listener.identity }, listener.trackSid);
        } else if (message.type === "error") {
          log().warn({ participant: listener.identity }, `relay: ${message.error}`);
        }
      }
    })();
    const closed = session.closed.then(() => undefined);
    let ended = false;
    try {
      for (;;) {
        // A read still waiting when the session drops is kept for the next one: no frame is lost.
        listener.pending ??= reader.read();
        const read = await Promise.race([listener.pending, closed]);
        if (read === undefined) break;
        listener.pending = undefined;
        if (read.done || listener.stop.signal.aborted) {
          ended = true;
          break;
        }
        session.sendAudio(read.value.data.subarray(0, read.value.samplesPerChannel));
      }
    } catch {
      ended = true; // the track's stream was torn down
    } finally {
      if (ended) session.close(1000);
      await reading;
    }
    return ended || listener.stop.signal.aborted;
  }

  /** The language of a transcript's text: what was heard, or what it was translated into. */
  #languageOf(transcript: RoomTranscript): string {
    const heard = transcript.detected_language ?? transcript.source_language;
    if (transcript.type === "original_transcript") return heard;
    const { twoWay, sourceLanguage = "en", targetLanguage } = this.#options;
    return twoWay && heard === targetLanguage ? sourceLanguage : targetLanguage;
  }

  #transcript(transcript: RoomTranscript, trackSid: string): void {
    this.emit("transcript", transcript);
    if (!transcript.is_final || !transcript.text) return;
    const kind = transcript.type === "original_transcript" ? "original" : "translation";
    this.#room?.localParticipant
      ?.sendText(transcript.text, {
        topic: TRANSCRIPTION_TOPIC,
        attributes: {
          "lk.segment_id": `${transcript.correlation_id}:${kind}`,
          "lk.transcription_final": "true",
          "lk.transcribed_track_id": trackSid,
          language: this.#languageOf(transcript),
          "relay.participant": transcript.participant,
          "relay.kind": kind,
        },
      })
      .catch((error: unknown) => log().warn({ error }, "could not publish a transcript"));
  }
}
