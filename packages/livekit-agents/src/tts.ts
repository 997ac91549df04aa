import { type APIConnectOptions, tokenize, tts } from "@livekit/agents";
import type { AudioFrame } from "@livekit/rtc-node";
import type { SessionParams } from "@relay-translate/client";
import { OUTPUT_SAMPLE_RATE } from "./audio.js";
import {
  logUnheardError,
  openSession,
  relayConnection,
  type RelayConnection,
  type RelayOptions,
} from "./connection.js";
import { LineSpeaker } from "./speaker.js";

export interface TTSOptions extends RelayOptions {
  /** The language the text is in and spoken in [en]. */
  readonly language?: string;
  /** A voice of relay's library (`GET /v1/voices`); wins over `voiceType`. */
  readonly voice?: number;
  /** The default voice's gender when `voice` is not set [male]. */
  readonly voiceType?: "male" | "female";
  /** How streamed text is cut into the lines relay speaks [agents' basic sentence tokenizer]. */
  readonly sentenceTokenizer?: tokenize.SentenceTokenizer;
}

type Voice = Pick<TTSOptions, "language" | "voice" | "voiceType">;

/**
 * relay's text to speech as an agents-js TTS: a `mode=tts` session per stream, text cut into
 * sentences, each a `speak` line; speech out as 24 kHz mono AudioFrames of 100 ms.
 */
export class TTS extends tts.TTS {
  label = "relay.TTS";
  readonly #connection: RelayConnection;
  #voice: Voice;
  readonly #tokenizer: tokenize.SentenceTokenizer;

  constructor(options: TTSOptions = {}) {
    super(OUTPUT_SAMPLE_RATE, 1, { streaming: true });
    this.#connection = relayConnection(options);
    this.#voice = { language: options.language, voice: options.voice, voiceType: options.voiceType };
    this.#tokenizer = options.sentenceTokenizer ?? new tokenize.basic.SentenceTokenizer();
  }

  override get provider(): string {
    return "relay";
  }

  /** An `error` with no listener is logged rather than thrown (`logUnheardError`). */
  override emit<E extends keyof tts.TTSCallbacks>(
    event: E,
    ...args: Parameters<tts.TTSCallbacks[E]>
  ): boolean {
    if (event !== "error" || this.listenerCount("error") > 0) return super.emit(event, ...args);
    logUnheardError(args[0] as Parameters<tts.TTSCallbacks["error"]>[0]);
    return false;
  }

  /** The service this TTS uses. */
  get baseUrl(): string {
    return this.#connection.baseUrl;
  }

  /** Applies to lines spoken from now on, in open streams too (relay changes a line's voice and language per `speak`). */
  updateOptions(options: Voice): void {
    this.#voice = { ...this.#voice, ...options };
  }

  /** @internal */
  get sessionParams(): SessionParams {
    const { language, voice, voiceType } = this.#voice;
    return {
      mode: "tts",
      targetLanguage: language ?? "en",
      ...(voice !== undefined ? { voiceId: voice } : {}),
      ...(voiceType !== undefined ? { voiceType } : {}),
    };
  }

  /** @internal What each line carries: the voice and language as they are now. */
  get lineOptions(): { voiceId?: number; language?: string } {
    const { language, voice } = this.#voice;
    return { ...(voice !== undefined ? { voiceId: voice } : {}), ...(language ? { language } : {}) };
  }

  /** @internal */
  get connection(): RelayConnection {
    return this.#connection;
  }

  /** @internal */
  get tokenizer(): tokenize.SentenceTokenizer {
    return this.#tokenizer;
  }

  synthesize(text: string, connOptions?: APIConnectOptions, abortSignal?: AbortSignal): ChunkedStream {
    return new ChunkedStream(this, text, connOptions, abortSignal);
  }

  stream(options?: { connOptions?: APIConnectOptions }): SynthesizeStream {
    return new SynthesizeStream(this, options?.connOptions);
  }
}

/** One text, one line (or more, past relay's length bound), in a session of its own. */
export class ChunkedStream extends tts.ChunkedStream {
  label = "relay.ChunkedStream";
  readonly #tts: TTS;
  readonly #text: string;

  constructor(owner: TTS, text: string, connOptions?: APIConnectOptions, abortSignal?: AbortSignal) {
    super(text, owner, connOptions, abortSignal);
    this.#tts = owner;
    this.#text = text;
  }

