/**
 * The service's side of a model host: a child process that loads models and runs inference for an
 * engine (its entry point serves requests with `serveRequests`, serve.ts). Engines run models there
 * when the library ends the process over a bad file, blocks the thread it is called on, or bundles
 * code this project runs only as a separate program (src/engines/sherpa-onnx/host-main.ts,
 * src/engines/transformers-js/host-main.ts). Requests go out over IPC and their replies come back
 * by id.
 *
 * What keeps one bad model or one hostile client from sinking the host:
 * - Deadlines. A request with no reply and no streamed part for `timeoutMs` fails with
 *   `EngineUnavailableError` (the caller's next engine takes it). A process that has said nothing
 *   at all since that request went out is stuck (stopped, deadlocked) and is killed.
 * - Restarts that back off. A process that ends unexpectedly fails its requests with
 *   `EngineUnavailableError`; the next request starts a new one that loads the same models again,
 *   but only after a delay that doubles with each failure in a row (0.5 s up to 60 s). Meanwhile
 *   requests fail at once. Each failure is published on the `relay:model-host` diagnostics channel
 *   (the service logs it at warn) and counted; `status()` says whether the host is healthy.
 * - Memory. Every reply carries the process's resident memory; past `maxRssMiB` the process is
 *   replaced without failing anything: it ends once its requests are answered and its pinned
 *   streams released, and new work goes to a new process.
 * - Cancellation that waits. A cancelled request is only settled once the process has stopped that
 *   work (or its deadline passed), so a caller's concurrency slot is not freed while the work goes on.
 */
import { fork, type ChildProcess } from "node:child_process";
import { channel } from "node:diagnostics_channel";
import { fileURLToPath } from "node:url";
import { EngineUnavailableError } from "../../../core/busy.js";
import type { HostStatus } from "../../../core/contracts.js";
import type {
  HostCancel,
  HostReady,
  HostReply,
  HostRequest,
  MethodMap,
  PinnedHost,
  RequestOf,
  RequestOptions,
} from "./protocol.js";

export type { PinnedHost, RequestOptions } from "./protocol.js";

/** A request the process answered with an error (a bad input, a model that failed on it). */
export class ModelHostError extends Error {
  override readonly name = "ModelHostError";
}

/** What hosts publish on `HOST_EVENTS`: each start after the first, each failure, each recycle. */
export interface HostEvent {
  readonly host: string;
  readonly event: "crashed" | "timed-out" | "recycled" | "restarting";
  readonly message: string;
}

/** The diagnostics channel hosts publish `HostEvent`s on (src/main.ts logs them). */
export const HOST_EVENTS = channel("relay:model-host");

interface SendOptions extends RequestOptions<unknown> {
  readonly loading?: boolean;
}

export interface ModelHostOptions {
  /** Added to the process's environment. */
  readonly env?: Readonly<Record<string, string>>;
  /** Node options of the process (`--expose-gc` where the host frees native objects itself). */
  readonly execArgv?: readonly string[];
  /** A request with no reply nor part for this long fails (default 10 s). */
  readonly timeoutMs?: number;
  /** The deadline of model loads (`setUp`, default 120 s). */
  readonly setUpTimeoutMs?: number;
  /** The process is replaced once its resident memory passes this (MiB); none by default. */
  readonly maxRssMiB?: number;
}

/** Restart delays: doubling from the first to the last. */
const BACKOFF_FIRST_MS = 500;
const BACKOFF_MAX_MS = 60_000;

interface Process {
  readonly child: ChildProcess;
  /** Messages received from the process (replies and parts): whether it said anything since. */
  heard: number;
  rss: number;
  /** Streams bound to this process (see `pin`). */
  pins: number;
  /** Replaced: ends once nothing is pending on it nor pinned to it. */
  retiring: boolean;
  /** Ended by this side (recycled, closed, killed as stuck): its exit is no crash. */
  endedByUs: boolean;
  /**
   * Settles once the process serves: it has said it is ready and loaded again what the previous
   * one had loaded. Deadlines start when a request is sent, after this.
   */
  ready: Promise<unknown>;
}

