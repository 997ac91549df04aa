import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readFile, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { createInterface } from "node:readline";
import { abortError, throwIfAborted } from "../../core/cancellation.js";

/**
 * Runs a program once per request through a small resident shell.
 *
 * Starting a program directly from the service is expensive: fork() has to copy the page tables of
 * a process holding hundreds of MB of recognizer models, on the main thread (measured with the
 * benchmark: about 50 ms of event-loop time per utterance, 40 % of the service's CPU). The shell is
 * tiny, so it starts the program cheaply; the service only exchanges one line per request with it.
 *
 * Protocol: the service writes `<id> <input file> <output file> <arg>...` (tokens never contain
 * whitespace; globbing is off), the shell runs `<program> <args> -f <input> -w <output>` and answers
 * `<id> <exit status>`. Text and audio travel through files in a private directory, never through
 * the command line.
 */
const SHELL_LOOP = `
set -f
program="$1"
while IFS= read -r line; do
  set -- $line
  id="$1"; input="$2"; output="$3"; shift 3
  "$program" "$@" -f "$input" -w "$output" 2>"$output.err" </dev/null
  echo "$id $?"
done
`;

export class ProgramLauncher {
  private shell: ChildProcessWithoutNullStreams | undefined;
  /** Requests waiting for their status line, with the shell they were written to. */
  private readonly answers = new Map<
    string,
    { readonly shell: ChildProcessWithoutNullStreams; readonly answer: (status: number) => void }
  >();
  private queue: Promise<unknown> = Promise.resolve();
  private pendingCount = 0;
  private closed = false;

  constructor(
    private readonly program: string,
    private readonly workDir: string,
    private readonly timeoutMs: number,
  ) {}

  /** Requests queued or running on this launcher. */
  get pending(): number {
    return this.pendingCount;
  }

  /**
   * Runs the program with `args` on `input` text and returns the bytes it wrote as output. `signal`
   * cancels the request: still queued, it never runs; running, the program is killed (with its shell,
   * which the next request starts afresh).
   */
  run(args: readonly string[], input: string, signal?: AbortSignal): Promise<Buffer> {
    for (const arg of args) {
      if (!/^\S+$/u.test(arg)) throw new Error(`launcher argument "${arg}" is empty or contains whitespace`);
    }
    this.pendingCount++;
    const result = this.queue.then(() => this.execute(args, input, signal));
    this.queue = result.catch(() => undefined);
    return result.finally(() => this.pendingCount--);
  }

  close(): void {
    this.closed = true;
    this.stop();
  }

  private async execute(args: readonly string[], input: string, signal?: AbortSignal): Promise<Buffer> {
    if (this.closed) throw new Error(`${this.program} launcher is closed`);
    // Unique across every launcher sharing the directory (they run concurrently).
    const id = randomUUID();
    const inputFile = path.join(this.workDir, `${id}.txt`);
    const outputFile = path.join(this.workDir, `${id}.wav`);
    await writeFile(inputFile, input, "utf8");
    try {
      throwIfAborted(signal, `${this.program} request`);
      const shell = this.ensureShell();
      const status = await new Promise<number>((resolve, reject) => {
        const abandon = (error: Error): void => {
          clearTimeout(timer);
          signal?.removeEventListener("abort", onAbort);
          this.answers.delete(id);
          this.stop(); // kills the program with its shell; the next request starts a fresh one
          reject(error);
        };
        const timer = setTimeout(
          () => abandon(new Error(`${this.program} timed out after ${this.timeoutMs} ms`)),
          this.timeoutMs,
        );
        const onAbort = (): void => abandon(abortError(signal!, `${this.program} request`));
        signal?.addEventListener("abort", onAbort, { once: true });
        this.answers.set(id, {
          shell,
          answer: (code) => {
            clearTimeout(timer);
            signal?.removeEventListener("abort", onAbort);
            if (code < 0) reject(new Error(`${this.program} launcher exited unexpectedly`));
            else resolve(code);
          },
        });
        shell.stdin.write(`${id} ${inputFile} ${outputFile} ${args.join(" ")}\n`);
      });
      if (status !== 0) {
        const detail = (await readFile(`${outputFile}.err`, "utf8").catch(() => "")).trim().slice(0, 500);
        throw new Error(`${this.program} exited with status ${status}: ${detail || "no error output"}`);
      }
      return await readFile(outputFile);
    } finally {
      await Promise.all(
        [inputFile, outputFile, `${outputFile}.err`].map((file) => rm(file, { force: true })),
      );
    }
  }

  private ensureShell(): ChildProcessWithoutNullStreams {
    if (this.shell) return this.shell;
    // Its own process group, so a timeout can kill the shell together with the program it runs.
    const shell = spawn("/bin/sh", ["-c", SHELL_LOOP, "launcher", this.program], { detached: true });
    this.shell = shell;
    createInterface({ input: shell.stdout }).on("line", (line) => {
      const [id, status] = line.split(" ");
      const waiting = this.answers.get(id ?? "");
      this.answers.delete(id ?? "");
      waiting?.answer(Number(status));
    });
    shell.stderr.resume();
    shell.stdin.on("error", () => undefined);
    shell.on("exit", () => {
      if (this.shell === shell) this.shell = undefined;
      // Only this shell's requests: a shell killed on purpose (timeout, cancellation) may report its
      // exit after the next request was written to its successor.
      for (const [id, waiting] of this.answers) {
        if (waiting.shell !== shell) continue;
        this.answers.delete(id);
        waiting.answer(-1);
      }
    });
    return shell;
  }

  private stop(): void {
    const shell = this.shell;
    this.shell = undefined;
    if (shell?.pid !== undefined) {
      try {
        process.kill(-shell.pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
  }
}
