import type { ServerMessage } from "../wire/messages.js";
import type { FastifyBaseLogger } from "fastify";
import type { EngineRegistry } from "../engines/routing/registry.js";
import type { LanguageCode, Voice } from "../core/contracts.js";
import { Channel } from "../core/channel.js";
import { createLivePipeline, prepareVoiceCloning } from "../pipeline/session-pipeline.js";
import type { PaceOptions } from "../pipeline/pacing.js";
import type { TranslationPipeline } from "../pipeline/translation-pipeline.js";
import { errorFrame } from "../wire/error-frame.js";
import { transcriptMessage, type TranscriptEvent } from "../wire/transcript-message.js";
import { languagesHeardBy, listenersOf, roomDirections, roomSpeakerPlan, trackOf } from "./room-languages.js";
import type { RoomConnection, RoomEvent, RoomLanguages, RoomMember, SpeechOutput } from "./types.js";

/** One line of translated speech on its way to its language's listeners. */
interface Clip {
  readonly output: SpeechOutput;
  readonly frames: Channel<Float32Array>;
}

export interface TranslatorOptions {
  readonly registry: EngineRegistry;
  readonly room: RoomLanguages;
  /**
   * A library voice, or `"clone"`: each speaker is voiced by the library voice measured nearest to
   * them, converted to their own tone colour where a converter is loaded
   * (src/speakers/tone-colors.ts); undefined: no speech, transcripts only.
   */
  readonly voice: Voice | "clone" | undefined;
  /** How speech keeps pace with the listeners (src/pipeline/pacing.ts); undefined: natural speed. */
  readonly pace: PaceOptions | undefined;
  readonly context: string;
  /** The account that opened the room: shared engines serve accounts in turn. */
  readonly account: string;
  readonly log: FastifyBaseLogger;
  /** Called whenever the last participant has left. */
  readonly onEmpty: () => void;
}

/**
 * The translator participant of a room. It listens through a `RoomConnection` (embedded or
 * LiveKit), runs one translation pipeline per speaking participant — each utterance translated
 * into every language someone else listens in (src/rooms/room-languages.ts) — and publishes every
 * transcript event as data (originals to everyone, translations to their language's listeners)
 * and every line of translated speech on its language's track.
 */
export class RoomTranslator {
  private readonly speakers = new Map<string, TranslationPipeline>();
  /** Pipelines of participants who left, still finishing what they had said. */
  private readonly departing = new Set<TranslationPipeline>();
  private readonly present = new Map<string, RoomMember>();
  /** Participants whose speech cannot be translated (their language is not recognized): they listen. */
  private readonly unheard = new Set<string>();
  /**
   * Per language, clips of translated speech in the order they start, each a channel of a
   * pipeline's frames. A language's clips are published one after another so speakers never
   * interleave on its track; languages are independent of each other.
   */
  private readonly tracks = new Map<LanguageCode, { clips: Channel<Clip>; publishing: Promise<void> }>();
  private closed = false;

  constructor(
    private readonly connection: RoomConnection,
    private readonly options: TranslatorOptions,
  ) {
    for (const member of connection.participants) this.present.set(member.identity, member);
    const { registry, room } = options;
    // Only the directions someone can be heard in (a listen-only language speaks to no one).
    if (options.voice === "clone")
      for (const { from, to } of roomDirections(room, (language) => !!registry.recognizer(language)))
        prepareVoiceCloning(registry, from, to);
  }

  get participantCount(): number {
    return this.present.size;
  }

  /** Listens until the connection ends; returns when the translator has left the room. */
  async run(): Promise<void> {
    this.openTargetOutput();
    for await (const event of this.connection.events) this.handle(event);
    await this.close();
    await Promise.all([...this.tracks.values()].map(({ publishing }) => publishing));
  }

  /**
   * A room created as the spec says has one output everyone hears (`translated-audio`, in the
   * target language): published at once, so that Pinch's clients, which subscribe to it when they
   * see it, hear the first translation whole. Best effort: speech publishes it anyway. A translator
   * without a voice (`enable_audio_output: false`) publishes no track.
   */
  private openTargetOutput(): void {
    const { room, voice } = this.options;
    if (!room.pair || voice === undefined) return;
    const language = room.pair.target;
    this.connection
      .openOutput({ language, track: trackOf(language, room), listeners: [] })
      .catch((error: unknown) =>
        this.options.log.debug({ err: error }, "translator could not publish its track"),
      );
  }

