import { EngineBusyError } from "../../core/busy.js";
import type { SessionContext } from "../../core/glossary.js";
import type { LanguageCode } from "../../core/contracts.js";
import type { SpeakerVoice, VoiceChooser } from "../../speakers/voice-choice.js";
import { TranslationHistory } from "../../core/translation-history.js";
import type {
  LineFrame,
  PipelineEvent,
  Segment,
  PipelineObserver,
  SpokenLine,
  TargetedCall,
  TranslateFn,
  TranslateStreamFn,
  LaneInput,
  RoutedJob,
  TranslationJob,
} from "../frames.js";
import type { BoundedQueue } from "../../core/queue.js";
import { spanInSegment } from "../span-casing.js";

/** Interim translations from a stream are sent at most this often. */
const STREAMED_INTERIM_INTERVAL_MS = 100;

export interface TranslationStageOptions {
  readonly translate: TranslateFn;
  readonly translateStream?: TranslateStreamFn;
  readonly voices?: VoiceChooser;
  readonly context: () => SessionContext;
  /** Fires when the pipeline is cancelled: calls in flight are aborted, queued jobs skipped. */
  readonly signal: AbortSignal;
  readonly emit: (event: PipelineEvent) => void;
  readonly reportError: (message: string, segmentId?: string) => void;
  readonly observer?: PipelineObserver;
  readonly engineId?: (from: LanguageCode, to: LanguageCode) => string;
}

/**
 * Stage 5, translation: translation jobs in, `translated` events and spoken lines out. Interims
 * are translated only while they are the newest of their segment. A final from a streaming
 * translator is shown as it grows, and its text is handed to synthesis as it grows too, so its
 * first sentence is spoken before the translation ends.
 *
 * The link to synthesis (`speech`, absent without audio output) is bounded in frames. Drop rule:
 * none — a line's text is never dropped: the stage waits for room, and the wait reaches back to
 * recognition's input bound.
 */
export class TranslationStage {
  private readonly history = new TranslationHistory();
  /** Each segment's translated spans so far, in order (a stage per target language keeps its own). */
  private readonly spans = new WeakMap<Segment, string[]>();

  constructor(
    private readonly options: TranslationStageOptions,
    private readonly input: BoundedQueue<LaneInput>,
    private readonly speech: BoundedQueue<LineFrame> | undefined,
  ) {}

  async run(): Promise<void> {
    try {
      for await (const job of this.input) {
        if (this.options.signal.aborted) continue;
        if (job.kind !== "finalized") await this.process(job);
        // Behind the lines before it, when they are spoken.
        else if (this.speech) await this.speech.put(job);
        else job.passed();
      }
    } finally {
      this.speech?.close();
    }
  }

  private async process(job: RoutedJob): Promise<void> {
    const { segment, to } = job;
    const { emit, reportError, observer, signal } = this.options;
    // Only the newest interim of a segment is worth translating.
    if (job.kind === "interim" && job.seq !== segment.interimSeq) return;
    let voice: SpeakerVoice | undefined;
    const voiceFor = (language: LanguageCode) =>
      (voice ??= this.options.voices?.voiceFor(job.speaker, language));
    const line =
      job.kind === "final" && to !== undefined && this.speech
        ? new LineFeed(this.speech, () => ({
            segmentId: segment.id,
            language: to,
            voice: voiceFor(to)?.voice,
            toneColor: voiceFor(to)?.toneColor,
            queuedAt: performance.now(),
          }))
        : undefined;
    /** The span's translation; undefined when there is none (the failure has been reported). */
    let translatedSpan: string | undefined;
    // Translation waits for the language to be identified ("auto"); the original transcript did not.
    // An unidentified final (the fan-out reported it) gets its translated final without a span.
    if (job.language === undefined) {
      if (job.kind === "interim") return;
    } else {
      const calling = job.sourceText !== "" && to !== undefined;
      const startedAt = performance.now();
      const reportCall = (ok: boolean) => {
        if (calling && this.options.engineId)
          observer?.engineCall(
            "translate",
            this.options.engineId(job.language!, to!),
            (performance.now() - startedAt) / 1000,
            ok,
          );
      };
      try {
        translatedSpan = calling ? await this.translate(job, job.language, to, line) : job.sourceText;
        reportCall(true);
      } catch (error) {
        await line?.cancel();
        // A call cancelled by the pipeline did not fail, and an interim a busy engine refused is
        // simply not shown (the pipeline's drop rule for interims).
        if (signal.aborted || (job.kind === "interim" && error instanceof EngineBusyError)) return;
        reportCall(false);
        // The segment is named so the client can tell which line lost (part of) its translation.
        reportError(`translation failed: ${(error as Error).message}`, segment.id);
        if (job.kind === "interim") return;
      }
    }
    // A final whose span has no translation still gets its translated final, without the span
    // (nothing is spoken for it), so a client waiting for the segment's translation is not left
    // waiting; the `error` before it says why.
    if (job.kind === "final" && translatedSpan !== undefined)
      this.history.record(job.sourceText, translatedSpan);
    const previous = this.spansOf(segment);
    if (translatedSpan !== undefined)
      translatedSpan = spanInSegment(
        previous,
        job.sourceText,
        translatedSpan,
        this.options.context().glossary,
      );
    if (job.kind === "final" && translatedSpan) previous.push(translatedSpan);
    const text = [...previous, job.kind === "interim" ? translatedSpan : ""].filter(Boolean).join(" ");
    // The voice is chosen as the line is shown (or first spoken), so its `voiceId` is the voice that speaks it.
    const shownVoice = to !== undefined && translatedSpan !== undefined ? voiceFor(to) : undefined;
    emit({
      type: "translated",
      segmentId: segment.id,
      text,
      originalText: job.originalText,
      isFinal: job.kind === "final",
      startMs: segment.startMs,
      endMs: job.endMs,
      language: job.language,
      ...speakerOf(job),
      ...(shownVoice?.matched ? { voiceId: shownVoice.voice.id } : {}),
      ...(to === undefined ? {} : { to }),
    });
    if (job.kind === "final") observer?.latency("translation", (performance.now() - job.queuedAt) / 1000);
    if (translatedSpan) await line?.end(translatedSpan);
    else await line?.cancel();
  }