interface Pending {
  readonly process: Process;
  readonly method: string;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: Error) => void;
  readonly onChunk: ((chunk: unknown) => void) | undefined;
  readonly timeoutMs: number;
  /** The process's `heard` when the request went out (or its deadline was last renewed by a part). */
  heardAtSend: number;
  timer: NodeJS.Timeout | undefined;
  /** Cancelled by the caller: rejects with this once the host has stopped. */
  cancelledWith: Error | undefined;
  /** Sent to the process (a request waiting for the models to load again is not yet). */
  sent: boolean;
  /** A first load of a model (`setUp`): a process it ends was ended by the model, not a fault of the host. */
  loading?: boolean;
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

export class ModelHost<M extends MethodMap<M>> {
  private current: Process | undefined;
  private readonly processes = new Set<Process>();
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  /** Requests that set the process up (model loads), sent again to a new process. */
  private readonly setup: { method: string; params: unknown }[] = [];
  private closed = false;
  private failures = 0;
  /** No new process before this (a restart backing off). */
  private retryAt = 0;
  private readonly restarts = { crash: 0, timeout: 0, memory: 0 };
  private readonly timeoutMs: number;
  private readonly setUpTimeoutMs: number;
  private readonly maxRssBytes: number;

  /**
   * `label` names the host in errors ("sherpa-onnx TTS"); `main` is its entry point's URL, as built
   * (`new URL("./host-main.js", import.meta.url)`).
   */
  constructor(
    private readonly label: string,
    private readonly main: URL,
    private readonly options: ModelHostOptions = {},
  ) {
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.setUpTimeoutMs = options.setUpTimeoutMs ?? 120_000;
    this.maxRssBytes = (options.maxRssMiB ?? Infinity) * 1024 * 1024;
  }

  /** Runs `method` now and again in every later process (model loads). */
  async setUp<K extends keyof M & string>(method: K, params: M[K]["params"]): Promise<M[K]["result"]> {
    const result = await this.requestOn(method, params, { timeoutMs: this.setUpTimeoutMs, loading: true });
    this.setup.push({ method, params });
    return result as M[K]["result"];
  }

  // The one place a host's answer takes its method's type: the process serves the same map.
  readonly request: RequestOf<M> = (method, params, options = {}) =>
    this.requestOn(method, params, options as SendOptions) as Promise<M[typeof method]["result"]>;

  /** `request`, on the process new work goes to. */
  private requestOn(method: string, params: unknown, options: SendOptions): Promise<unknown> {
    try {
      return this.send(this.processForWork(), method, params, options);
    } catch (error) {
      return Promise.reject(error as Error);
    }
  }

  /** Binds a stream to the current process (started if need be) until `release`. */
  pin(): PinnedHost<M> {
    const process = this.processForWork();
    process.pins++;
    let released = false;
    return {
      request: (method, params, options = {}) =>
        this.send(process, method, params, options as SendOptions) as Promise<M[typeof method]["result"]>,
      release: () => {
        if (released) return;
        released = true;
        process.pins--;
        this.retireIfIdle(process);
      },
    };
  }

  /**
   * Replaces the process: the current one ends once its requests are answered and its streams
   * released, and the next request starts a new one (which sets up again what this one had).
   */
  private recycle(): void {
    const process = this.current;
    if (!process) return;
    this.current = undefined;
    process.retiring = true;
    this.retireIfIdle(process);
  }

