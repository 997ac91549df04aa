import type { ServerMessage } from "./recording-socket.js";
import { errorText, isRejection } from "./common.js";

type Kind = "original" | "translated";

/**
 * Prints server messages as they arrive. Finals get their own line (`[en] go forward ten meters`);
 * on a terminal the latest interims share one status line that is redrawn in place; with `json`
 * every JSON message is printed as one line instead.
 */
export class TranscriptView {
  private readonly interim: Record<Kind, string> = { original: "", translated: "" };
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
      if (!isRejection(messages, index)) this.above(`relay: server error: ${errorText(message)}`, true);
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
    if (message.is_final === true) {
      this.interim[kind] = "";
      this.above(line);
    } else if (this.out.isTTY) {
      this.interim[kind] = line;
      this.drawStatus();
    }
  }

  /** Removes the status line (call before printing anything else or exiting). */
  finish(): void {
    this.clearStatus();
  }

  private above(line: string, toStderr = false): void {
    this.clearStatus();
    (toStderr ? process.stderr : this.out).write(`${line}\n`);
    this.drawStatus();
  }

  private drawStatus(): void {
    if (!this.out.isTTY) return;
    const text = [this.interim.original, this.interim.translated].filter(Boolean).join("  ·  ");
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
