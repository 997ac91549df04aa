import cliProgress from "cli-progress";

/**
 * The one progress display of the CLI (`relay dub`, `relay models pull`): a line on stderr such as
 * `[####------] 40% Translating`. On a terminal it is a cli-progress bar redrawn in place (the library
 * throttles the redraws); elsewhere (logs, pipes) it is plain lines, one per new (step, stage), so a log
 * holds each stage and percent once and never a `\r`.
 */

const BAR_WIDTH = 10;

/** `[####------] 40% <detail>`; `?%` with an empty bar while the total is unknown. */
export function progressText(percent: number | undefined, detail: string): string {
  const filled = percent === undefined ? 0 : Math.floor(percent / (100 / BAR_WIDTH));
  const shown = percent === undefined ? "?" : String(percent);
  return `[${"#".repeat(filled)}${"-".repeat(BAR_WIDTH - filled)}] ${shown}% ${detail}`;
}

export interface ProgressUpdate {
  /** 0 to 100 (floored and clamped here); undefined while the total is unknown. */
  readonly percent: number | undefined;
  /** What is happening ("Uploading", a job stage); a new stage is a new plain line. */
  readonly stage?: string;
  /** Shown after the stage but no reason for a new plain line (byte counts, speed). */
  readonly detail?: string;
}

export interface ProgressLineOptions {
  /**
   * Plain lines: a new one when the percent enters a new step of this many points (or the stage
   * changes). 1 (the default) shows every percent, 10 every tenth.
   */
  readonly plainStep?: number;
}

interface Payload {
  readonly text: string;
}

export class ProgressLine {
  readonly tty: boolean;
  private readonly plainStep: number;
  private bar: cliProgress.SingleBar | undefined;
  /** The (step, stage) of the last plain line. */
  private plainKey: string | undefined;

  constructor(
    private readonly stream: NodeJS.WriteStream,
    options: ProgressLineOptions = {},
  ) {
    this.tty = stream.isTTY === true;
    this.plainStep = options.plainStep ?? 1;
  }

  update({ percent, stage = "", detail = "" }: ProgressUpdate): void {
    const clamped = percent === undefined ? undefined : Math.max(0, Math.min(100, Math.floor(percent)));
    const payload: Payload = {
      text: progressText(clamped, [stage, detail].filter((part) => part !== "").join(" ")),
    };
    if (this.tty) {
      if (this.bar) {
        this.bar.update(clamped ?? 0, payload);
        return;
      }
      this.bar = new cliProgress.SingleBar({
        stream: this.stream,
        format: (_options, _params, current: Payload) => current.text,
        // The terminal's cursor and line wrapping are left as they are.
        hideCursor: false,
        linewrap: true,
      });
      this.bar.start(100, clamped ?? 0, payload);
      return;
    }
    const step = clamped === undefined ? "?" : String(Math.floor(clamped / this.plainStep));
    const key = `${step} ${stage}`;
    if (key === this.plainKey) return;
    this.plainKey = key;
    this.stream.write(`${payload.text}\n`);
  }

  /** A line of its own (ends the bar's line first). */
  note(line: string): void {
    this.end();
    this.stream.write(`${line}\n`);
  }

  /** Ends the bar's line (drawn in its last state); the next update starts a new one. */
  end(): void {
    this.bar?.stop();
    this.bar = undefined;
    this.plainKey = undefined;
  }
}
