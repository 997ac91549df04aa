/**
 * One warm Apertium pipeline: the mode's programs started once, chained by pipes, in null-flush mode.
 * A request is written as stream-format text plus NUL; the answer is everything up to the next NUL
 * on the output. Answers come back in the order requests were written, so requests form a FIFO.
 *
 * Several requests may be in the pipe at once (`maxInFlight`): each program works on a different
 * request, like an assembly line, which raises throughput under load without reordering.
 */

import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import type { Readable } from "node:stream";
import { performance } from "node:perf_hooks";
import { abortError } from "../../core/cancellation.js";
import { deformat, reformat } from "./format.js";

export interface PipelineOptions {
  /** Mode name for messages, e.g. "eng-spa". */
  readonly name: string;
  /** The programs (argument vectors), each with `-z`. */
  readonly commands: readonly (readonly string[])[];
  /** A request with no answer this long after reaching the head of the line fails; the pipeline restarts. */
  readonly requestTimeoutMs: number;
  /**
   * The same bound for the first request of freshly started programs, which first load their
   * dictionaries: on a busy machine that alone can take seconds.
   */
  readonly startupTimeoutMs: number;
  /** Requests written to the pipe before their predecessors are answered. */
  readonly maxInFlight: number;
}

export interface PipelineMember {
  readonly pid: number;
  readonly program: string;
}

export interface PipelineStatus {
  /** Processes of the running pipeline in order, empty while stopped. */
  readonly processes: readonly PipelineMember[];
  /** Milliseconds from spawn to the first answer of the current (or last) process set. */
  readonly startupMs: number | undefined;
  /** Requests queued or in the pipe. */
  readonly pending: number;
  /** Times the pipeline was started (1 after a clean start; more after crashes or timeouts). */
  readonly starts: number;
}

interface Job {
  readonly text: string;
  readonly nonce: string;
  readonly resolve: (translation: string) => void;
  readonly reject: (error: Error) => void;
}

/** Stderr kept per pipeline for error messages. */
const STDERR_TAIL = 2000;
/** After a program ends on its own, how long the others get to report how they ended. */
const EXIT_GRACE_MS = 100;

/**
 * The programs of one pipeline, spawned directly by Node and chained stdout → stdin (as apertium-apy
 * does). No shell in between: Node is the parent of every program, so it learns which one died and
 * reaps them all (a shell's orphans would become zombies where PID 1 does not reap).
 */
class PipelineProcess {
  readonly spawnedAt = performance.now();
  readonly members: { child: ChildProcess; program: string }[] = [];
  firstAnswerMs: number | undefined;
  /** Settles once every program has exited and the output was delivered. */
  readonly closed: Promise<void>;
  private stderr = "";
  /** Why we stopped it, when we did. */
  private stopReason: string | undefined;
  /** First program that crashed, was killed by someone else or could not start. */
  private failure: string | undefined;
  /** First program that ended normally (usually because its input ended after a crash upstream). */
  private cleanExit: string | undefined;
  private killTimer: NodeJS.Timeout | undefined;
  private chunks: Buffer[] = [];
  private running = 0;
  private markClosed: () => void = () => undefined;

