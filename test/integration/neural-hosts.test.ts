/**
 * The neural tier's model hosts attacked as a hostile client would, through the real service with
 * stand-in models where `relay models pull` puts them (test/support/stand-in-models/): the streaming
 * recognizer, a Piper voice and the en→es translation model, each in its host process, with eSpeak
 * NG and Apertium behind them. What is checked is what the reproductions showed broken:
 * hosts that grow without bound, keep working for clients that left, hang without an error, take
 * live sessions down when they die, or crash in a loop in silence.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readWavAsPcm16 } from "../../src/audio/wav.js";
import { createSession, RealtimeSocket } from "../../src/cli/recording-socket.js";
import type { HostStatus } from "../../src/core/contracts.js";
import type { SherpaRecognizerEngine } from "../../src/engines/sherpa-onnx/recognizer.js";
import type { SherpaTtsEngine } from "../../src/engines/sherpa-onnx/tts.js";
import { translateAlong } from "../../src/engines/routing/registry.js";
import {
  installStandInRecognizer,
  installStandInTranslation,
  installStandInVoice,
} from "../support/stand-in-models/install.js";
import { alive } from "../support/processes.js";
import { until } from "../support/wait.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";
import { sharedMissing, sharedPath } from "../support/shared.js";
import { openTtsSession, speakLine } from "../support/tts-session.js";
import { configuredEngine } from "../../src/engines/routing/adapters.js";

const CLIP = "data/speech/librivox-pocketsphinx/sense_and_sensibility_01_austen_64kb-0870.wav";
const OTHER_KEY = "other-account-key";
const VOICE = "piper-en_US-libritts_r-medium";
/** Deadlines short enough for a test (the default is 10 s). */
const TIMEOUT_MS = 1_500;

let modelsDir: string;
let server: TestServer;
let speech: Int16Array;

const hostsOf = (label: string): HostStatus => {
  const found = server.registry.hosts().find((host) => host.host === label);
  if (!found) throw new Error(`no host ${label}: ${JSON.stringify(server.registry.hosts())}`);
  return found;
};
/** The n-th of many distinct names (hotwords leave out words with digits). */
const nameOf = (n: number) =>
  `Zeph${String.fromCharCode(97 + (n % 26))}${String.fromCharCode(97 + Math.floor(n / 26))}yr`;
const health = async () =>
  (await (await server.inject("/healthz")).json()) as {
    status: string;
    model_hosts: { host: string; state: string; restarts: Record<string, number> }[];
  };

beforeAll(async () => {
  modelsDir = await mkdtemp(path.join(tmpdir(), "relay-neural-hosts-"));
  await installStandInRecognizer(modelsDir, { punctuation: false });
  await installStandInVoice(modelsDir, VOICE, { speakers: 2 });
  installStandInTranslation(modelsDir, "opus-mt-en-es");
  const engines = path.join(modelsDir, "engines.json");
  await writeFile(
    engines,
    JSON.stringify({
      asr: [{ engine: "sherpa-onnx", timeoutMs: TIMEOUT_MS }, { engine: "pocketsphinx" }],
      mt: [{ engine: "transformers-js", timeoutMs: TIMEOUT_MS }, { engine: "apertium" }],
      tts: [{ engine: "sherpa-onnx", timeoutMs: TIMEOUT_MS }, { engine: "espeak-ng" }],
    }),
  );
  server = await startServer(
    { MODELS_DIR: modelsDir, ENGINES_FILE: engines, API_KEYS: `${API_KEY},${OTHER_KEY}` },
    { ownEngines: true },
  );
  if (!sharedMissing(CLIP)) speech = await readWavAsPcm16(sharedPath(CLIP));
});
afterAll(async () => {
  await server?.close();
  if (modelsDir) await rm(modelsDir, { recursive: true, force: true });
});

