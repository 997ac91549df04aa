/**
 * The sherpa-onnx host process: loads models and runs inference for the service (host.ts), which
 * talks to it over the IPC channel. sherpa-onnx runs here rather than in the service because:
 * - a model file it cannot read makes its native code end the process (`_Exit`), not throw;
 * - most of its calls block the thread that makes them;
 * - it bundles eSpeak NG (GPL-3.0) for Piper's phonemes, and this Apache-2.0 project runs GPL code
 *   only as a separate program (as src/engines/espeak-ng/ does).
 */
import { sherpa, type Handler } from "./host-handlers.js";
import type { HostCancel, HostReply, HostRequest } from "./host-protocol.js";
import { asrHandlers } from "./host-asr.js";
import { speakerHandlers } from "./host-speaker.js";
import { ttsHandlers } from "./host-tts.js";

const handlers: Record<string, Handler> = {
  version: () => (sherpa as { version: string }).version,
  ...ttsHandlers,
  ...asrHandlers,
  ...speakerHandlers,
};

/** Requests being served, and whether each was asked to stop. */
const running = new Map<number, { cancelled: boolean }>();

function send(reply: HostReply): void {
  process.send!(reply);
}

async function handle({ id, method, params }: HostRequest): Promise<unknown> {
  const handler = handlers[method];
  if (!handler) throw new Error(`unknown method ${method}`);
  return (handler as (params: unknown, request: Parameters<Handler>[1]) => unknown)(params, {
    id,
    chunk: (value) => send({ id, chunk: value }),
    cancelled: () => running.get(id)?.cancelled ?? true,
  });
}

process.on("message", (message: HostRequest | HostCancel) => {
  if ("cancel" in message) {
    const request = running.get(message.id);
    if (request) request.cancelled = true;
    return;
  }
  running.set(message.id, { cancelled: false });
  Promise.resolve()
    .then(() => handle(message))
    .then(
      (result) => send({ id: message.id, result }),
      (error: unknown) =>
        send({ id: message.id, error: error instanceof Error ? error.message : String(error) }),
    )
    .finally(() => running.delete(message.id));
});
// The service went away: nothing left to serve.
process.on("disconnect", () => process.exit(0));