  constructor(
    commands: readonly (readonly string[])[],
    onSegment: (proc: PipelineProcess, segment: Buffer) => void,
    onClose: (proc: PipelineProcess, description: string) => void,
  ) {
    this.closed = new Promise((resolve) => (this.markClosed = resolve));
    const env = pipelineEnv();
    const finish = (): void => {
      if (--this.running > 0) return;
      clearTimeout(this.killTimer);
      const how = this.failure ?? this.stopReason ?? this.cleanExit ?? "ended";
      const stderr = this.stderr.trim();
      onClose(this, stderr ? `${how}; stderr: ${stderr}` : how);
      this.markClosed();
    };
    let upstream: Readable | undefined;
    for (const [index, argv] of commands.entries()) {
      const [file, ...args] = argv;
      const program = path.basename(file!);
      let child: ChildProcess;
      try {
        child = spawn(file!, args, { stdio: [upstream ?? "pipe", "pipe", "pipe"], env });
      } catch (error) {
        this.noteExit(`${program} could not start: ${(error as Error).message}`, true);
        break;
      }
      // The next program owns the read end now; closing ours lets writers see EPIPE if it dies.
      upstream?.destroy();
      upstream = index < commands.length - 1 ? child.stdout! : undefined;
      this.members.push({ child, program });
      this.running++;
      child.stdin?.on("error", () => undefined); // EPIPE after a crash; reported via exit
      child.stderr!.setEncoding("utf8");
      child.stderr!.on("data", (text: string) => {
        this.stderr = (this.stderr + text).slice(-STDERR_TAIL);
      });
      let done = false;
      const finishOnce = (): void => {
        if (!done) finish();
        done = true;
      };
      child.on("error", (error) => {
        this.noteExit(`${program} could not start: ${error.message}`, true);
        if (child.pid === undefined) finishOnce(); // no process, so no "close" to wait for
      });
      child.on("exit", (code, signal) => {
        const how = signal ? `${program} was killed by ${signal}` : `${program} exited with code ${code}`;
        this.noteExit(how, signal !== null || code !== 0);
      });
      child.on("close", finishOnce);
    }
    this.members.at(-1)?.child.stdout!.on("data", (chunk: Buffer) => {
      let start = 0;
      for (let nul = chunk.indexOf(0); nul >= 0; nul = chunk.indexOf(0, start)) {
        this.chunks.push(chunk.subarray(start, nul));
        const segment = Buffer.concat(this.chunks);
        this.chunks = [];
        start = nul + 1;
        onSegment(this, segment);
      }
      if (start < chunk.length) this.chunks.push(chunk.subarray(start));
    });
    if (this.running === 0) {
      this.running = 1;
      queueMicrotask(finish);
    }
  }

  get processes(): PipelineMember[] {
    return this.members.flatMap(({ child, program }) =>
      child.pid !== undefined && this.isRunning(child) ? [{ pid: child.pid, program }] : [],
    );
  }

  write(data: string): void {
    this.members[0]?.child.stdin?.write(data);
  }

  /** Ends the pipeline on purpose (timeout, lost sync, close): every program is killed now. */
  stop(reason: string): void {
    this.stopReason ??= reason;
    this.killAll();
  }

  private noteExit(description: string, abnormal: boolean): void {
    if (this.stopReason) return; // our own kill
    if (abnormal) this.failure ??= description;
    else this.cleanExit ??= description;
    // Let the programs downstream report too (they end normally once their input ends), then kill
    // the ones upstream, which would otherwise wait for input forever.
    this.killTimer ??= setTimeout(() => this.killAll(), EXIT_GRACE_MS);
  }

  private killAll(): void {
    clearTimeout(this.killTimer);
    for (const { child } of this.members) if (this.isRunning(child)) child.kill("SIGKILL");
  }

  private isRunning(child: ChildProcess): boolean {
    return child.exitCode === null && child.signalCode === null;
  }
}

/** Apertium needs a UTF-8 LC_CTYPE (the `apertium` script sets one the same way). */
function pipelineEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  const locale = env.LC_ALL || env.LC_CTYPE || env.LANG || "";
  if (!/utf-?8/i.test(locale)) {
    delete env.LC_ALL;
    env.LC_CTYPE = "C.UTF-8";
  }
  return env;
}

export class ApertiumPipeline {
  private proc: PipelineProcess | undefined;
  private readonly queue: Job[] = [];
  private inFlight: Job[] = [];
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private seq = 0;
  private starts = 0;
  private lastStartupMs: number | undefined;

  constructor(private readonly options: PipelineOptions) {}

  /** Starts the process (if needed) and resolves once it has answered a probe request. */
  async warmUp(): Promise<number> {
    this.ensureStarted();
    const proc = this.proc!;
    await this.translate("a");
    return proc.firstAnswerMs ?? 0;
  }

  status(): PipelineStatus {
    return {
      processes: this.proc?.processes ?? [],
      startupMs: this.proc?.firstAnswerMs ?? this.lastStartupMs,
      pending: this.queue.length + this.inFlight.length,
      starts: this.starts,
    };
  }

  get pending(): number {
    return this.queue.length + this.inFlight.length;
  }

