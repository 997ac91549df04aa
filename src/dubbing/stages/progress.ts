/**
 * Progress of a dubbing job: the stages, their weights for an overall percentage, and the reporter
 * that keeps each stage's reported fractions well-behaved. Separate so the worker and benchmarks can
 * read the stage list without the pipeline, and so every stage reports through one set of rules.
 */

/** "segmenting" includes extracting the speech audio (its first fifth). */
export type DubStage =
  "probing" | "segmenting" | "recognizing" | "translating" | "synthesizing" | "fitting" | "mixing" | "muxing";

/**
 * The stages in order, with the share of a job's processing time each took on a 4.9-minute English
 * speech file (WAV and H.264 with copied video, 2 CPUs), for an overall percentage. Encoding
 * non-H.264 video makes "muxing" far longer (about 60 % of the job at 720p).
 */
export const DUB_STAGES: readonly { readonly stage: DubStage; readonly weight: number }[] = [
  { stage: "probing", weight: 0.01 },
  { stage: "segmenting", weight: 0.06 },
  { stage: "recognizing", weight: 0.55 },
  { stage: "translating", weight: 0.01 },
  { stage: "synthesizing", weight: 0.11 },
  { stage: "fitting", weight: 0.1 },
  { stage: "mixing", weight: 0.14 },
  { stage: "muxing", weight: 0.02 },
];

/** Overall completion (0..1) from a stage's own fraction, using `DUB_STAGES` weights. */
export function overallProgress(stage: DubStage, fraction: number): number {
  let done = 0;
  for (const entry of DUB_STAGES) {
    if (entry.stage === stage) return Math.min(1, done + entry.weight * Math.min(1, Math.max(0, fraction)));
    done += entry.weight;
  }
  return done;
}

/** Per stage: fractions only increase (in steps of at least 1 % until 1) and each stage ends at 1 once. */
export class ProgressReporter {
  private readonly last = new Map<DubStage, number>();

  constructor(private readonly callback: ((stage: DubStage, fraction: number) => void) | undefined) {}

  report(stage: DubStage, fraction: number): void {
    if (!this.callback) return;
    const value = Number.isFinite(fraction) ? Math.min(1, Math.max(0, fraction)) : 0;
    const previous = this.last.get(stage);
    if (previous !== undefined && (value <= previous || (value < 1 && value - previous < 0.01))) return;
    this.last.set(stage, value);
    try {
      this.callback(stage, value);
    } catch {
      // Progress is advisory: a failing callback must neither fail the job nor crash the process
      // (it also runs inside ffmpeg's output handler). Cancelling goes through `signal`.
    }
  }
}
