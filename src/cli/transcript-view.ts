import type { ServerMessage } from "./recording-socket.js";
import { errorText, isRejection } from "./session.js";

type Kind = "original" | "translated";

/**
 * An utterance's text of one kind: its latest final (finals grow by prefix extension in `stable`
 * mode), printed once the utterance is over, and the latest of any, shown while it goes on.
 */
interface Utterance {
  readonly correlationId: unknown;
  final: string | undefined;
  latest: string;
}

/**
 * Prints server messages as they arrive, one line per utterance (`[en] go forward ten meters`). A
 * segment's text can come as several finals, each extending the last (`finalizeMode=stable`), so an
 * utterance's line is printed once it is over: when the next utterance of its kind starts, or at
 * the end. On a terminal the utterances in progress (interims and growing finals) share one status
 * line redrawn in place; piped, only the finished lines are written. With `json` every JSON message
 * is printed as one line instead.
 */
export class TranscriptView {
  private readonly current: Record<Kind, Utterance | undefined> = {
    original: undefined,
    translated: undefined,
  };
  private statusShown = false;

  constructor(
    private readonly out: NodeJS.WriteStream,
    private readonly json: boolean,
  ) {}

  /** `messages[index]` has just arrived; the list gives the context a rejection is recognized by. */
  show(messages: readonly ServerMessage[], index: number): void {
    const message = messages[index]!;
    if (this.json) {
      this.out.write(`${JSON.stringify(message)}\n`);
      return;
    }
    if (message.type === "error") {
      // A possible session-start rejection is held back: the command reports it once, as its failure,
      // or (if the session went on) after the run.
      if (!isRejection(messages, index)) this.above([`relay: server error: ${errorText(message)}`], true);
      return;
    }
    const kind: Kind | undefined =
      message.type === "original_transcript"
        ? "original"
        : message.type === "translated_transcript"
          ? "translated"
          : undefined;
    if (!kind) return;
    const language = kind === "original" ? message.source_language : message.target_language;
    // relay-2 names the speaker: "[en] 2: …".
    const speaker = typeof message.speaker === "string" ? `${message.speaker}: ` : "";
    const line = `[${String(language)}] ${speaker}${String(message.text ?? "")}`;
    let utterance = this.current[kind];
    if (utterance && utterance.correlationId !== message.correlation_id) {
      // A new utterance: the previous one of this kind is over.
      this.current[kind] = undefined;
      if (utterance.final !== undefined) this.above([utterance.final]);
      utterance = undefined;
    }
    utterance ??= { correlationId: message.correlation_id, final: undefined, latest: line };
    utterance.latest = line;
    if (message.is_final === true) utterance.final = line;
    this.current[kind] = utterance;
    this.drawStatus();
  }

  /** Prints the utterances still in progress and removes the status line (call before exiting). */
  finish(): void {
    const over = (["original", "translated"] as const).flatMap((kind) => {
      const utterance = this.current[kind];
      this.current[kind] = undefined;
      return utterance?.final !== undefined ? [utterance.final] : [];
    });
    this.above(over);
  }

  private above(lines: readonly string[], toStderr = false): void {
    this.clearStatus();
    for (const line of lines) (toStderr ? process.stderr : this.out).write(`${line}\n`);
    this.drawStatus();
  }

  private drawStatus(): void {
    if (!this.out.isTTY) return;
    const text = [this.current.original?.latest, this.current.translated?.latest]
      .filter(Boolean)
      .join("  ·  ");
    // Longer than the terminal, the line would wrap and `\r` could no longer overwrite it.
    const width = Math.max(10, (this.out.columns || 80) - 1);
    const fitted = text.length > width ? `${text.slice(0, width - 1)}…` : text;
    this.out.write(`\r\x1b[2K${fitted}`);
    this.statusShown = fitted !== "";
  }

  private clearStatus(): void {
    if (!this.statusShown) return;
    this.out.write("\r\x1b[2K");
    this.statusShown = false;
  }
}
