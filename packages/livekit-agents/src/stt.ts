import {
  type APIConnectOptions,
  type AudioBuffer,
  mergeFrames,
  normalizeLanguage,
  stt,
} from "@livekit/agents";
import { AudioFrame, AudioResampler } from "@livekit/rtc-node";
import type { RealtimeSession, SessionParams } from "@relay-translate/client";
import { INPUT_SAMPLE_RATE, monoSamples } from "./audio.js";
import {
  droppedError,
  logUnheardError,
  openSession,
  relayConnection,
  type RelayConnection,
  type RelayOptions,
} from "./connection.js";
import { finishSession, followTranscripts } from "./speech-session.js";
import { TranscriptEvents } from "./transcripts.js";

export interface STTOptions extends RelayOptions {
  /** The language spoken (ISO 639-1; a regional tag counts by its language) [en], or "auto" (needs relay-2): identified per utterance. */
  readonly language?: string;
  /** With `language: "auto"`: the languages to listen for. */
  readonly languageHints?: readonly string[];
  /** relay-2 adds speaker labels (`speakerId`), utterance times and `language: "auto"` [relay-1]. */
  readonly model?: "relay-1" | "relay-2";
  /** stable: finals as words settle, the earliest text [stable]; sentence: one final per sentence. */
  readonly finalizeMode?: "stable" | "sentence";
  /** Names and jargon to expect: recognition is biased toward them (relay's `context`). */
  readonly keywords?: readonly string[];
  /** Free text about the conversation (relay's `context`, with `keywords` appended), up to 2000 characters. */
  readonly context?: string;
}

type Settings = Required<Pick<STTOptions, "language" | "model" | "finalizeMode">> &
  Pick<STTOptions, "languageHints" | "keywords" | "context">;

/**
 * relay's speech recognition as an agents-js STT: each stream is a real-time session with
 * `audioOutputEnabled=false`, reconnected as the agents' retry options say when its socket drops.
 */
export class STT extends stt.STT {
  label = "relay.STT";
  readonly #connection: RelayConnection;
  #settings: Settings;
  #sessionKeyterms: readonly string[] = [];
  readonly #streams = new Set<SpeechStream>();

