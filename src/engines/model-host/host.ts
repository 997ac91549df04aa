/**
 * The service's side of a model host: a child process that loads models and runs inference for an
 * engine (its entry point serves requests with `serveRequests`, serve.ts). Engines run models there
 * when the library ends the process over a bad file, blocks the thread it is called on, or bundles
 * code this project runs only as a separate program (src/engines/sherpa-onnx/host-main.ts,
 * src/engines/transformers-js/host-main.ts). Requests go out over IPC and their replies come back
 * by id. When the process ends (a model the library could not read, a crash), every pending request
 * fails with the reason, and the next request starts a new process that loads the same models again.
 */
import { fork, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { HostCancel, HostReply, HostRequest } from "./protocol.js";

export class ModelHostError extends Error {
  override readonly name = "ModelHostError";
}

interface Pending {
  /** The process asked: only its own end fails the request. */
  readonly child: ChildProcess;
  readonly method: string;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: Error) => void;
  readonly onChunk: ((chunk: unknown) => void) | undefined;
}

export interface RequestOptions {
  /** Receives the parts of a streamed result, in order, before the request resolves. */
  readonly onChunk?: (chunk: unknown) => void;
  /** Asks the host to stop; the request then rejects with the signal's reason. */
  readonly signal?: AbortSignal;
}

/**
 * How to start a host's entry point (`main`, the URL of its built JavaScript module): the built
 * JavaScript, or the TypeScript source when the service runs from it (tests, `npm run dev`).
 */
function entryOf(main: URL): { file: string; execArgv: string[] } {
  const fromSource = import.meta.url.endsWith(".ts");
  const file = fileURLToPath(fromSource ? new URL(main.href.replace(/\.js$/u, ".ts")) : main);
  return { file, execArgv: fromSource ? ["--import", "tsx"] : [] };
}

export class ModelHost {
  private child: ChildProcess | undefined;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  /** Requests that set the process up (model loads), sent again to a new process. */
  private readonly setup: { method: string; params: unknown }[] = [];
  /** Settles once the current process has set up again what the previous one had (see `start`). */
  private setUpAgain: Promise<unknown> = Promise.resolve();
  private closed = false;
  /** Recycled processes still answering their last requests. */
  private readonly retiring = new Set<ChildProcess>();

  /**
   * `label` names the host in errors ("sherpa-onnx TTS"); `main` is its entry point's URL, as built
   * (`new URL("./host-main.js", import.meta.url)`); `env` adds to the process's environment.
   */
  constructor(
    private readonly label: string,
    private readonly main: URL,
    private readonly env: Readonly<Record<string, string>> = {},
  ) {}

  /** Runs `method` now and again in every later process (model loads). */
  async setUp(method: string, params: unknown): Promise<unknown> {
    const result = await this.request(method, params);
    this.setup.push({ method, params });
    return result;
  }

  request(method: string, params: unknown, options: RequestOptions = {}): Promise<unknown> {
    if (this.closed) return Promise.reject(new ModelHostError(`${this.label} is closed`));
    const { signal } = options;
    if (signal?.aborted) return Promise.reject(signal.reason);
    // A process whose channel has closed is ending: the request goes to a new one.
    const child = this.child?.connected ? this.child : this.start();
    const id = this.nextId++;
    return new Promise<unknown>((resolve, reject) => {
      const onAbort = () => {
        // The host stops at its next step and still replies; the caller is released at once.
        if (this.pending.delete(id) && child.connected) child.send({ id, cancel: true } satisfies HostCancel);
        this.retireIfIdle(child);
        reject(signal!.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      const done = () => signal?.removeEventListener("abort", onAbort);
      this.pending.set(id, {
        child,
        method,
        onChunk: options.onChunk,
        resolve: (value) => {
          done();
          resolve(value);
        },
        reject: (error) => {
          done();
          reject(error);
        },
      });
      // A restarted process serves nothing before its models are loaded again; a request cancelled
      // meanwhile is not sent at all.
      void this.setUpAgain.then(() => {
        if (this.pending.has(id) && child.connected) child.send({ id, method, params } satisfies HostRequest);
      });
    });
  }

  /**
   * Replaces the process: the current one ends once its requests are answered, and the next
   * request starts a new one (which sets up again what this one had). For a process whose memory
   * has grown past what its work needs.
   */
  recycle(): void {
    const child = this.child;
    if (!child) return;
    this.child = undefined;
    this.retiring.add(child);
    this.retireIfIdle(child);
  }

  async close(): Promise<void> {
    this.closed = true;
    const children = [...this.retiring, ...(this.child ? [this.child] : [])];
    this.child = undefined;
    this.retiring.clear();
    this.failPending(new ModelHostError(`${this.label} is closed`), () => true);
    await Promise.all(
      children
        .filter((child) => child.exitCode === null)
        .map((child) => {
          const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
          if (child.connected) child.disconnect();
          return exited;
        }),
    );
  }

  private start(): ChildProcess {
    const { file, execArgv } = entryOf(this.main);
    const child = fork(file, [], {
      execArgv,
      env: { ...process.env, ...this.env },
      serialization: "advanced",
      stdio: ["ignore", "ignore", "pipe", "ipc"],
    });
    // What the native code says before it ends the process, for the error message.
    let stderr = "";
    child.stderr!.setEncoding("utf8");
    child.stderr!.on("data", (text: string) => {
      stderr = (stderr + text).slice(-2000);
    });
    child.on("message", (reply: HostReply) => this.receive(reply));
    // A message sent as the process dies fails here; its request fails with the process's exit.
    child.on("error", () => undefined);
    child.on("exit", (code, signal) => {
      if (this.child === child) this.child = undefined;
      const last = stderr.trim().split("\n").slice(-3).join(" | ");
      this.failPending(
        new ModelHostError(
          `${this.label} stopped (${signal ?? `exit code ${code}`})${last ? `: ${last}` : ""}`,
        ),
        (request) => request.child === child,
      );
    });
    this.child = child;
    // A new process loads what the previous one had loaded, before anything else it is asked.
    this.setUpAgain = Promise.allSettled(
      this.setup.map(
        ({ method, params }) =>
          new Promise((resolve, reject) => {
            const id = this.nextId++;
            this.pending.set(id, { child, method, onChunk: undefined, resolve, reject });
            child.send({ id, method, params } satisfies HostRequest);
          }),
      ),
    );
    return child;
  }

  private receive(reply: HostReply): void {
    const pending = this.pending.get(reply.id);
    if (!pending) return; // cancelled: its reply is not wanted
    if ("chunk" in reply) {
      pending.onChunk?.(reply.chunk);
      return;
    }
    this.pending.delete(reply.id);
    this.retireIfIdle(pending.child);
    if ("error" in reply)
      pending.reject(new ModelHostError(`${this.label}: ${pending.method}: ${reply.error}`));
    else pending.resolve(reply.result);
  }

  /** Ends a recycled process once nothing is pending on it. */
  private retireIfIdle(child: ChildProcess): void {
    if (!this.retiring.has(child)) return;
    for (const request of this.pending.values()) if (request.child === child) return;
    this.retiring.delete(child);
    if (child.connected) child.disconnect();
  }

  private failPending(error: Error, which: (request: Pending) => boolean): void {
    for (const [id, request] of this.pending) {
      if (!which(request)) continue;
      this.pending.delete(id);
      request.reject(error);
    }
  }
}
