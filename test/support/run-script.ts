import { spawn, type ChildProcessByStdio } from "node:child_process";
import path from "node:path";
import type { Readable } from "node:stream";
import { fileURLToPath } from "node:url";

export const PROJECT_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

export interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * What node runs for an entry point of the project: a source file `src/x.ts` as its build
 * `dist/x.js` (what `npm start` and the `relay` bin run; built once by test/support/global-setup.ts,
 * and without tsx's cold start of several seconds per process), any other file as it is.
 */
export function nodeArgs(script: string): string[] {
  const source = /^src\/(.+)\.ts$/u.exec(script);
  if (source) return [`dist/${source[1]}.js`];
  return script.endsWith(".ts") ? ["--import", "tsx", script] : [script];
}

/** Runs an entry point of the project (see `nodeArgs`; stdio not a TTY) and collects its output. */
export function runScript(script: string, args: string[], env: Record<string, string>): Promise<Run> {
  return collect(
    spawn(process.execPath, [...nodeArgs(script), ...args], {
      cwd: PROJECT_ROOT,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    }),
  );
}

export interface SourceRun extends Run {
  readonly signal: NodeJS.Signals | null;
}

/**
 * Runs JavaScript source (`node -e`) with `args`, for code that may end its own process (a native
 * addon that calls `_Exit` or aborts): how it ended is reported, never thrown. `cwd` is where a core
 * file would land.
 */
export function runNodeSource(source: string, args: string[], cwd = PROJECT_ROOT): Promise<SourceRun> {
  return collect(
    spawn(process.execPath, ["-e", source, ...args], { cwd, stdio: ["ignore", "pipe", "pipe"] }),
  );
}

function collect(child: ChildProcessByStdio<null, Readable, Readable>): Promise<SourceRun> {
  return new Promise((resolve, reject) => {
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}