describe("hotword recognizers: bounded, freed, per account", () => {
  const recognizer = () => configuredEngine(server.registry.recognizer("en")!) as SherpaRecognizerEngine;
  /** One utterance with `context`'s names as hotwords, as a session's next segment opens it. */
  const utterance = async (context: string, account: string) => {
    const stream = await recognizer().createStream({ language: "en", context, account });
    await stream.write(new Int16Array(3_200));
    await stream.finish();
  };

  it("50 live context changes leave a few recognizers alive and the host's memory near its start", async () => {
    await utterance("Kubernetes", "a");
    const start = await recognizer().hotwordStats();
    for (let i = 0; i < 50; i++) await utterance(`Project ${nameOf(i)} with Doctor Baker`, "a");
    // Dropped recognizers are freed by the host as their last stream ends (finalizers run soon after).
    await until(
      async () => (await recognizer().hotwordStats()).recognizers <= 2,
      "dropped recognizers to be freed",
    );
    const after = await recognizer().hotwordStats();
    expect(after.hotwordSets).toEqual({ a: 2 });
    expect(after.streams).toBe(0);
    // Fifty recognizers held would be fifty model copies; a few hundred MB is the bound asked for.
    expect(after.rss - start.rss).toBeLessThan(300 * 2 ** 20);
  });

  it("one account's new hotwords replace its own, never another account's", async () => {
    await utterance("Alice Springs", "b");
    for (let i = 0; i < 5; i++) await utterance(`Ferris ${nameOf(i)}`, "a");
    const { hotwordSets } = await recognizer().hotwordStats();
    expect(hotwordSets).toEqual({ a: 2, b: 1 });
  });

  it.skipIf(sharedMissing(CLIP))(
    "a session's update_metadata context reaches the next utterance's hotwords",
    async () => {
      const session = await createSession(server.baseUrl, API_KEY, {
        sourceLanguage: "en",
        targetLanguage: "es",
        audioOutputEnabled: "false",
        context: "Marianne Dashwood",
      });
      const socket = await RealtimeSocket.connect(session.ws_url);
      await socket.waitFor((m) => m.type === "ready");
      const pause = new Int16Array(16_000);
      for (const context of ["Willoughby", "Colonel Brandon"]) {
        socket.send({ type: "update_metadata", metadata: { context } });
        await socket.waitFor((m) => m.type === "metadata_ack" && JSON.stringify(m).includes("context"));
        await socket.stream(speech.subarray(0, 32_000), { chunkMs: 20, speed: 4 });
        await socket.stream(pause, { chunkMs: 20, speed: 4 });
      }
      socket.finalize();
      await socket.waitFor((m) => m.type === "original_transcript" && m.is_final === true);
      socket.close();
      const sets = (await recognizer().hotwordStats()).hotwordSets;
      // The session's account holds at most its share, whatever its context changes.
      expect(Object.values(sets).every((count) => count <= 2)).toBe(true);
      expect(socket.messages.some((m) => m.type === "error")).toBe(false);
    },
  );
});

describe("speech synthesis: abandoned long texts stop, accounts take turns", () => {
  const tts = () => configuredEngine(server.registry.synthesizer("en")!) as SherpaTtsEngine;

  it("four abandoned unpunctuated speaks stop with their sessions; another account is served", async () => {
    const before = await tts().passes();
    // The stand-in speaks about ten times faster than a real voice, so the texts are the longest a
    // speak may be (5,000 characters: 63 passes of 80 each) and the sessions close after 100 ms (the
    // issue's 1,000 characters and 300 ms would be spoken whole first).
    const unpunctuated = Array.from({ length: 1_000 }, (_, i) => `word${i % 10}`)
      .join(" ")
      .slice(0, 5_000);
    for (let i = 0; i < 4; i++) {
      const socket = await openTtsSession(server.baseUrl, { voiceId: "1", targetLanguage: "en" });
      socket.send({ type: "speak", text: unpunctuated });
      await new Promise((resolve) => setTimeout(resolve, 100));
      socket.close();
    }
    const other = await createSession(server.baseUrl, OTHER_KEY, { mode: "tts", targetLanguage: "en" });
    const otherSocket = await RealtimeSocket.connect(other.ws_url);
    await otherSocket.waitFor((m) => m.type === "ready" && m.mode === "tts");
    const frames = await speakLine(otherSocket, { text: "Hello there." });
    otherSocket.close();
    expect(frames.length).toBeGreaterThan(0);
    // Once the sessions are gone, nothing of theirs is still being spoken.
    await until(async () => (await tts().passes()).running === 0, "abandoned syntheses to stop");
    const after = await tts().passes();
    // Never more passes at once than synthesis slots (2): work stops before its slot is given back.
    expect(after.mostAtOnce).toBeLessThanOrEqual(2);
    // An abandoned text stops after the pass it is in: far fewer than the 4 × 63 passes of the texts
    // (and "Hello there.").
    expect(after.total - before.total).toBeLessThan((4 * 63) / 2);
  });
});

describe("deadlines and failover", () => {
  it("a stopped voice host: speech comes from eSpeak NG within the deadline, the host is replaced, /healthz says degraded", async () => {
    const socket = await openTtsSession(server.baseUrl, { voiceId: "1", targetLanguage: "en" });
    await speakLine(socket, { text: "Warm up." });
    const { pid } = hostsOf("sherpa-onnx TTS");
    expect(pid).toBeDefined();
    process.kill(pid!, "SIGSTOP");
    try {
      const frames = await speakLine(socket, { text: "Are you there?" });
      expect(frames.length).toBeGreaterThan(0);
      expect(socket.messages.some((m) => m.type === "error")).toBe(false);
      await until(() => !alive(pid!), "the stopped host to be killed");
      expect(hostsOf("sherpa-onnx TTS")).toMatchObject({ state: "failing", restarts: { timeout: 1 } });
      expect((await health()).status).toBe("degraded");
    } finally {
      if (alive(pid!)) process.kill(pid!, "SIGCONT");
    }
    // After the back-off a new host serves, and the service is healthy again.
    await new Promise((resolve) => setTimeout(resolve, 600));
    await speakLine(socket, { text: "Back again." });
    await until(() => hostsOf("sherpa-onnx TTS").state === "up", "a new voice host");
    socket.close();
  });

  it("a stopped translation host: Apertium translates within the deadline", async () => {
    const routes = server.registry.translationRoutes("en", "es");
    expect(routes[0]!.hops[0]!.engine.info.id).toBe("transformers-js");
    expect(await translateAlong(routes, { text: "good morning" })).toBe("good morning [es]");
    const { pid } = hostsOf("transformers.js translation");
    process.kill(pid!, "SIGSTOP");
    try {
      const finals = await Promise.all(
        Array.from({ length: 9 }, (_, i) => translateAlong(routes, { text: `the house number ${i}` })),
      );
      // Apertium's Spanish, not the stand-in's echo.
      for (const final of finals) expect(final).toMatch(/casa/iu);
      await until(() => !alive(pid!), "the stopped translation host to be killed");
    } finally {
      if (alive(pid!)) process.kill(pid!, "SIGCONT");
    }
  });
});

