import { APIError } from "@livekit/agents";
import type { AudioFrame } from "@livekit/rtc-node";
import { MAX_WAITING_SPEAKS, speakableLines, type RealtimeSession } from "@relay-translate/client";
import { SpeechFramer } from "./audio.js";

interface Line<Tag> {
  readonly id: string;
  readonly tag: Tag;
  /** The last part of what one `speak` was given. */
  readonly last: boolean;
  readonly done: () => void;
  readonly fail: (error: Error) => void;
}

export interface SpeakerHandlers<Tag> {
  /** Each 100 ms frame of speech, in order. */
  readonly frame: (frame: AudioFrame) => void;
  /** A `speak` was spoken to its end (its last frame was handed to `frame` before this). */
  readonly lineEnded: (tag: Tag) => void;
}

/**
 * Lines spoken by a `mode=tts` session. relay speaks them in order: `speak_ack`, the line's audio,
 * then `speech_end` (after an `error` if synthesis failed); a refused line gets only an `error`
 * naming it. So the audio between an ack and its `speech_end` is that line's: messages are read
 * as they arrive (`onMessage`), in order with the audio.
 */
export class LineSpeaker<Tag = undefined> {
  private readonly waiting: Line<Tag>[] = [];
  private speaking: Line<Tag> | undefined;
  private failure: Error | undefined;
  private count = 0;
  private readonly framer = new SpeechFramer();
  private readonly room: (() => void)[] = [];

  constructor(
    private readonly session: RealtimeSession,
    private readonly handlers: SpeakerHandlers<Tag>,
    private readonly describe: (problem: string) => string,
  ) {
    session.onAudio = (samples) => {
      if (this.speaking) for (const frame of this.framer.push(samples)) handlers.frame(frame);
    };
    session.onMessage = (message) => {
      if (message.type === "speak_ack") {
        const index = this.waiting.findIndex((line) => line.id === message.correlation_id);
        if (index >= 0) this.speaking = this.waiting.splice(index, 1)[0];
      } else if (message.type === "speech_end") {
        this.lineEnded();
      } else if (message.type === "error") {
        const error = new APIError(this.describe(message.error), { retryable: false });
        const refused = this.waiting.findIndex((line) => line.id === message.correlation_id);
        if (refused >= 0) this.waiting.splice(refused, 1)[0]!.fail(error);
        else this.failure ??= error;
      }
    };
    void session.closed.then(({ code, reason }) => {
      const closed = new APIError(
        this.describe(`the session closed (close ${code}${reason ? ` ${reason}` : ""})`),
      );
      for (const line of [...this.waiting.splice(0), ...(this.speaking ? [this.speaking] : [])])
        line.fail(closed);
      this.speaking = undefined;
      for (const wake of this.room.splice(0)) wake();
    });
  }

  private lineEnded(): void {
    const line = this.speaking;
    this.speaking = undefined;
    for (const frame of this.framer.flush()) this.handlers.frame(frame);
    if (line) {
      if (line.last) this.handlers.lineEnded(line.tag);
      line.done();
    }
    this.room.shift()?.();
  }

  /** The first synthesis failure relay reported, if any. */
  get error(): Error | undefined {
    return this.failure;
  }

  /**
   * Speaks a line (cut after a sentence, else a word, where over relay's bound: the SDK's
   * `speakableLines`), waiting first while relay holds as many lines as it takes; resolves when
   * the line has been spoken.
   */
  async speak(text: string, tag: Tag, options: { voiceId?: number; language?: string } = {}): Promise<void> {
    const spoken: Promise<void>[] = [];
    const parts = speakableLines(text);
    for (const [index, part] of parts.entries()) {
      while (this.session.isOpen && this.waiting.length + (this.speaking ? 1 : 0) >= MAX_WAITING_SPEAKS)
        await new Promise<void>((resolve) => this.room.push(resolve));
      const id = `line-${++this.count}`;
      spoken.push(
        new Promise<void>((done, fail) => {
          if (!this.session.isOpen) return fail(new APIError(this.describe("the session is closed")));
          this.waiting.push({ id, tag, last: index === parts.length - 1, done, fail });
          this.session.speak(part, { ...options, correlationId: id });
        }),
      );
    }
    await Promise.all(spoken);
    if (this.failure) throw this.failure;
  }
}