  /**
   * Translates trimmed, non-empty text. `signal` cancels the request: one still queued is never
   * written; one already in the pipe is answered and its answer discarded (the pipe stays in sync).
   */
  translate(text: string, signal?: AbortSignal): Promise<string> {
    if (this.closed) return Promise.reject(new Error(`apertium ${this.options.name}: engine is closed`));
    if (signal?.aborted) return Promise.reject(abortError(signal, `apertium ${this.options.name} request`));
    return new Promise<string>((resolve, reject) => {
      const onAbort = (): void => {
        const queued = this.queue.indexOf(job);
        if (queued >= 0) this.queue.splice(queued, 1);
        reject(abortError(signal!, `apertium ${this.options.name} request`));
      };
      const settle =
        <T>(then: (value: T) => void) =>
        (value: T): void => {
          signal?.removeEventListener("abort", onAbort);
          then(value);
        };
      // The nonce never occurs in user text: user "[" and "]" are escaped by `deformat`.
      const job: Job = {
        text,
        nonce: `relay:${++this.seq}`,
        resolve: settle(resolve),
        reject: settle(reject),
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.queue.push(job);
      this.ensureStarted();
      this.pump();
    });
  }

  /** Kills the processes; pending requests fail. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const error = new Error(`apertium ${this.options.name}: engine closed before the translation finished`);
    this.clearTimer();
    for (const job of this.inFlight.splice(0)) job.reject(error);
    for (const job of this.queue.splice(0)) job.reject(error);
    const proc = this.proc;
    if (!proc) return;
    proc.stop("closed");
    await proc.closed;
  }

  private ensureStarted(): void {
    if (this.proc || this.closed) return;
    this.starts++;
    this.proc = new PipelineProcess(
      this.options.commands,
      (proc, segment) => this.onSegment(proc, segment),
      (proc, description) => this.onClose(proc, description),
    );
  }

  private pump(): void {
    const proc = this.proc;
    if (!proc) return;
    while (this.inFlight.length < this.options.maxInFlight && this.queue.length > 0) {
      const job = this.queue.shift()!;
      this.inFlight.push(job);
      proc.write(`${deformat(job.text, job.nonce)}\0`);
      if (this.inFlight.length === 1) this.armTimer();
    }
  }

  private onSegment(proc: PipelineProcess, segment: Buffer): void {
    if (proc !== this.proc) return;
    const output = segment.toString("utf8");
    // Programs emit an extra NUL when their input ends (e.g. after a crash upstream): not an answer.
    if (output.trim() === "") return;
    const job = this.inFlight[0];
    const translation = job ? reformat(output, job.nonce) : undefined;
    if (!job || translation === undefined) {
      proc.stop("answers lost sync with requests");
      return;
    }
    proc.firstAnswerMs ??= performance.now() - proc.spawnedAt;
    this.inFlight.shift();
    this.clearTimer();
    if (this.inFlight.length > 0) this.armTimer();
    job.resolve(translation);
    this.pump();
  }

  private onClose(proc: PipelineProcess, description: string): void {
    if (proc !== this.proc) return;
    this.proc = undefined;
    this.lastStartupMs = proc.firstAnswerMs;
    this.clearTimer();
    const error = new Error(`apertium ${this.options.name} pipeline ended unexpectedly: ${description}`);
    const failed = this.inFlight;
    this.inFlight = [];
    for (const job of failed) job.reject(error);
    if (this.closed) return;
    // Requests not yet written get a fresh pipeline; with nothing written, the pipeline died on its
    // own before reading, so failing the queue avoids a restart loop.
    if (failed.length === 0) for (const job of this.queue.splice(0)) job.reject(error);
    if (this.queue.length > 0) {
      this.ensureStarted();
      this.pump();
    }
  }

  private armTimer(): void {
    this.clearTimer();
    const proc = this.proc;
    const ms =
      proc?.firstAnswerMs === undefined ? this.options.startupTimeoutMs : this.options.requestTimeoutMs;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (!proc || proc !== this.proc) return;
      const [head, ...rest] = this.inFlight;
      this.inFlight = [];
      // Only the head is to blame; requests behind it are re-sent to the restarted pipeline.
      this.queue.unshift(...rest);
      this.proc = undefined;
      this.lastStartupMs = proc.firstAnswerMs;
      proc.stop("timed out");
      head?.reject(new Error(`apertium ${this.options.name}: no answer within ${ms} ms`));
      if (this.queue.length > 0 && !this.closed) {
        this.ensureStarted();
        this.pump();
      }
    }, ms);
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
