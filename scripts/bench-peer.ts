/**
 * Side by side with a peer: WhisperLive 0.10.0 (Collabora's live Whisper server, its faster_whisper
 * backend on the CPU) and relay, on the same real Whisper weights (test/support/real-models.ts) and
 * the same clips: the five LibriVox clips of ../shared/data/speech that have transcripts, then
 * LJSpeech (32). Each clip is streamed whole in real time, 20 ms frames of PCM16, then silence, as a
 * microphone sends it; nobody is told the speech ended. Per system: end of speech (the clip's last
 * 20 ms frame louder than 10 % of its loudest, as scripts/realtime-load.ts finds it) → final text,
 * end of speech → the final's words first shown (an interim may show them before they are final),
 * and WER of the final text (scripts/bench-quality.py's scorer: Whisper's English normaliser, jiwer).
 *
 * - WhisperLive: scripts/bench-peer-whisperlive.py serves the CTranslate2 model; this script speaks
 *   its WebSocket protocol (whisper_live/client.py and server.py): an options JSON, SERVER_READY,
 *   binary audio (`audio_format: "int16"`), `segments` back. Its options are its client's defaults
 *   (VAD on, `same_output_threshold` 10). Its text is final when a message after the end of speech
 *   holds only `completed` segments: WhisperLive completes the last segment once the same text has
 *   come back more than `same_output_threshold` times.
 * - relay, `openai` engine: faster-whisper-server 0.0.3 on the same model
 *   (test/support/whisper-server.ts), relay's ENGINES_FILE pointing at it.
 * - relay, whisper.cpp in process: the model converted to ggml (scripts/convert-whisper-ct2-to-ggml.py).
 * relay runs as its own process (`node dist/main.js`; build first), sessions en → es without speech
 * output; its text is final at the segment's last final `original_transcript` (the VAD ends the
 * segment after 500 ms of silence). After 3 s of silence the client sends `finalize` and waits for
 * `finalized`, so that a final the VAD did not bring is counted (as "after finalize").
 *
 *   npm run bench:peer [-- --model tiny.en|base] [--clips N]    (N: the first N clips of the list)
 *
 * Needs the real models (sh scripts/setup-real-models.sh), the `models` and `whisperlive` Python
 * environments (sh scripts/setup-python-clients.sh models / whisperlive) and relay's build.
 */
import { execFile, spawn } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { cpus, loadavg, tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import WebSocket from "ws";
import { readWavAsPcm16 } from "../src/audio/wav.js";
import { createSession, RealtimeSocket, type ServerMessage } from "../src/cli/recording-socket.js";
import { freePort } from "../test/support/ports.js";
import { startServiceProcess } from "../test/support/service-process.js";
import { pythonEnvDir } from "../test/support/python-clients.js";
import { realModelDir } from "../test/support/real-models.js";
import { startWhisperServer, WHISPER_SERVER_MODEL } from "../test/support/whisper-server.js";
import { flagValue, percentile, SHARED, sleep, speechSpan } from "./realtime-load.js";

const run = promisify(execFile);
const MODEL = flagValue("--model") ?? "tiny.en";
if (MODEL !== "tiny.en" && MODEL !== "base") throw new Error("--model: tiny.en or base");
const MODEL_DIR = realModelDir(`whisper-${MODEL}`);
const API_KEY = "bench-key";
const FRAME = 320;
/** Most silence after the speech before a system counts as having no final. */
const MAX_SILENCE_MS = 15_000;
/** relay's client waits this long in silence before `finalize` (well past the VAD's 500 ms). */
const RELAY_SILENCE_MS = 3_000;

interface Clip {
  readonly name: string;
  readonly pcm: Int16Array;
  readonly reference: string;
  /** Sample index just after the last loud frame. */
  readonly speechEnd: number;
}

interface Result {
  readonly clip: string;
  readonly text: string;
  /** End of speech → final text; null: none within MAX_SILENCE_MS. */
  readonly finalMs: number | null;
  /** End of speech → the final's words first shown (in an interim, or the final itself). */
  readonly shownMs: number | null;
  /** relay only: the last final came after `finalize`, not from the VAD. */
  readonly afterFinalize?: boolean;
}

async function loadClips(): Promise<Clip[]> {
  const speech = path.join(SHARED, "data/speech");
  const lj = (await readFile(path.join(speech, "ljspeech/metadata.csv"), "utf8"))
    .trim()
    .split("\n")
    .map((line) => line.split("|"))
    .map(([id, , normalized]) => ({ file: `ljspeech/wavs/${id}.wav`, reference: normalized! }));
  // LibriVox lines: "<s> words </s> (file)".
  const librivox = (await readFile(path.join(speech, "librivox-pocketsphinx/transcription"), "utf8"))
    .trim()
    .split("\n")
    .map((line) => line.match(/^<s> (.*) <\/s> \((.*)\)$/u)!)
    .map(([, text, id]) => ({ file: `librivox-pocketsphinx/${id}.wav`, reference: text! }));
  const count = Number(flagValue("--clips") ?? Infinity);
  return Promise.all(
    [...librivox, ...lj].slice(0, count).map(async ({ file, reference }) => {
      const pcm = await readWavAsPcm16(path.join(speech, file));
      return { name: file, pcm, reference, speechEnd: speechSpan(pcm).end };
    }),
  );
}

/**
 * Sends `clip` in real-time 20 ms frames, then silence until `done(endOfSpeech)` or `maxSilenceMs`;
 * returns when the end of speech was sent (performance.now()).
 */
async function stream(
  send: (frame: Int16Array) => void,
  clip: Clip,
  done: (endOfSpeech: number) => boolean,
  maxSilenceMs: number,
): Promise<number> {
  const silence = new Int16Array(FRAME);
  const started = performance.now();
  const endOfSpeech = started + clip.speechEnd / 16;
  const total = clip.pcm.length + (maxSilenceMs * 16_000) / 1000;
  for (let offset = 0; offset < total; offset += FRAME) {
    if (offset >= clip.pcm.length && done(endOfSpeech)) break;
    send(offset < clip.pcm.length ? clip.pcm.subarray(offset, offset + FRAME) : silence);
    const wait = started + (offset + FRAME) / 16 - performance.now();
    if (wait > 0) await sleep(wait);
  }
  return endOfSpeech;
}

/** Words only, for telling when shown text already is the final's. */
const words = (text: string): string =>
  text
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s]/gu, "")
    .split(/\s+/u)
    .filter(Boolean)
    .join(" ");