  /**
   * A failure is reported on the TTS's `error` event and ends the stream, with no retry: agents
   * 1.9's ChunkedStream rethrows a failed attempt into a promise nobody holds (an unhandled
   * rejection, which ends a Node process), so it is not given one.
   */
  protected async run(): Promise<void> {
    try {
      await this.#speak();
    } catch (error) {
      if (this.abortSignal.aborted) return;
      this.#tts.emit("error", {
        type: "tts_error",
        timestamp: Date.now(),
        label: this.#tts.label,
        error: error instanceof Error ? error : new Error(String(error)),
        recoverable: false,
      });
    }
  }

  async #speak(): Promise<void> {
    const session = await openSession(this.#tts.connection, this.#tts.sessionParams, this.label);
    const requestId = session.ready.session_id;
    let held: AudioFrame | undefined;
    const put = (frame: AudioFrame, final: boolean) => {
      if (!this.queue.closed) this.queue.put({ requestId, segmentId: requestId, frame, final });
    };
    const speaker = new LineSpeaker(
      session,
      {
        frame: (frame) => {
          if (held) put(held, false);
          held = frame;
        },
        lineEnded: () => undefined,
      },
      (problem) => `${this.label}: ${this.#tts.baseUrl}: ${problem}`,
    );
    const abort = () => session.close(1000);
    this.abortSignal.addEventListener("abort", abort, { once: true });
    try {
      await speaker.speak(this.#text, undefined, this.#tts.lineOptions);
      if (held) put(held, true);
    } finally {
      this.abortSignal.removeEventListener("abort", abort);
      session.close(1000);
    }
  }
}

interface Segment {
  readonly id: string;
  /** Lines sent and not yet spoken to their end. */
  speaking: number;
  /** No more text will come for it (it was flushed, or the input ended). */
  closed: boolean;
}

/**
 * Streamed text (`pushText`/`flush`, or the agents' input stream) in, speech out: the text is cut
 * into sentences as it comes, each spoken as soon as it is complete, and each `flush` ends a
 * segment, whose last frame is `final`. END_OF_STREAM follows the last segment.
 */
export class SynthesizeStream extends tts.SynthesizeStream {
  label = "relay.SynthesizeStream";
  readonly #tts: TTS;

  constructor(owner: TTS, connOptions?: APIConnectOptions) {
    super(owner, connOptions);
    this.#tts = owner;
  }

  protected async run(): Promise<void> {
    const session = await openSession(this.#tts.connection, this.#tts.sessionParams, this.label);
    const requestId = session.ready.session_id;
    const segments: Segment[] = [];
    let held: AudioFrame | undefined;
    const put = (frame: AudioFrame, final: boolean, segmentId: string) => {
      if (!this.queue.closed) this.queue.put({ requestId, segmentId, frame, final });
    };
    /** Ends the segments that are over, in order: their last frame goes out `final`. */
    const settle = () => {
      while (segments[0]?.closed && segments[0].speaking === 0) {
        const segment = segments.shift()!;
        if (held) put(held, true, segment.id);
        held = undefined;
      }
    };
    const speaker = new LineSpeaker<Segment>(
      session,
      {
        frame: (frame) => {
          if (held) put(held, false, segments[0]?.id ?? requestId);
          held = frame;
        },
        lineEnded: (segment) => {
          segment.speaking--;
          settle();
        },
      },
      (problem) => `${this.label}: ${this.#tts.baseUrl}: ${problem}`,
    );
    const abort = () => session.close(1000);
    this.abortSignal.addEventListener("abort", abort, { once: true });
    const sentences = this.#tts.tokenizer.stream();
    const reading = (async () => {
      for await (const data of this.input) {
        if (this.abortSignal.aborted) break;
        if (data === SynthesizeStream.FLUSH_SENTINEL) sentences.flush();
        else sentences.pushText(data);
      }
      sentences.endInput();
    })();
    const lines: Promise<void>[] = [];
    try {
      for await (const { token, segmentId } of sentences) {
        if (this.abortSignal.aborted) break;
        if (!token.trim()) continue;
        let segment = segments.at(-1);
        if (segment?.id !== segmentId) {
          if (segment) segment.closed = true;
          segment = { id: segmentId, speaking: 0, closed: false };
          segments.push(segment);
          settle();
        }
        segment.speaking++;
        this.markStarted();
        lines.push(speaker.speak(token, segment, this.#tts.lineOptions));
        // Unhandled until awaited below; a failure ends the stream there.
        lines.at(-1)!.catch(() => undefined);
      }
      await reading;
      const last = segments.at(-1);
      if (last) last.closed = true;
      settle();
      await Promise.all(lines);
      if (!this.queue.closed) this.queue.put(SynthesizeStream.END_OF_STREAM);
    } finally {
      this.abortSignal.removeEventListener("abort", abort);
      sentences.close();
      session.close(1000);
    }
  }
}
