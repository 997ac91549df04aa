/**
 * A real OpenAI-compatible speech recognition server on loopback: faster-whisper-server 0.0.3
 * (PyPI, in the `models` Python environment) serving one of the real CTranslate2 Whisper models
 * (test/support/real-models.ts) from its local directory, offline.
 *
 * How that server picks its model (its faster_whisper_server/models.py): a name or path on the
 * command line, or with `--config` a YAML list of `{name, path, model_options, transcribe_options}`;
 * a path that exists is loaded as it is (nothing is downloaded), on the first request. It reads the
 * model of a request from a form field `model_name` (default "whisper-1"), not OpenAI's `model`, so
 * a client that speaks OpenAI's API always asks for "whisper-1": the config names its one model so.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { encodeWav } from "../../src/audio/wav.js";
import { freePort } from "./ports.js";
import { pythonEnvDir, pythonEnvProblem } from "./python-clients.js";
import { realModelDir, realModelsProblem, type RealModel } from "./real-models.js";

export type WhisperModel = Extract<RealModel, `whisper-${string}`>;

/** The model name the server answers to: what OpenAI-style requests get (see above). */
export const WHISPER_SERVER_MODEL = "whisper-1";

export interface WhisperServer {
  /** The API root, "http://127.0.0.1:<port>/v1" (an engines file's `baseUrl`). */
  readonly baseUrl: string;
  /** What the server has logged (the last 16 KiB), for failure messages. */
  log(): string;
  close(): Promise<void>;
}

/** Why the server cannot run here, or undefined when it can (a failure in CI: see `required`). */
export function whisperServerProblem(): string | undefined {
  return realModelsProblem() ?? pythonEnvProblem("models");
}

/** A start-up hang guard, not a speed limit: importing faster-whisper takes seconds on a busy machine. */
const START_TIMEOUT_MS = 120_000;
const KEPT = 16 * 1024;

/**
 * Starts the server for `model` on a free loopback port and returns once it answers and has loaded
 * the model (it loads on the first request: a second of silence is transcribed before returning,
 * so the first utterance of a test does not pay for it).
 */
export async function startWhisperServer(model: WhisperModel): Promise<WhisperServer> {
  const dir = await mkdtemp(path.join(tmpdir(), "whisper-server-"));
  const config = path.join(dir, "models.yaml");
  // JSON is YAML: int8 on 2 threads is how CTranslate2 runs best on a small CPU.
  await writeFile(
    config,
    JSON.stringify({
      models: [
        {
          name: WHISPER_SERVER_MODEL,
          path: realModelDir(model),
          model_options: { device: "cpu", compute_type: "int8", cpu_threads: 2 },
        },
      ],
    }),
  );
  const port = await freePort();
  const child = spawn(
    path.join(pythonEnvDir("models"), "bin/python"),
    ["-m", "faster_whisper_server", "--config", config, "--host", "127.0.0.1", "--port", String(port)],
    // HF_HUB_OFFLINE: should anything ask the Hugging Face Hub, it fails instead of downloading.
    {
      env: { ...process.env, HF_HUB_OFFLINE: "1", PYTHONUNBUFFERED: "1" },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let log = "";
  const keep = (chunk: Buffer) => (log = (log + chunk.toString()).slice(-KEPT));
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const origin = `http://127.0.0.1:${port}`;
  const server: WhisperServer = {
    baseUrl: `${origin}/v1`,
    log: () => log,
    async close() {
      await stop(child, exited);
      await rm(dir, { recursive: true, force: true });
    },
  };
  try {
    await untilHealthy(origin, child);
    await warmUp(server.baseUrl);
    return server;
  } catch (error) {
    await server.close();
    throw new Error(`faster-whisper-server (${model}): ${(error as Error).message}\n${log}`, {
      cause: error,
    });
  }
}

async function untilHealthy(origin: string, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    const health = await fetch(`${origin}/health`).catch(() => undefined);
    if (health?.ok) return;
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`exited during start-up (${child.exitCode ?? child.signalCode})`);
    }
    if (Date.now() > deadline) throw new Error(`not up within ${START_TIMEOUT_MS / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

async function warmUp(baseUrl: string): Promise<void> {
  const form = new FormData();
  form.set(
    "file",
    new Blob([encodeWav(new Int16Array(16_000), 16_000)], { type: "audio/wav" }),
    "warm-up.wav",
  );
  form.set("model", WHISPER_SERVER_MODEL);
  const response = await fetch(`${baseUrl}/audio/transcriptions`, { method: "POST", body: form });
  if (!response.ok)
    throw new Error(`warm-up transcription: HTTP ${response.status} ${await response.text()}`);
}

/** SIGTERM (uvicorn shuts down), then SIGKILL after 10 s. */
async function stop(child: ChildProcess, exited: Promise<void>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
  await exited;
  clearTimeout(timer);
}