  constructor(options: STTOptions = {}) {
    const model = options.model ?? "relay-1";
    super({
      streaming: true,
      interimResults: true,
      diarization: model === "relay-2",
      alignedTranscript: model === "relay-2" ? "chunk" : false,
      keyterms: true,
    });
    this.#connection = relayConnection(options);
    this.#settings = {
      language: options.language ?? "en",
      model,
      finalizeMode: options.finalizeMode ?? "stable",
      languageHints: options.languageHints,
      keywords: options.keywords,
      context: options.context,
    };
  }

  /** @internal */
  get finalizeMode(): "stable" | "sentence" {
    return this.#settings.finalizeMode;
  }

  override get model(): string {
    return this.#settings.model;
  }

  override get provider(): string {
    return "relay";
  }

  /** An `error` with no listener is logged rather than thrown (`logUnheardError`). */
  override emit<E extends keyof stt.STTCallbacks>(
    event: E,
    ...args: Parameters<stt.STTCallbacks[E]>
  ): boolean {
    if (event !== "error" || this.listenerCount("error") > 0) return super.emit(event, ...args);
    logUnheardError(args[0] as Parameters<stt.STTCallbacks["error"]>[0]);
    return false;
  }

  /** The service this STT uses. */
  get baseUrl(): string {
    return this.#connection.baseUrl;
  }

  /** The `context` sent to relay: the free text, then the keywords (the user's and the session's) as a list. */
  get context(): string | undefined {
    const keywords = [...new Set([...(this.#settings.keywords ?? []), ...this.#sessionKeyterms])];
    const parts = [this.#settings.context?.trim(), keywords.length ? keywords.join(", ") : undefined];
    return parts.filter(Boolean).join("\n") || undefined;
  }

  /**
   * The session's parameters. Transcripts only: the target is the spoken language itself, which
   * relay passes through untranslated (with "auto", the first hint, else English).
   */
  get sessionParams(): SessionParams {
    const { language, languageHints, model, finalizeMode } = this.#settings;
    const target = language === "auto" ? (languageHints?.[0] ?? "en") : language;
    return {
      sourceLanguage: language,
      ...(language === "auto" && languageHints?.length ? { languageHints } : {}),
      targetLanguage: target,
      audioOutputEnabled: false,
      modelName: model,
      finalizeMode,
      ...(this.context ? { context: this.context } : {}),
    };
  }

  /** `keywords` and `context` apply to open streams at once; the rest to streams opened after. */
  updateOptions(options: Partial<Omit<STTOptions, keyof RelayOptions>>): void {
    this.#settings = { ...this.#settings, ...options };
    this.#contextChanged();
  }

  /** @internal The agents' session keyterms, kept apart from the user's own keywords. */
  override _updateSessionKeyterms(keyterms: string[]): void {
    this.#sessionKeyterms = [...keyterms];
    this.#contextChanged();
  }

  #contextChanged(): void {
    for (const stream of this.#streams) stream.updateContext(this.context ?? "");
  }

  /** One utterance or more, recognized in a session of their own; the event has every final joined. */
  protected async _recognize(buffer: AudioBuffer, abortSignal?: AbortSignal): Promise<stt.SpeechEvent> {
    const frame = mergeFrames(buffer);
    const session = await openSession(this.#connection, this.sessionParams, this.label);
    const abort = () => session.close(1000);
    abortSignal?.addEventListener("abort", abort, { once: true });
    const samples = resampledMono(frame);
    const events = new TranscriptEvents(
      this.#settings.finalizeMode,
      () => samples.length / INPUT_SAMPLE_RATE,
    );
    const finals: stt.SpeechData[] = [];
    const { state, done } = followTranscripts(session, events, 0, (event) => {
      if (event.type === stt.SpeechEventType.FINAL_TRANSCRIPT) finals.push(event.alternatives![0]);
    });
    // 20 ms frames, as a microphone would send them.
    for (let i = 0; i < samples.length; i += 320) session.sendAudio(samples.subarray(i, i + 320));
    await finishSession(session, state);
    await done;
    abortSignal?.removeEventListener("abort", abort);
    const [first] = finals;
    return {
      type: stt.SpeechEventType.FINAL_TRANSCRIPT,
      alternatives: [
        {
          language: first?.language ?? normalizeLanguage(this.#settings.language),
          text: finals.map((data) => data.text).join(" "),
          startTime: first?.startTime ?? 0,
          endTime: finals.at(-1)?.endTime ?? samples.length / INPUT_SAMPLE_RATE,
          confidence: 1,
        },
      ],
    };
  }

  stream(options?: { connOptions?: APIConnectOptions }): SpeechStream {
    const stream = new SpeechStream(this, this.#connection, options?.connOptions, (closed) =>
      this.#streams.delete(closed),
    );
    this.#streams.add(stream);
    return stream;
  }
}

/** A whole buffer as relay reads it: mono 16 kHz. */
function resampledMono(frame: AudioFrame): Int16Array {
  const mono = monoSamples(frame);
  if (frame.sampleRate === INPUT_SAMPLE_RATE) return mono;
  const resampler = new AudioResampler(frame.sampleRate, INPUT_SAMPLE_RATE, 1);
  const out = [
    ...resampler.push(new AudioFrame(mono, frame.sampleRate, 1, mono.length)),
    ...resampler.flush(),
  ];
  resampler.close();
  const joined = new Int16Array(out.reduce((sum, f) => sum + f.samplesPerChannel, 0));
  let at = 0;
  for (const f of out) {
    joined.set(f.data.subarray(0, f.samplesPerChannel), at);
    at += f.samplesPerChannel;
  }
  return joined;
}

/**
 * A streaming recognition: frames in (the base class resamples them to 16 kHz), the agents' speech
 * events out. Each attempt of the agents' retry loop is one relay session; a socket that drops
 * while input is still coming is an APIConnectionError, so the loop opens a new one.
 */
export class SpeechStream extends stt.SpeechStream {
  label = "relay.SpeechStream";
  readonly #stt: STT;
  readonly #connection: RelayConnection;
  readonly #onClose: (stream: SpeechStream) => void;
  #session: RealtimeSession | undefined;
  #nextInput: Promise<IteratorResult<AudioFrame | typeof SpeechStream.FLUSH_SENTINEL>> | undefined;

  constructor(
    owner: STT,
    connection: RelayConnection,
    connOptions: APIConnectOptions | undefined,
    onClose: (stream: SpeechStream) => void,
  ) {
    super(owner, INPUT_SAMPLE_RATE, connOptions);
    this.#stt = owner;
    this.#connection = connection;
    this.#onClose = onClose;
  }

  /** Sends a new `context` to the open session (applied live by relay). */
  updateContext(context: string): void {
    this.#session?.updateMetadata({ context });
  }

  override close(): void {
    this.#session?.close(1000);
    this.#onClose(this);
    super.close();
  }

  protected async run(): Promise<void> {
    const session = await openSession(this.#connection, this.#stt.sessionParams, this.label);
    this.#session = session;
    let samplesSent = 0;
    const events = new TranscriptEvents(this.#stt.finalizeMode, () => samplesSent / INPUT_SAMPLE_RATE);
    const { state, done } = followTranscripts(session, events, this.startTimeOffset, (event) => {
      if (!this.queue.closed) this.queue.put(event);
    });
    const closed = session.closed.then(() => undefined);
    const aborted = new Promise<undefined>((resolve) =>
      this.abortSignal.addEventListener("abort", () => resolve(undefined), { once: true }),
    );
    let inputDone = false;
    try {
      while (!this.abortSignal.aborted) {
        // A read still waiting when a socket drops is kept for the next session: no frame is lost.
        this.#nextInput ??= this.input.next();
        const next = await Promise.race([this.#nextInput, closed, aborted]);
        if (next === undefined) break; // the socket closed, or the stream did
        this.#nextInput = undefined;
        if (next.done) {
          inputDone = true;
          await finishSession(session, state);
          break;
        }
        if (next.value === SpeechStream.FLUSH_SENTINEL) {
          session.finalize();
          continue;
        }
        const samples = monoSamples(next.value);
        session.sendAudio(samples);
        samplesSent += samples.length;
      }
    } finally {
      session.close(1000);
      await done;
      this.#session = undefined;
    }
    if (inputDone || this.abortSignal.aborted || this.closed) {
      this.#onClose(this); // the STT no longer updates its context
      return;
    }
    const { code, reason } = await session.closed;
    throw droppedError(this.label, this.#connection.baseUrl, code, reason);
  }
}