  status(): HostStatus {
    const state = this.failures > 0 ? "failing" : this.current?.child.connected ? "up" : "idle";
    return {
      host: this.label,
      state,
      failures: this.failures,
      restarts: { ...this.restarts },
      rssBytes: this.current?.rss ?? 0,
      pid: this.current?.child.pid,
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.current = undefined;
    this.failPending(new EngineUnavailableError(`${this.label} is closed`), () => true);
    await Promise.all(
      [...this.processes]
        .filter(({ child }) => child.exitCode === null && child.signalCode === null)
        .map((process) => {
          const exited = new Promise<void>((resolve) => process.child.once("exit", () => resolve()));
          process.endedByUs = true;
          if (process.child.connected) process.child.disconnect();
          else process.child.kill("SIGKILL");
          // A process that does not end when told (stopped, stuck in native code) is killed.
          const kill = setTimeout(() => process.child.kill("SIGKILL"), 5_000);
          return exited.finally(() => clearTimeout(kill));
        }),
    );
  }

  /** The process new work goes to: the current one, or a new one unless restarts are backing off. */
  private processForWork(): Process {
    if (this.closed) throw new EngineUnavailableError(`${this.label} is closed`);
    if (this.current?.child.connected) return this.current;
    const wait = this.retryAt - Date.now();
    if (wait > 0) {
      throw new EngineUnavailableError(
        `${this.label} is restarting after ${this.failures} failure${this.failures === 1 ? "" : "s"} in a row ` +
          `(next try in ${(wait / 1000).toFixed(1)} s)`,
      );
    }
    return this.start();
  }

  private send(process: Process, method: string, params: unknown, options: SendOptions): Promise<unknown> {
    if (!process.child.connected)
      return Promise.reject(new EngineUnavailableError(`${this.label} stopped: the stream was lost`));
    const { signal } = options;
    if (signal?.aborted) return Promise.reject(signal.reason as Error);
    const id = this.nextId++;
    return new Promise<unknown>((resolve, reject) => {
      const onAbort = () => {
        const request = this.pending.get(id);
        if (!request) return;
        if (!request.sent) {
          // Never sent: nothing to stop.
          this.settle(id, request);
          reject(signal!.reason);
          return;
        }
        request.cancelledWith = signal!.reason as Error;
        if (process.child.connected) process.child.send({ id, cancel: true } satisfies HostCancel);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      const done = () => signal?.removeEventListener("abort", onAbort);
      const request: Pending = {
        process,
        method,
        onChunk: options.onChunk,
        timeoutMs: options.timeoutMs ?? this.timeoutMs,
        heardAtSend: process.heard,
        timer: undefined,
        cancelledWith: undefined,
        sent: false,
        loading: options.loading === true,
        resolve: (value) => {
          done();
          resolve(value);
        },
        reject: (error) => {
          done();
          reject(error);
        },
      };
      this.pending.set(id, request);
      // A restarted process serves nothing before its models are loaded again.
      void process.ready.then(() => {
        if (this.pending.get(id) !== request) return;
        if (!process.child.connected) {
          this.settle(id, request);
          request.reject(new EngineUnavailableError(`${this.label} stopped before ${method} was sent`));
          return;
        }
        request.sent = true;
        request.heardAtSend = process.heard;
        this.arm(id, request);
        process.child.send({ id, method, params } satisfies HostRequest);
      });
    });
  }

  /** (Re)starts a request's deadline. */
  private arm(id: number, request: Pending): void {
    clearTimeout(request.timer);
    request.timer = setTimeout(() => this.timedOut(id, request), request.timeoutMs);
    request.timer.unref();
  }

  private timedOut(id: number, request: Pending): void {
    if (this.pending.get(id) !== request) return;
    this.settle(id, request);
    const { process } = request;
    const message = `${this.label} did not answer ${request.method} within ${request.timeoutMs / 1000} s`;
    request.reject(new EngineUnavailableError(message));
    if (process.child.connected) process.child.send({ id, cancel: true } satisfies HostCancel);
    // A process that has said nothing since this request went out is not busy but stuck.
    if (process.heard === request.heardAtSend && process.child.exitCode === null) {
      this.restarts.timeout++;
      this.failed(`${message}; it has said nothing since and is killed`, "timed-out");
      process.endedByUs = true;
      process.child.kill("SIGKILL");
    }
  }

  private start(): Process {
    const { file, execArgv } = entryOf(this.main);
    const child = fork(file, [], {
      execArgv: [...execArgv, ...(this.options.execArgv ?? [])],
      env: { ...process.env, ...this.options.env },
      serialization: "advanced",
      stdio: ["ignore", "ignore", "pipe", "ipc"],
    });
    const started: Process = {
      child,
      heard: 0,
      rss: 0,
      pins: 0,
      retiring: false,
      endedByUs: false,
      ready: Promise.resolve(),
    };
    this.processes.add(started);
    // What the native code says before it ends the process, for the error message.
    let stderr = "";
    child.stderr!.setEncoding("utf8");
    child.stderr!.on("data", (text: string) => {
      stderr = (stderr + text).slice(-2000);
    });
    // A process that never gets as far as serving (its code hangs as it loads) is stuck too.
    const starting = setTimeout(() => {
      this.restarts.timeout++;
      this.failed(
        `${this.label} did not start within ${this.setUpTimeoutMs / 1000} s and is killed`,
        "timed-out",
      );
      started.endedByUs = true;
      child.kill("SIGKILL");
    }, this.setUpTimeoutMs);
    starting.unref();
    const serving = new Promise<void>((resolve) => {
      child.on("message", (message: HostReply | HostReady) => {
        if ("ready" in message) {
          clearTimeout(starting);
          started.heard++;
          resolve();
        } else this.receive(started, message);
      });
    });
    // A message sent as the process dies fails here; its request fails with the process's exit.
    child.on("error", () => undefined);
    child.on("exit", (code, signal) => {
      clearTimeout(starting);
      this.processes.delete(started);
      if (this.current === started) this.current = undefined;
      const last = stderr.trim().split("\n").slice(-3).join(" | ");
      const message = `${this.label} stopped (${signal ?? `exit code ${code}`})${last ? `: ${last}` : ""}`;
      // A model that ends the process as it first loads is refused (setUp rejects); the host is fine.
      const loadingModel = [...this.pending.values()].some((r) => r.process === started && r.loading);
      if (!started.endedByUs && !this.closed && !loadingModel) {
        this.restarts.crash++;
        this.failed(message, "crashed");
      }
      this.failPending(new EngineUnavailableError(message), (request) => request.process === started);
    });
    this.current = started;
    // A new process loads what the previous one had loaded, before anything else it is asked.
    const replays = [...this.setup];
    started.ready = serving.then(() =>
      Promise.allSettled(
        replays.map(
          ({ method, params }) =>
            new Promise((resolve, reject) => {
              const id = this.nextId++;
              const request: Pending = {
                process: started,
                method,
                onChunk: undefined,
                timeoutMs: this.setUpTimeoutMs,
                heardAtSend: started.heard,
                timer: undefined,
                cancelledWith: undefined,
                sent: true,
                resolve,
                reject,
              };
              this.pending.set(id, request);
              this.arm(id, request);
              child.send({ id, method, params } satisfies HostRequest);
            }),
        ),
      ),
    );
    if (this.restarts.crash + this.restarts.timeout + this.restarts.memory > 0 && this.failures > 0) {
      HOST_EVENTS.publish({
        host: this.label,
        event: "restarting",
        message: `${this.label}: starting a new process after ${this.failures} failure(s) in a row`,
      } satisfies HostEvent);
    }
    return started;
  }

  /** A process failed: later starts wait, twice as long after each failure in a row. */
  private failed(message: string, event: HostEvent["event"]): void {
    this.failures++;
    const delay = Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** (this.failures - 1));
    this.retryAt = Date.now() + delay;
    HOST_EVENTS.publish({
      host: this.label,
      event,
      message: `${message} (failure ${this.failures} in a row; next start in ${(delay / 1000).toFixed(1)} s at the earliest)`,
    } satisfies HostEvent);
  }

  private receive(process: Process, reply: HostReply): void {
    process.heard++;
    const request = this.pending.get(reply.id);
    if (!request) return; // timed out: its reply is not wanted
    if ("alive" in reply || "chunk" in reply) {
      request.heardAtSend = process.heard;
      this.arm(reply.id, request);
      if ("alive" in reply) return;
      if (!request.cancelledWith) request.onChunk?.(reply.chunk);
      return;
    }
    this.settle(reply.id, request);
    if (reply.rss !== undefined) process.rss = reply.rss;
    if (request.cancelledWith) request.reject(request.cancelledWith);
    else if ("error" in reply)
      request.reject(new ModelHostError(`${this.label}: ${request.method}: ${reply.error}`));
    else {
      // A process that answers is well again.
      this.failures = 0;
      this.retryAt = 0;
      request.resolve(reply.result);
    }
    if (process.rss > this.maxRssBytes && this.current === process) {
      this.restarts.memory++;
      HOST_EVENTS.publish({
        host: this.label,
        event: "recycled",
        message: `${this.label}: resident memory ${Math.round(process.rss / 2 ** 20)} MiB passed ${Math.round(this.maxRssBytes / 2 ** 20)} MiB; replaced once its work is done`,
      } satisfies HostEvent);
      this.recycle();
    }
    this.retireIfIdle(process);
  }

  private settle(id: number, request: Pending): void {
    clearTimeout(request.timer);
    this.pending.delete(id);
  }

  /** Ends a replaced process once nothing is pending on it nor pinned to it. */
  private retireIfIdle(process: Process): void {
    if (!process.retiring || process.pins > 0) return;
    for (const request of this.pending.values()) if (request.process === process) return;
    process.endedByUs = true;
    if (process.child.connected) process.child.disconnect();
  }

  private failPending(error: Error, which: (request: Pending) => boolean): void {
    for (const [id, request] of this.pending) {
      if (!which(request)) continue;
      this.settle(id, request);
      request.reject(request.cancelledWith ?? error);
    }
  }
}