/** When `shown` (arrival times and texts, in order) first showed the words of `final`. */
function firstShown(
  shown: { at: number; text: string }[],
  final: string,
  endOfSpeech: number,
): number | null {
  const at = shown.find((s) => words(s.text) === words(final))?.at;
  return at === undefined ? null : Math.round(at - endOfSpeech);
}

interface Segment {
  readonly start: string;
  readonly text: string;
  readonly completed: boolean;
}

/** One clip through WhisperLive's WebSocket protocol. */
async function whisperLiveClip(port: number, clip: Clip): Promise<Result> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}`);
  const messages: { at: number; segments: Segment[] }[] = [];
  let ready: () => void;
  const isReady = new Promise<void>((resolve) => (ready = resolve));
  ws.on("message", (data: Buffer) => {
    const message = JSON.parse(data.toString()) as { message?: string; segments?: Segment[] };
    if (message.message === "SERVER_READY") ready();
    if (message.segments) messages.push({ at: performance.now(), segments: message.segments });
  });
  await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject));
  // Its client's defaults (whisper_live/client.py), int16 audio as relay's clients send.
  ws.send(
    JSON.stringify({
      uid: crypto.randomUUID(),
      language: "en",
      task: "transcribe",
      model: MODEL_DIR,
      use_vad: true,
      send_last_n_segments: 10,
      no_speech_thresh: 0.45,
      clip_audio: false,
      same_output_threshold: 10,
      audio_format: "int16",
    }),
  );
  await isReady;
  const final = (endOfSpeech: number) =>
    messages.find(
      (m) => m.at >= endOfSpeech && m.segments.length > 0 && m.segments.every((s) => s.completed),
    );
  const endOfSpeech = await stream(
    (frame) => ws.send(Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength)),
    clip,
    (end) => final(end) !== undefined,
    MAX_SILENCE_MS,
  );
  const last = final(endOfSpeech) ?? messages.at(-1);
  // Binary: the server compares the frame with b"END_OF_AUDIO".
  ws.send(Buffer.from("END_OF_AUDIO"));
  ws.close();
  // Segments by start time: a message repeats the last ten.
  const byStart = new Map<string, string>();
  for (const m of messages.filter((m) => m.at <= (last?.at ?? 0))) {
    for (const s of m.segments) byStart.set(s.start, s.text);
  }
  const at = final(endOfSpeech)?.at;
  const text = [...byStart.values()].join(" ").trim();
  const shown = messages.map((m) => ({ at: m.at, text: m.segments.map((s) => s.text).join(" ") }));
  return {
    clip: clip.name,
    text,
    finalMs: at === undefined ? null : Math.round(at - endOfSpeech),
    shownMs: at === undefined ? null : firstShown(shown, text, endOfSpeech),
  };
}

/** One clip through a relay session. */
async function relayClip(baseUrl: string, clip: Clip): Promise<Result> {
  const socket = await RealtimeSocket.connect(
    (await createSession(baseUrl, API_KEY, { audioOutputEnabled: "false" })).ws_url,
  );
  await socket.waitFor((m) => m.type === "ready");
  const endOfSpeech = await stream(
    (frame) => socket.sendAudio(frame),
    clip,
    () => false,
    RELAY_SILENCE_MS,
  );
  const finalizeAt = performance.now();
  socket.finalize();
  await socket.waitFor((m) => m.type === "finalized", 60_000);
  socket.close();
  const finals = socket.received.filter(
    (r) => r.message?.type === "original_transcript" && r.message.is_final === true,
  );
  // In finalizeMode=stable each final of a segment repeats the one before it and adds to it.
  const last = new Map<unknown, ServerMessage>();
  for (const r of finals) last.set(r.message!.correlation_id, r.message!);
  const at = finals.at(-1)?.at;
  const text = [...last.values()].map((m) => String(m.text)).join(" ");
  // Segments before the last are final already; the last one's interims show the rest.
  const before = [...last.values()].slice(0, -1).map((m) => String(m.text));
  const lastId = [...last.keys()].at(-1);
  const shown = socket.received
    .filter((r) => r.message?.type === "original_transcript" && r.message.correlation_id === lastId)
    .map((r) => ({ at: r.at, text: [...before, String(r.message!.text)].join(" ") }));
  return {
    clip: clip.name,
    text,
    shownMs: at === undefined ? null : firstShown(shown, text, endOfSpeech),
    finalMs: at === undefined || at < endOfSpeech ? null : Math.round(at - endOfSpeech),
    afterFinalize: at !== undefined && at > finalizeAt,
  };
}

/** Starts relay as its own process (`npm start`'s). */
async function startRelay(env: Record<string, string>): Promise<{ baseUrl: string; stop(): Promise<void> }> {
  const service = await startServiceProcess("bench-peer", {
    API_KEYS: API_KEY,
    DATA_DIR: await mkdtemp(path.join(tmpdir(), "relay-bench-peer-data-")),
    ...env,
  });
  const health = (await (await fetch(`${service.baseUrl}/healthz`)).json()) as {
    engines: { kind: string; id: string; version: string }[];
  };
  console.error(`relay asr: ${JSON.stringify(health.engines.filter((e) => e.kind === "asr"))}`);
  return {
    baseUrl: service.baseUrl,
    async stop() {
      service.child.kill("SIGTERM");
      await service.exited;
    },
  };
}

async function startWhisperLive(): Promise<{ port: number; stop(): Promise<void> }> {
  const { stdout } = await run("sh", ["scripts/setup-python-clients.sh", "whisperlive"]);
  const port = await freePort();
  const child = spawn(
    path.join(stdout.trim(), "bin/python"),
    ["scripts/bench-peer-whisperlive.py", MODEL_DIR, String(port)],
    // OMP_NUM_THREADS: CTranslate2's threads, 2 as faster-whisper-server is given (4 by default).
    { env: { ...process.env, HF_HUB_OFFLINE: "1", OMP_NUM_THREADS: "2" }, stdio: "inherit" },
  );
  const exited = new Promise((resolve) => child.once("exit", resolve));
  for (let i = 0; i < 600; i++) {
    const open = await new Promise<boolean>((resolve) => {
      const ws = new WebSocket(`ws://127.0.0.1:${port}`);
      ws.once("open", () => {
        ws.terminate();
        resolve(true);
      });
      ws.once("error", () => resolve(false));
    });
    if (open) {
      return {
        port,
        async stop() {
          child.kill("SIGTERM");
          await exited;
        },
      };
    }
    await sleep(200);
  }
  throw new Error("WhisperLive did not start");
}

