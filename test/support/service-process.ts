import { spawn, type ChildProcess } from "node:child_process";
import { freePort } from "./ports.js";
import { nodeArgs, PROJECT_ROOT } from "./run-script.js";

export interface ServiceProcess {
  readonly baseUrl: string;
  readonly child: ChildProcess;
  /** Resolves with the exit code once the process has exited. */
  readonly exited: Promise<number | null>;
  /** What it has written to stdout so far (its JSON log and the start-up banner; the last 256 KiB). */
  stdout(): string;
  /** What it has written to stderr so far (the last 256 KiB; shown as it comes too). */
  stderr(): string;
}

const KEPT = 256 * 1024;

/**
 * The service as `npm start` runs it (the built src/main.ts in its own process) on a free loopback port,
 * returned once `/healthz` answers; `env` adds to and overrides the defaults. Its stdout is kept, its
 * stderr kept and shown.
 */
export async function startServiceProcess(
  name: string,
  env: Record<string, string>,
): Promise<ServiceProcess> {
  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const child = spawn(process.execPath, nodeArgs("src/main.ts"), {
    cwd: PROJECT_ROOT,
    env: {
      ...process.env,
      PORT: String(port),
      HOST: "127.0.0.1",
      PUBLIC_BASE_URL: baseUrl,
      LOG_LEVEL: "warn",
      WORKER_ID: name,
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (text: string) => {
    stdout = (stdout + text).slice(-KEPT);
  });
  child.stderr.setEncoding("utf8").on("data", (text: string) => {
    stderr = (stderr + text).slice(-KEPT);
    process.stderr.write(text);
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  for (;;) {
    if ((await fetch(`${baseUrl}/healthz`).catch(() => undefined))?.status === 200) {
      return { baseUrl, child, exited, stdout: () => stdout, stderr: () => stderr };
    }
    if (child.exitCode !== null) throw new Error(`${name} exited during start-up`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
