import { randomUUID } from "node:crypto";
import type { Hypothesis, LanguageCode } from "../../core/contracts.js";
import type {
  HypothesisFrame,
  PipelineEvent,
  PipelineObserver,
  Segment,
  LaneInput,
  TranslationInput,
  TranslationJob,
} from "../frames.js";
import type { BoundedQueue } from "../../core/queue.js";
import { joinWords, TranscriptStabilizer, type FinalizeMode, type StableWord } from "../stabilizer.js";
import { SAMPLES_PER_MS } from "./audio-intake.js";

export interface SegmentBuilderOptions {
  readonly finalizeMode: FinalizeMode;
  readonly sourceLanguage: LanguageCode | "auto";
  /** Whether the recognizer punctuates (sentence mode needs it). */
  readonly punctuated: boolean;
  /** Recent words (within this of the audio head) are not committed as finals yet. */
  readonly stabilizerHoldBackMs: number;
  /** Whether transcripts carry speaker labels. */
  readonly labelling: boolean;
  /** Session position of the audio processed so far, ms. */
  readonly positionMs: () => number;
  readonly emit: (event: PipelineEvent) => void;
  readonly observer: PipelineObserver | undefined;
}

/** A segment as it is built: the part translation reads (`Segment`) and the transcript so far. */
interface OpenSegment extends Segment {
  /** Final original words so far (stable mode accumulates; sentence mode holds one sentence). */
  readonly committed: StableWord[];
  /** Last original text shown for the segment (interim or final). */
  lastShown: string;
  /** The words beyond `committed` that the last interim showed. */
  shownPending: StableWord[];
  /** The segment's language (identified per utterance in "auto" sessions). */
  language: LanguageCode | undefined;
  /**
   * Its speaker, as the tracker labels them: the latest decision until its first final, then fixed
   * (a change starts a new segment).
   */
  speaker: string | undefined;
  /** A final has been sent for it. */
  hasFinal: boolean;
}

/**
 * Stage 4, segment building and stabilization: hypotheses in, transcripts and translation jobs
 * out. The stabilizer (src/pipeline/stabilizer.ts) decides which words are final; words are
 * grouped into segments (one `correlation_id`), each interim and final is emitted as an `original`
 * event and queued for translation.
 *
 * The link to translation (`translations`) is bounded. Drop rule: an interim replaces the interim
 * of its segment still queued (only the newest is worth translating) and is dropped when the queue
 * is full; finals are never dropped: `deliver` waits for room, slowing recognition, whose own
 * input bound then applies.
 */
export class SegmentBuilder {
  private segment: OpenSegment | undefined;
  private stabilizer: TranscriptStabilizer | undefined;
  private utteranceStartSample = 0;
  /** When the utterance's onset was heard (performance.now()); undefined once its first interim is out. */
  private awaitingInterimSince: number | undefined;
  /** The language identified for the current utterance ("auto" sessions). */
  private heardLanguage: LanguageCode | undefined;
  private speaking: string | undefined;
  /** Jobs built and not yet queued for translation, in order. */
  private readonly outbox: TranslationJob[] = [];
  /** The label transcripts show for each speaker of the tracker that has had a final (see `labelOf`). */
  private readonly labels = new Map<string, string>();

  constructor(
    private readonly options: SegmentBuilderOptions,
    private readonly translations: BoundedQueue<TranslationInput>,
  ) {}

  handle(frame: HypothesisFrame, speaker: string | undefined): void {
    this.speaking = speaker;
    switch (frame.kind) {
      case "utterance-start": {
        if (frame.onset) this.heardLanguage = undefined;
        this.utteranceStartSample = frame.startSample;
        this.awaitingInterimSince = performance.now();
        this.stabilizer = new TranscriptStabilizer(this.options.finalizeMode, {
          holdBackMs: this.options.stabilizerHoldBackMs,
          punctuated: this.options.punctuated,
        });
        this.segment ??= this.newSegment(Math.floor(frame.startSample / SAMPLES_PER_MS));
        return;
      }
      case "partial":
        this.hear(frame.hypothesis);
        return this.apply(
          this.stabilizer!.update(toStableWords(frame.hypothesis), frame.audioMs, frame.commitBeforeMs),
          false,
        );
      case "final":
        this.hear(frame.hypothesis);
        return this.apply(this.stabilizer!.finish(toStableWords(frame.hypothesis)), true, frame.untimedEndMs);
      case "segment-end":
        this.awaitingInterimSince = undefined;
        if (frame.cut && this.segment) {
          // Words an interim showed past a cut are the next speaker's: they are not committed here.
          // A segment with no final yet has no words before the cut: it goes on as the next part's
          // segment (its label follows the speaker), rather than ending empty.
          if (!this.segment.hasFinal) return;
          this.segment.shownPending = [];
        }
        return this.closeSegment(frame.endMs);
    }
  }

  /** Queues the jobs built so far for translation, in order, by the link's rule. */
  async deliver(): Promise<void> {
    for (let job = this.outbox.shift(); job; job = this.outbox.shift())
      await queueForTranslation(this.translations, job);
  }

  /** Closes the open segment: interim text no final covers gets one (ending at `endMs`). */
  private closeSegment(endMs = this.options.positionMs()): void {
    const segment = this.segment;
    this.segment = undefined;
    // Interim text that no final covers must be closed by a final. When the recognizer's last pass
    // withdrew words an interim showed, the shown words are committed: a final never repeats the
    // previous one, and a segment that showed words never ends with an empty final.
    if (segment && segment.lastShown !== joinWords(segment.committed))
      this.emitFinal(segment, segment.shownPending, endMs);
  }

