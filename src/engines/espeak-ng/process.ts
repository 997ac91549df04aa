import { spawn, type ChildProcess } from "node:child_process";

export interface ProcessResult {
  readonly stdout: Buffer;
  readonly stderr: string;
}

export interface RunOptions {
  /** Written to stdin, which is then closed. */
  readonly input?: string;
  readonly timeoutMs: number;
  /** Receives the child while it runs (so the owner can kill it on close). */
  readonly track?: (child: ChildProcess, running: boolean) => void;
}

const STDERR_LIMIT = 4096;

/**
 * Runs `binary args…` without a shell and resolves with its output when it exits with status 0.
 * Spawn failures, non-zero exits, signals and timeouts reject with an Error naming the program.
 */
export function runProcess(
  binary: string,
  args: readonly string[],
  options: RunOptions,
): Promise<ProcessResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, args, { stdio: ["pipe", "pipe", "pipe"], windowsHide: true });
    options.track?.(child, true);
    const stdout: Buffer[] = [];
    let stderr = "";
    let settled = false;
    const finish = (error: Error | undefined): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.track?.(child, false);
      if (error) reject(error);
      else resolve({ stdout: Buffer.concat(stdout), stderr });
    };
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      finish(new Error(`${binary} timed out after ${options.timeoutMs} ms`));
    }, options.timeoutMs);

    child.stdout.on("data", (chunk: Buffer) => stdout.push(chunk));
    child.stderr.on("data", (chunk: Buffer) => {
      if (stderr.length < STDERR_LIMIT) stderr += chunk.toString("utf8");
    });
    child.on("error", (error) => finish(new Error(`could not run ${binary}: ${error.message}`)));
    child.on("close", (code, signal) => {
      if (code === 0) return finish(undefined);
      const detail = stderr.trim().slice(0, 500) || "no error output";
      const status = signal ? `was killed by ${signal}` : `exited with status ${code}`;
      finish(new Error(`${binary} ${status}: ${detail}`));
    });
    // A child that dies early closes stdin under us (EPIPE); its exit status reports the real cause.
    child.stdin.on("error", () => undefined);
    child.stdin.end(options.input ?? "", "utf8");
  });
}