async function wer(pairs: [string, string][]): Promise<{ wer: number; words: number }> {
  const child = execFile(path.join(pythonEnvDir("models"), "bin/python"), ["scripts/bench-quality.py"]);
  const answer = new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (chunk: Buffer) => (out += chunk.toString()));
    child.once("exit", (code) => (code === 0 ? resolve(out) : reject(new Error(`scorer exited ${code}`))));
  });
  child.stdin!.end(JSON.stringify({ do: "wer", normalizer: "english", pairs }));
  return JSON.parse(await answer) as { wer: number; words: number };
}

interface System {
  readonly name: string;
  /** Starts the system; returns how to run one clip and how to stop. */
  start(): Promise<{ clip(clip: Clip): Promise<Result>; stop(): Promise<void> }>;
}

const SYSTEMS: System[] = [
  {
    name: `WhisperLive 0.10.0 (faster_whisper backend, ${MODEL})`,
    async start() {
      const server = await startWhisperLive();
      return { clip: (clip) => whisperLiveClip(server.port, clip), stop: server.stop };
    },
  },
  {
    name: `relay, openai engine → faster-whisper-server 0.0.3 (${MODEL})`,
    async start() {
      const server = await startWhisperServer(`whisper-${MODEL}`);
      const dir = await mkdtemp(path.join(tmpdir(), "relay-bench-peer-"));
      const enginesFile = path.join(dir, "engines.json");
      const entry = { engine: "openai", baseUrl: server.baseUrl, model: WHISPER_SERVER_MODEL };
      await writeFile(enginesFile, JSON.stringify({ asr: [{ ...entry, languages: ["en"] }] }));
      const relay = await startRelay({ ENGINES_FILE: enginesFile });
      return {
        clip: (clip) => relayClip(relay.baseUrl, clip),
        async stop() {
          await relay.stop();
          await server.close();
          await rm(dir, { recursive: true, force: true });
        },
      };
    },
  },
  {
    name: `relay, whisper.cpp in process (${MODEL} converted to ggml)`,
    async start() {
      const dir = await mkdtemp(path.join(tmpdir(), "relay-bench-peer-"));
      const ggml = path.join(dir, `ggml-${MODEL}.bin`);
      const python = path.join(pythonEnvDir("models"), "bin/python");
      await run(python, ["scripts/convert-whisper-ct2-to-ggml.py", MODEL_DIR, ggml]);
      const enginesFile = path.join(dir, "engines.json");
      await writeFile(enginesFile, JSON.stringify({ asr: [{ engine: "whisper-cpp", model: ggml }] }));
      const relay = await startRelay({ ENGINES_FILE: enginesFile });
      return {
        clip: (clip) => relayClip(relay.baseUrl, clip),
        async stop() {
          await relay.stop();
          await rm(dir, { recursive: true, force: true });
        },
      };
    },
  },
];

