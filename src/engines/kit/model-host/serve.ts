/**
 * The host process's side (host.ts starts it): serves the service's requests over the IPC channel
 * with the entry point's handlers, one per method, and ends when the service goes away.
 */
import type { HostCancel, HostReady, HostReply, HostRequest, MethodMap } from "./protocol.js";

/** The request a handler serves; `Chunk`, the parts its method streams ahead of the result. */
export interface HandlerRequest<Chunk = never> {
  readonly id: number;
  /** Sends part of the result ahead of it (streamed speech). */
  chunk(value: Chunk): void;
  /** Whether the service has asked this request to stop. */
  cancelled(): boolean;
  /**
   * Tells the service, while `work` runs, that the request is still being worked on: for steps that
   * may outlast the request's deadline without blocking the process (loading a large model). Work
   * that blocks the process sends nothing, and a process that says nothing is taken for stuck.
   */
  whileWorking<T>(work: Promise<T>): Promise<T>;
}

/** How often `whileWorking` says so: well inside any deadline. */
const ALIVE_EVERY_MS = 2_000;

/** A host's handlers: one per method of its map, typed by it. */
export type Handlers<M extends MethodMap<M>> = {
  readonly [K in keyof M]: (
    params: M[K]["params"],
    request: HandlerRequest<M[K]["chunk"]>,
  ) => M[K]["result"] | Promise<M[K]["result"]>;
};

export function serveRequests<M extends MethodMap<M>>(handlers: Handlers<M>): void {
  /** Requests being served, and whether each was asked to stop. */
  const running = new Map<number, { cancelled: boolean }>();
  const send = (reply: HostReply) => process.send!(reply);

  async function handle({ id, method, params }: HostRequest): Promise<unknown> {
    // The request arrives untyped over IPC: the service sends each method the params its map states.
    const handler = (handlers as Readonly<Record<string, Handlers<M>[keyof M]>>)[method] as
      ((params: unknown, request: HandlerRequest<unknown>) => unknown) | undefined;
    if (!handler) throw new Error(`unknown method ${method}`);
    return handler(params, {
      id,
      chunk: (value) => send({ id, chunk: value }),
      whileWorking: (work) => {
        const alive = setInterval(() => send({ id, alive: true }), ALIVE_EVERY_MS);
        return work.finally(() => clearInterval(alive));
      },
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
        (result) => send({ id: message.id, result, rss: process.memoryUsage.rss() }),
        (error: unknown) =>
          send({
            id: message.id,
            error: error instanceof Error ? error.message : String(error),
            rss: process.memoryUsage.rss(),
          }),
      )
      .finally(() => running.delete(message.id));
  });
  process.send!({ ready: true } satisfies HostReady);
  // The service went away: nothing left to serve.
  process.on("disconnect", () => process.exit(0));
}