  /** Stops every pipeline and leaves the room. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const pipelines = [...this.speakers.values(), ...this.departing];
    this.speakers.clear();
    this.departing.clear();
    await Promise.allSettled(pipelines.map((pipeline) => pipeline.close()));
    for (const { clips } of this.tracks.values()) clips.close();
    await this.connection.leave().catch((error: unknown) => {
      this.options.log.debug({ err: error }, "translator could not leave the room cleanly");
    });
  }

  private handle(event: RoomEvent): void {
    if (this.closed) return;
    if (event.type === "participant_joined") {
      this.present.set(event.identity, {
        identity: event.identity,
        ...(event.language === undefined ? {} : { language: event.language }),
      });
    } else if (event.type === "participant_left") {
      this.present.delete(event.identity);
      const pipeline = this.speakers.get(event.identity);
      this.speakers.delete(event.identity);
      // What they said before leaving is still translated for those who stay.
      if (pipeline) {
        this.departing.add(pipeline);
        void pipeline.end().finally(() => this.departing.delete(pipeline));
      }
      if (this.present.size === 0) this.options.onEmpty();
    } else {
      if (!this.present.has(event.identity)) this.present.set(event.identity, { identity: event.identity });
      this.speakerPipeline(event.identity)?.pushAudio(event.pcm);
    }
  }

  private speakerPipeline(identity: string): TranslationPipeline | undefined {
    let pipeline = this.speakers.get(identity);
    if (pipeline || this.unheard.has(identity)) return pipeline;
    const { registry, room, voice, pace, context, account } = this.options;
    const speaker = this.present.get(identity) ?? { identity };
    if (speaker.language !== undefined && !registry.recognizer(speaker.language)) {
      // A language the room may listen in but no engine recognizes: said once, to them alone.
      this.unheard.add(identity);
      void this.publish(
        errorFrame(
          `speech in ${speaker.language} is not recognized by the configured engines: the others do not ` +
            `hear you translated; you hear them in ${speaker.language}`,
          { participant: identity },
        ),
        [identity],
      );
      return undefined;
    }
    try {
      pipeline = createLivePipeline(registry, {
        plan: roomSpeakerPlan(room, speaker, () => languagesHeardBy(speaker, this.present.values(), room)),
        finalizeMode: "stable",
        voice,
        pace,
        context,
        account,
      });
    } catch (error) {
      this.unheard.add(identity);
      this.options.log.error({ err: error, participant: identity }, "room translator could not start");
      return undefined;
    }
    this.speakers.set(identity, pipeline);
    void this.forward(speaker, pipeline);
    return pipeline;
  }

  private async forward(speaker: RoomMember, pipeline: TranslationPipeline): Promise<void> {
    const { identity } = speaker;
    /** The clip of each language this speaker's pipeline is emitting (its last frame carries `clipEnd`). */
    const clips = new Map<LanguageCode, Clip>();
    try {
      for await (const event of pipeline.events) {
        if (event.type === "audio") {
          let clip = clips.get(event.language);
          if (!clip) {
            clip = this.startClip(speaker, event.language);
            clips.set(event.language, clip);
          }
          clip.frames.push(event.samples);
          if (event.clipEnd) {
            clip.frames.close();
            clips.delete(event.language);
          }
        } else if (event.type === "error") {
          // Logged as well as published: an operator sees engines failing under rooms.
          this.options.log[event.fatal ? "error" : "warn"](
            { participant: identity, segment: event.segmentId },
            `pipeline: ${event.message}`,
          );
          await this.publish(
            errorFrame(event.message, {
              participant: identity,
              ...(event.segmentId === undefined ? {} : { correlationId: event.segmentId }),
            }),
          );
          if (event.fatal && this.speakers.get(identity) === pipeline) {
            this.speakers.delete(identity);
            void pipeline.close();
          }
        } else if (event.type !== "finalized") {
          // (Rooms' pipelines are never finalized.)
          await this.publishTranscript(speaker, event);
        }
      }
    } finally {
      for (const clip of clips.values()) clip.frames.close();
    }
  }

  /**
   * Originals go to everyone (captions of what was said); a translation only to those who hear its
   * language. Both name the speaker (`participant`) and the language of their text: `language`,
   * and `language_detected`, the field Pinch's LiveKit Agents and Pipecat plugins read for it.
   */
  private async publishTranscript(speaker: RoomMember, event: TranscriptEvent): Promise<void> {
    const { room } = this.options;
    const to = event.type === "translated" ? event.to : undefined;
    const language = event.type === "original" ? event.language : to;
    const message = {
      ...transcriptMessage(event, { ...transcriptLanguages(speaker, room, to), timings: true }),
      participant: speaker.identity,
      ...(language === undefined ? {} : { language, language_detected: language }),
    };
    await this.publish(
      message,
      to === undefined ? undefined : listenersOf(to, speaker, this.present.values(), room),
    );
  }

  /** A new clip of `speaker`'s speech in `language`, queued for that language's track. */
  private startClip(speaker: RoomMember, language: LanguageCode): Clip {
    const output: SpeechOutput = {
      language,
      track: trackOf(language, this.options.room),
      listeners: listenersOf(language, speaker, this.present.values(), this.options.room),
    };
    const clip: Clip = { output, frames: new Channel<Float32Array>() };
    let track = this.tracks.get(language);
    if (!track) {
      const clips = new Channel<Clip>();
      track = { clips, publishing: this.publishClips(clips) };
      this.tracks.set(language, track);
      if (this.closed) clips.close();
    }
    track.clips.push(clip);
    return clip;
  }

  private async publish(message: ServerMessage, listeners?: readonly string[]): Promise<void> {
    await this.connection.publishData(message, listeners).catch((error: unknown) => {
      this.options.log.warn({ err: error }, "room translator could not publish a transcript");
    });
  }

  private async publishClips(clips: Channel<Clip>): Promise<void> {
    for await (const clip of clips) {
      try {
        for await (const frame of clip.frames) await this.connection.publishAudio(frame, clip.output);
      } catch (error) {
        this.options.log.warn({ err: error }, "room translator could not publish speech");
      }
    }
  }
}

/**
 * The `source_language` and `target_language` of a speaker's transcripts: a spec room's pair (a
 * declared speaker's own language as the source), or in a room created with `languages` the
 * speaker's language and the translation's (another of the room's for an original).
 */
function transcriptLanguages(
  speaker: RoomMember,
  room: RoomLanguages,
  to: LanguageCode | undefined,
): { sourceLanguage: LanguageCode; targetLanguage: LanguageCode } {
  const source = speaker.language ?? room.pair?.source ?? room.languages[0]!;
  const target = to ?? room.pair?.target ?? room.languages.find((language) => language !== source)!;
  return { sourceLanguage: source, targetLanguage: target };
}
