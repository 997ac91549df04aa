import { AsrStreamBase } from "../kit/asr-stream.js";
import type { Hypothesis, LanguageCode, WordTiming } from "../../core/contracts.js";
import { DEFAULT_AGREEMENT_OPTIONS, LocalAgreement, type AgreementOptions } from "./agreement.js";
import type { DecodeKind, ScheduledDecode } from "./scheduler.js";

export const EMPTY_HYPOTHESIS: Hypothesis = Object.freeze({ text: "", words: Object.freeze([]) });

const SAMPLES_PER_MS = 16;
/**
 * An utterance's language is settled by the first identification over at least this much audio;
 * later decodes of the utterance then skip identification (one encoder pass less each) and every
 * part of the utterance is decoded in the same language.
 */
const LANGUAGE_SETTLES_AFTER_MS = 1_000;
/** A final decode of less uncommitted audio than this, with no word pending, is skipped. */
const MIN_FINAL_WINDOW_MS = 200;

/** One decode of a stream's uncommitted window. */
export interface DecodeInput {
  readonly audio: Int16Array;
  /** The utterance's committed text before the window (whisper continues it). */
  readonly promptText: string;
  /** An ISO 639-1 code, or "auto" to identify it. */
  readonly language: LanguageCode | "auto";
}

export interface Decoded {
  /** Timings from the start of the decoded audio. */
  readonly words: readonly WordTiming[];
  /** Identified or decoded language (ISO 639-1), when the decode ran. */
  readonly language?: LanguageCode;
}

/** What a stream needs from its engine. */
export interface StreamHost {
  /** Queues a decode; `input` is called when the decode gets a context, so it reads the newest audio. */
  decode(stream: WhisperCppStream, kind: DecodeKind, input: () => DecodeInput): ScheduledDecode<Decoded>;
  /** Cancels the stream's queued and running decodes. */
  cancelAll(stream: WhisperCppStream): void;
  /** The stream is done (finished or aborted). */
  forget(stream: WhisperCppStream): void;
}

function shifted(words: readonly WordTiming[], ms: number): WordTiming[] {
  return words.map((w) => ({ word: w.word, startMs: w.startMs + ms, endMs: w.endMs + ms }));
}

function hypothesisOf(words: readonly WordTiming[], language: LanguageCode | undefined): Hypothesis {
  const hypothesis = { text: words.map((w) => w.word).join(" "), words };
  return language === undefined ? hypothesis : { ...hypothesis, language };
}

/**
 * One utterance, streamed with local agreement (./agreement.ts): partial decodes of the uncommitted
 * window run in the background at a bounded rate — `partial()` never waits for whisper, it starts a
 * decode when one is due and returns what the newest finished one made of the utterance — and
 * `finish()` decodes only the window not yet committed. The state machine shared with PocketSphinx is
 * in ../asr-stream.ts.
 */
export class WhisperCppStream extends AsrStreamBase {
  private audio = new Int16Array(16_000 * 4);
  private readonly agreement: LocalAgreement;
  private latest: Hypothesis = EMPTY_HYPOTHESIS;
  /** Samples in the audio of the newest partial decode that has started. */
  private partialMark = 0;
  private partialDecode: ScheduledDecode<Decoded> | undefined;
  /** The utterance's language: named by the session, or settled by identification. */
  private language: LanguageCode | undefined;
  /** Opened with "auto": hypotheses report the language identified. */
  private readonly identifies: boolean;
  /** The newest identification, before it settles. */
  private heard: LanguageCode | undefined;

  constructor(
    private readonly host: StreamHost,
    private readonly partialIntervalSamples: number,
    language: LanguageCode | "auto",
    agreement: AgreementOptions = DEFAULT_AGREEMENT_OPTIONS,
  ) {
    super("whisper.cpp");
    this.agreement = new LocalAgreement(agreement);
    this.identifies = language === "auto";
    if (language !== "auto") this.language = language;
  }

  protected accept(pcm: Int16Array): void {
    if (this.samples + pcm.length > this.audio.length) {
      const grown = new Int16Array(Math.max(this.audio.length * 2, this.samples + pcm.length));
      grown.set(this.audio.subarray(0, this.samples));
      this.audio = grown;
    }
    this.audio.set(pcm, this.samples);
  }

  protected currentHypothesis(): Promise<Hypothesis> {
    const fresh = this.samples - this.partialMark;
    if (this.partialDecode === undefined && fresh > 0 && fresh >= this.partialIntervalSamples) {
      this.startPartial();
    }
    return Promise.resolve(this.latest);
  }

  protected async conclude(): Promise<Hypothesis> {
    // A partial decode that has not started is dropped; a running one is stopped where the build
    // allows it (else it finishes unseen) while the final decode waits for a context.
    this.partialDecode?.cancel();
    this.partialDecode = undefined;
    const startMs = this.agreement.windowStartMs;
    const windowMs = this.samples / SAMPLES_PER_MS - startMs;
    if (this.samples === 0 || (windowMs < MIN_FINAL_WINDOW_MS && this.agreement.pendingCount === 0)) {
      return this.hypothesis(this.agreement.finish([]));
    }
    const decoded = await this.host.decode(this, "final", () => this.window()).result;
    this.hearLanguage(decoded, windowMs);
    return this.hypothesis(this.agreement.finish(shifted(decoded.words, startMs)));
  }

  protected override afterFinish(): void {
    this.host.forget(this);
  }

  /** A pending `finish()` then rejects. */
  protected aborted(): void {
    this.partialDecode = undefined;
    this.host.cancelAll(this);
    this.host.forget(this);
  }

  private startPartial(): void {
    let startMs = 0;
    let endMs = 0;
    const decode = this.host.decode(this, "partial", () => {
      const input = this.window();
      this.partialMark = this.samples;
      startMs = this.agreement.windowStartMs;
      endMs = this.samples / SAMPLES_PER_MS;
      return input;
    });
    this.partialDecode = decode;
    decode.result.then(
      (decoded) => {
        if (this.partialDecode !== decode) return;
        this.partialDecode = undefined;
        if (!this.isOpen) return;
        this.hearLanguage(decoded, endMs - startMs);
        this.agreement.accept(shifted(decoded.words, startMs), startMs, endMs);
        this.latest = this.hypothesis(this.agreement.words);
      },
      () => {
        // A failed or cancelled partial decode leaves the previous hypothesis; a real failure shows in
        // finish(), which decodes the same audio again.
        if (this.partialDecode === decode) this.partialDecode = undefined;
      },
    );
  }

  private hypothesis(words: readonly WordTiming[]): Hypothesis {
    return hypothesisOf(words, this.identifies ? (this.language ?? this.heard) : undefined);
  }

  private hearLanguage(decoded: Decoded, audioMs: number): void {
    if (this.language !== undefined || decoded.language === undefined) return;
    this.heard = decoded.language;
    if (audioMs >= LANGUAGE_SETTLES_AFTER_MS) this.language = decoded.language;
  }

  /** The window's audio (./agreement.ts), in an ArrayBuffer of its own (the addon reads whole buffers). */
  private window(): DecodeInput {
    const start = Math.min(Math.round(this.agreement.windowStartMs * SAMPLES_PER_MS), this.samples);
    return {
      audio: this.audio.slice(start, this.samples),
      promptText: this.agreement.promptText,
      language: this.language ?? "auto",
    };
  }
}