  /** `untimedEndMs`: where words without timings end (by default, the audio processed so far). */
  private apply(
    update: { commits: StableWord[][]; pending: StableWord[] },
    utteranceEnded: boolean,
    untimedEndMs = this.options.positionMs(),
  ): void {
    const utteranceStartMs = Math.floor(this.utteranceStartSample / SAMPLES_PER_MS);
    const endOf = (words: readonly StableWord[]): number => {
      const last = words.at(-1)?.endMs;
      return last === undefined ? untimedEndMs : utteranceStartMs + last;
    };
    for (const commit of update.commits) {
      const segment = (this.segment ??= this.newSegment(utteranceStartMs));
      this.emitFinal(segment, commit, endOf(commit));
      if (this.options.finalizeMode === "sentence") this.segment = undefined;
    }
    if (utteranceEnded || update.pending.length === 0) return;
    const segment = (this.segment ??= this.newSegment(utteranceStartMs));
    const committedText = this.options.finalizeMode === "stable" ? joinWords(segment.committed) : "";
    const pendingText = joinWords(update.pending);
    const text = [committedText, pendingText].filter(Boolean).join(" ");
    if (text === segment.lastShown) return;
    segment.lastShown = text;
    segment.shownPending = update.pending;
    this.label(segment);
    const endMs = endOf(update.pending);
    if (this.awaitingInterimSince !== undefined) {
      this.options.observer?.latency("first_interim", (performance.now() - this.awaitingInterimSince) / 1000);
      this.awaitingInterimSince = undefined;
    }
    const shown = this.labelOf(segment.speaker, false);
    this.emitOriginal(segment, shown, text, false, endMs);
    this.outbox.push(this.job(segment, shown, "interim", pendingText, text, endMs, ++segment.interimSeq));
  }

  private emitFinal(segment: OpenSegment, words: StableWord[], endMs: number): void {
    segment.committed.push(...words);
    const originalText = joinWords(segment.committed);
    segment.lastShown = originalText;
    segment.shownPending = [];
    this.label(segment);
    segment.hasFinal = true;
    const shown = this.labelOf(segment.speaker, true);
    this.emitOriginal(segment, shown, originalText, true, endMs);
    this.outbox.push(
      this.job(segment, shown, "final", joinWords(words), originalText, endMs, segment.interimSeq),
    );
  }

  /**
   * The label transcripts show for the tracker's `speaker`. Labels are given out in the order of
   * speakers' first finals, so one the tracker made for speech whose words all went to another
   * speaker's segment (split off again before any of them was final) is never used up; until their
   * first final, a speaker's interims show the label they would get.
   */
  private labelOf(speaker: string | undefined, final: boolean): string | undefined {
    if (!this.options.labelling || speaker === undefined) return undefined;
    const label = this.labels.get(speaker) ?? String(this.labels.size + 1);
    if (final) this.labels.set(speaker, label);
    return label;
  }

  /** The segment's language and (until its first final) speaker, as now known. */
  private label(segment: OpenSegment): void {
    const { sourceLanguage } = this.options;
    segment.language = sourceLanguage === "auto" ? (this.heardLanguage ?? segment.language) : sourceLanguage;
    if (!segment.hasFinal) segment.speaker = this.speaking;
  }

  private emitOriginal(
    segment: OpenSegment,
    label: string | undefined,
    text: string,
    isFinal: boolean,
    endMs: number,
  ): void {
    this.options.emit({
      type: "original",
      segmentId: segment.id,
      text,
      isFinal,
      startMs: segment.startMs,
      endMs,
      language: segment.language,
      ...(label === undefined ? {} : { speaker: label }),
    });
  }

  private job(
    segment: OpenSegment,
    label: string | undefined,
    kind: TranslationJob["kind"],
    sourceText: string,
    originalText: string,
    endMs: number,
    seq: number,
  ): TranslationJob {
    const { language, speaker } = segment;
    return {
      kind,
      segment,
      sourceText,
      originalText,
      endMs,
      seq,
      language,
      speaker,
      label,
      queuedAt: performance.now(),
    };
  }

  private newSegment(startMs: number): OpenSegment {
    return {
      id: randomUUID(),
      startMs,
      committed: [],
      lastShown: "",
      shownPending: [],
      interimSeq: 0,
      language: undefined,
      speaker: this.speaking,
      hasFinal: false,
    };
  }

  /** Notes the language an "auto" recognizer identified, for the segment being built. */
  private hear(hypothesis: Hypothesis): void {
    if (this.options.sourceLanguage === "auto" && hypothesis.language)
      this.heardLanguage = hypothesis.language;
  }
}

function toStableWords(hypothesis: Hypothesis): StableWord[] {
  const timed = hypothesis.words;
  const words = hypothesis.text.split(/\s+/u).filter(Boolean);
  // Word timings are used only when they line up with the text (engines may omit them on partials).
  if (timed.length === words.length) return timed.map((w, i) => ({ text: words[i]!, endMs: w.endMs }));
  return words.map((text) => ({ text }));
}

/**
 * The rule of every link that carries translation jobs (segments → fan-out, fan-out → each lane):
 * a final waits for room (backpressure); an interim replaces its segment's queued interim, and is
 * dropped when the queue is still full (only the newest interim of a segment is worth translating).
 */
export async function queueForTranslation<T extends TranslationInput | LaneInput>(
  queue: BoundedQueue<T>,
  job: T & TranslationJob,
): Promise<void> {
  if (job.kind === "final") {
    await queue.put(job);
    return;
  }
  const { segment } = job;
  queue.remove((queued) => "segment" in queued && queued.kind === "interim" && queued.segment === segment);
  queue.offer(job);
}