  private spansOf(segment: Segment): string[] {
    let spans = this.spans.get(segment);
    if (!spans) this.spans.set(segment, (spans = []));
    return spans;
  }

  /**
   * One translation. A final line from a streaming translator is shown as it grows, as interim
   * translations of its segment, so a slow (LLM) translator still shows progress. A value is shown
   * only once a newer one proves it is not the whole translation, which the final carries anyway:
   * a translator that cannot stream yields just that one value, and it is not sent twice. Each
   * value is also handed to `line`, to be spoken sentence by sentence.
   */
  private async translate(
    job: TranslationJob,
    from: LanguageCode,
    to: LanguageCode,
    line: LineFeed | undefined,
  ): Promise<string> {
    const call: TargetedCall = {
      from,
      to,
      text: job.sourceText,
      context: this.options.context().text,
      glossary: this.options.context().glossary,
      previous: this.history.recent,
      interim: job.kind === "interim",
    };
    const stream = this.options.translateStream;
    const { signal } = this.options;
    if (job.kind !== "final" || !stream) return this.options.translate(call, signal);
    const { segment } = job;
    let latest: string | undefined;
    let shownAt = 0;
    for await (const partial of stream(call, signal)) {
      const now = performance.now();
      if (latest !== undefined && now - shownAt >= STREAMED_INTERIM_INTERVAL_MS && !signal.aborted) {
        shownAt = now;
        this.options.emit({
          type: "translated",
          segmentId: segment.id,
          text: [
            ...this.spansOf(segment),
            spanInSegment(this.spansOf(segment), job.sourceText, latest, this.options.context().glossary),
          ]
            .filter(Boolean)
            .join(" "),
          originalText: job.originalText,
          isFinal: false,
          startMs: segment.startMs,
          endMs: job.endMs,
          language: from,
          ...speakerOf(job),
          to,
        });
      }
      latest = partial;
      await line?.grow(
        spanInSegment(this.spansOf(segment), job.sourceText, latest, this.options.context().glossary),
      );
    }
    return latest ?? "";
  }
}

/**
 * A final's translation handed to synthesis as it grows: each value's new text, in frames of the
 * line. A streamed translation is taken to grow by extension (as LLM streams do); a value that
 * revises text already handed on is not handed on (the spoken line keeps the earlier wording).
 */
class LineFeed {
  private fed = "";
  private line: SpokenLine | undefined;

  constructor(
    private readonly speech: BoundedQueue<LineFrame>,
    private readonly describe: () => SpokenLine,
  ) {}

  async grow(text: string): Promise<void> {
    if (!text.startsWith(this.fed) || text.length === this.fed.length) return;
    const added = text.slice(this.fed.length);
    this.fed = text;
    this.line ??= this.describe();
    await this.speech.put({ kind: "text", line: this.line, text: added });
  }

  /** The translation is complete: what is left of it is spoken. */
  async end(text: string): Promise<void> {
    await this.grow(text);
    if (this.line) await this.speech.put({ kind: "flush", line: this.line });
  }

  /** The line has no (further) translation: text not spoken yet is dropped. */
  async cancel(): Promise<void> {
    if (this.line) await this.speech.put({ kind: "cancel", line: this.line });
  }
}

/** The `speaker` field of a job's transcripts: only when the pipeline tells speakers apart. */
function speakerOf(job: TranslationJob): { speaker?: string } {
  return job.label === undefined ? {} : { speaker: job.label };
}
