import type { IncomingMessage, ServerResponse } from "node:http";

/** What the stand-in servers (OpenAI-compatible, LibreTranslate) share for answering requests. */

/** The whole request body. */
export function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

/**
 * Scripted delays of the stand-in servers' answers: `wait` resolves after `ms`, or false at once
 * when the client goes away first; `clear` drops every pending delay (the server is closing).
 */
export function responseDelays(): {
  wait(ms: number, res: ServerResponse): Promise<boolean>;
  clear(): void;
} {
  const timers = new Set<NodeJS.Timeout>();
  return {
    wait: (ms, res) =>
      new Promise((resolve) => {
        if (ms <= 0) {
          resolve(!res.destroyed);
          return;
        }
        const onClose = (): void => {
          clearTimeout(timer);
          timers.delete(timer);
          resolve(false);
        };
        const timer = setTimeout(() => {
          timers.delete(timer);
          res.off("close", onClose);
          resolve(!res.destroyed);
        }, ms);
        timers.add(timer);
        res.once("close", onClose);
      }),
    clear() {
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
    },
  };
}