const clips = await loadClips();
const speechSeconds = clips.reduce((sum, clip) => sum + clip.speechEnd / 16_000, 0);
console.log(
  `Machine: ${cpus()[0]?.model} × ${cpus().length}, load average ${loadavg()[0]!.toFixed(2)} at the start; ` +
    `${clips.length} clips, ${speechSeconds.toFixed(0)} s of speech, model ${MODEL}\n`,
);
const rows: string[] = [];
const all: Record<string, Result[]> = {};
for (const system of SYSTEMS) {
  const running = await system.start();
  await running.clip(clips[0]!); // warm-up (WhisperLive loads its model on the first connection)
  const results: Result[] = [];
  for (const clip of clips) {
    const result = await running.clip(clip);
    console.error(`${system.name} ${clip.name}: ${result.shownMs} / ${result.finalMs} ms: ${result.text}`);
    results.push(result);
  }
  await running.stop();
  all[system.name] = results;
  const times = results.map((r) => r.finalMs);
  const shown = results.map((r) => r.shownMs);
  const score = await wer(clips.map((clip, i) => [clip.reference, results[i]!.text]));
  const missing = times.filter((t) => t === null).length;
  const late = results.filter((r) => r.afterFinalize).length;
  rows.push(
    `| ${system.name} | ${percentile(shown, 50)} / ${percentile(shown, 90)} | ${percentile(times, 50)} / ${percentile(times, 90)} | ${(score.wer * 100).toFixed(1)} % | ${missing} | ${system.name.startsWith("relay") ? late : "—"} |`,
  );
  console.log(rows.at(-1));
}
await mkdir("bench-results", { recursive: true });
await writeFile(`bench-results/peer-${MODEL}.json`, JSON.stringify(all, null, 2));
console.log(
  [
    `\nLoad average ${loadavg()[0]!.toFixed(2)} at the end.\n`,
    "| system | end of speech → final words shown p50 / p90 (ms) | end of speech → final text p50 / p90 (ms) | WER | no final | final after `finalize` |",
    "| --- | --- | --- | --- | --- | --- |",
    ...rows,
  ].join("\n"),
);