describe.skipIf(sharedMissing(CLIP))("a recognizer host that dies mid-utterance", () => {
  it("costs the session an error frame; the session stays open and later speech is recognised", async () => {
    const session = await createSession(server.baseUrl, API_KEY, {
      sourceLanguage: "en",
      targetLanguage: "es",
      audioOutputEnabled: "false",
    });
    const socket = await RealtimeSocket.connect(session.ws_url);
    await socket.waitFor((m) => m.type === "ready");
    const streaming = socket.stream(speech, { chunkMs: 20, speed: 2 });
    await socket.waitFor((m) => m.type === "original_transcript" && (m.text as string) !== "");
    const { pid } = hostsOf("sherpa-onnx recognizer");
    process.kill(pid!, "SIGKILL");
    await streaming;
    const lost = await socket.waitFor((m) => m.type === "error");
    expect(lost.error).toMatch(/speech recognition lost an utterance/);
    // At once, within the restart's back-off: the next utterance goes to the next recognizer
    // (PocketSphinx) or, once the back-off has passed, to a new host.
    const errorAt = socket.messages.indexOf(lost);
    await socket.stream(new Int16Array(16_000), { chunkMs: 20, speed: 4 });
    await socket.stream(speech, { chunkMs: 20, speed: 4 });
    await socket.stream(new Int16Array(16_000), { chunkMs: 20, speed: 4 });
    socket.finalize();
    await socket.waitFor(
      (m) =>
        socket.messages.indexOf(m) > errorAt &&
        m.type === "original_transcript" &&
        m.is_final === true &&
        (m.text as string) !== "",
    );
    expect(socket.closeCode).toBeUndefined();
    // One error frame: the utterance that was lost, and no other.
    expect(socket.messages.filter((m) => m.type === "error")).toHaveLength(1);
    socket.close();
  });
});

describe("a voice that crashes its host as it loads", () => {
  it("backs off (no process storm), logs, and shows the host failing while eSpeak NG speaks", async () => {
    const socket = await openTtsSession(server.baseUrl, { voiceId: "1", targetLanguage: "en" });
    await speakLine(socket, { text: "Fine so far." });
    const before = hostsOf("sherpa-onnx TTS").restarts.crash;
    // Its tokens corrupted after start: every new host process dies loading it again.
    await writeFile(path.join(modelsDir, `vits-piper-en_US-libritts_r-medium`, "tokens.txt"), "\u0000bad\n");
    process.kill(hostsOf("sherpa-onnx TTS").pid!, "SIGKILL");
    await until(() => hostsOf("sherpa-onnx TTS").state === "failing", "the host's death to be seen");
    const healthz = await health();
    expect(healthz.status).toBe("degraded");
    expect(healthz.model_hosts.find((h) => h.host === "sherpa-onnx TTS")).toMatchObject({ state: "failing" });
    const started = Date.now();
    let spoken = 0;
    while (Date.now() - started < 3_000) {
      if ((await speakLine(socket, { text: "Still speaking." })).length > 0) spoken++;
    }
    socket.close();
    const crashes = hostsOf("sherpa-onnx TTS").restarts.crash - before;
    // The first death and the back-off's 0.5, 1 and 2 s: 3 s hold at most 4 (not hundreds).
    expect(crashes).toBeGreaterThanOrEqual(1);
    expect(crashes).toBeLessThanOrEqual(4);
    expect(spoken).toBeGreaterThan(0);
    // Counted and shown for Prometheus.
    const metrics = await (await server.inject("/metrics")).text();
    const crashed = /relay_model_host_restarts_total\{host="sherpa-onnx TTS",reason="crash"\} (\d+)/u.exec(
      metrics,
    );
    expect(Number(crashed?.[1])).toBeGreaterThanOrEqual(crashes);
    expect(metrics).toMatch(/relay_model_host_resident_bytes\{host="sherpa-onnx recognizer"\} [1-9]\d*/u);
    expect(metrics).toMatch(/relay_model_host_failing\{host="sherpa-onnx TTS"\} [01]/u);
  });
});
