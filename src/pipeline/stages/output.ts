import { Channel } from "../../core/channel.js";
import type { PipelineEvent } from "../frames.js";

/**
 * Stage 7, output: every stage's events, in the order they are emitted, for the surface (the
 * WebSocket session or the room translator). The channel is not bounded: the surfaces drain it as
 * events come (each event is sent on at once), and what reaches it is already bounded upstream.
 */
export class EventOutput {
  readonly events = new Channel<PipelineEvent>();

  readonly emit = (event: PipelineEvent): void => this.events.push(event);

  /** A non-fatal `error` event: the session goes on (a line may lack its translation or speech). */
  readonly reportError = (message: string, segmentId?: string): void =>
    this.emit({ type: "error", message, fatal: false, ...(segmentId ? { segmentId } : {}) });

  /** A fatal `error` event: the pipeline cannot continue. */
  fail(message: string): void {
    this.emit({ type: "error", message, fatal: true });
  }

  /** No more events: the consumer's loop ends once it has read them all. */
  close(): void {
    this.events.close();
  }
}
