import type { ServerMessage } from "../wire/messages.js";
import type { FastifyBaseLogger } from "fastify";
import type { EngineRegistry } from "../engines/routing/registry.js";
import type { LanguageCode, Voice } from "../core/contracts.js";
import { Channel } from "../core/channel.js";
import { createLivePipeline, prepareVoiceCloning } from "../pipeline/session-pipeline.js";
import type { TranslationPipeline } from "../pipeline/translation-pipeline.js";
import { errorFrame } from "../wire/error-frame.js";
import { transcriptMessage, type TranscriptLanguages } from "../wire/transcript-message.js";
import type { RoomConnection, RoomEvent } from "./types.js";

export interface TranslatorOptions {
  readonly registry: EngineRegistry;
  readonly sourceLanguage: LanguageCode;
  readonly targetLanguage: LanguageCode;
  /**
   * A library voice, or `"clone"`: each speaker is voiced by the library voice measured nearest to
   * them, converted to their own tone colour where a converter is loaded
   * (src/speakers/tone-colors.ts); undefined: no speech, transcripts only.
   */
  readonly voice: Voice | "clone" | undefined;
  readonly context: string;
  /** The account that opened the room: shared engines serve accounts in turn. */
  readonly account: string;
  readonly log: FastifyBaseLogger;
  /** Called whenever the last participant has left. */
  readonly onEmpty: () => void;
}

/**
 * The translator participant of a room. It listens through a `RoomConnection` (embedded or
 * LiveKit), runs one translation pipeline per speaking participant, and publishes every
 * transcript event as data and every line of translated speech as audio.
 */
export class RoomTranslator {
  private readonly speakers = new Map<string, TranslationPipeline>();
  /** Pipelines of participants who left, still finishing what they had said. */
  private readonly departing = new Set<TranslationPipeline>();
  private readonly present = new Set<string>();
  /**
   * Clips of translated speech in the order they start, each a channel of the pipeline's frames.
   * Clips are published one after another so speakers never interleave; a clip's frames are
   * published as its pipeline emits them.
   */
  private readonly clips = new Channel<Channel<Float32Array>>();
  private readonly languages: TranscriptLanguages;
  private closed = false;

  constructor(
    private readonly connection: RoomConnection,
    private readonly options: TranslatorOptions,
  ) {
    this.languages = {
      sourceLanguage: options.sourceLanguage,
      targetLanguage: options.targetLanguage,
      timings: true,
    };
    for (const identity of connection.participants) this.present.add(identity);
    if (options.voice === "clone")
      prepareVoiceCloning(options.registry, options.sourceLanguage, options.targetLanguage);
  }

  get participantCount(): number {
    return this.present.size;
  }

  /** Listens until the connection ends; returns when the translator has left the room. */
  async run(): Promise<void> {
    const publishing = this.publishClips();
    for await (const event of this.connection.events) this.handle(event);
    await this.close();
    await publishing;
  }

  /** Stops every pipeline and leaves the room. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const pipelines = [...this.speakers.values(), ...this.departing];
    this.speakers.clear();
    this.departing.clear();
    await Promise.allSettled(pipelines.map((pipeline) => pipeline.close()));
    this.clips.close();
    await this.connection.leave().catch((error: unknown) => {
      this.options.log.debug({ err: error }, "translator could not leave the room cleanly");
    });
  }

  private handle(event: RoomEvent): void {
    if (this.closed) return;
    if (event.type === "participant_joined") {
      this.present.add(event.identity);
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
      this.present.add(event.identity);
      this.speakerPipeline(event.identity)?.pushAudio(event.pcm);
    }
  }

  private speakerPipeline(identity: string): TranslationPipeline | undefined {
    let pipeline = this.speakers.get(identity);
    if (pipeline) return pipeline;
    const { registry, sourceLanguage, targetLanguage, voice, context, account } = this.options;
    try {
      pipeline = createLivePipeline(registry, {
        sourceLanguage,
        targetLanguage,
        finalizeMode: "stable",
        voice,
        context,
        account,
      });
    } catch (error) {
      this.options.log.error({ err: error, participant: identity }, "room translator could not start");
      return undefined;
    }
    this.speakers.set(identity, pipeline);
    void this.forward(identity, pipeline);
    return pipeline;
  }

  private async forward(identity: string, pipeline: TranslationPipeline): Promise<void> {
    /** The clip this speaker's pipeline is emitting (its last frame carries `clipEnd`). */
    let clip: Channel<Float32Array> | undefined;
    try {
      for await (const event of pipeline.events) {
        if (event.type === "audio") {
          if (!clip) {
            clip = new Channel<Float32Array>();
            this.clips.push(clip);
          }
          clip.push(event.samples);
          if (event.clipEnd) {
            clip.close();
            clip = undefined;
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
        } else {
          await this.publish({ ...transcriptMessage(event, this.languages), participant: identity });
        }
      }
    } finally {
      clip?.close();
    }
  }

  private async publish(message: ServerMessage): Promise<void> {
    await this.connection.publishData(message).catch((error: unknown) => {
      this.options.log.warn({ err: error }, "room translator could not publish a transcript");
    });
  }

  private async publishClips(): Promise<void> {
    for await (const clip of this.clips) {
      try {
        for await (const frame of clip) await this.connection.publishAudio(frame);
      } catch (error) {
        this.options.log.warn({ err: error }, "room translator could not publish speech");
      }
    }
  }
}
