import { spawn, type ChildProcessByStdio } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Readable } from "node:stream";
import { AccessToken, AgentDispatchClient, RoomServiceClient } from "livekit-server-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readWav, readWavAsPcm16 } from "../../src/audio/wav.js";
import { runFfmpeg } from "../../src/dubbing/media/ffmpeg.js";
import { roomServiceUrl } from "../../src/rooms/livekit/backend.js";
import { LiveKitParticipant } from "../support/livekit-participant.js";
import { pythonClientsDir, pythonClientsProblem } from "../support/python-clients.js";
import { PROJECT_ROOT } from "../support/run-script.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";
import { testLiveKit, type TestLiveKit } from "../support/servers.js";
import { sharedMissing, sharedPath } from "../support/shared.js";
import { WAIT } from "../support/wait.js";

/**
 * Pinch's own Python clients, installed from PyPI at the versions test/python/requirements.txt pins
 * (scripts/setup-python-clients.sh), each running its documented use against relay with its rooms
 * on the run's real LiveKit server (test/python/pinch_clients.py and pinch_agent.py; what they print
 * is judged here). Speech goes in and comes back over WebRTC, whose losses under load can change
 * what PocketSphinx hears: the tests check that originals and translations and translated speech
 * arrive, not their exact words (the words are checked over the lossless WebSocket path).
 *
 * Pointing them at relay: pinch-sdk takes `api_base_url`; the two plugins construct
 * `PinchClient(api_key=...)` with no setting for it, so the harness replaces the default value of
 * `PinchClient.__init__`'s `api_base_url` (`https://api.startpinch.com`) with relay's URL before they
 * run (`point_pinch_sdk_at_relay` in pinch_clients.py). Their code is not edited.
 */
const livekit = testLiveKit();
const problem =
  ("problem" in livekit ? livekit.problem : undefined) ??
  pythonClientsProblem() ??
  (sharedMissing("data/speech/librivox-pocketsphinx") ? "../shared speech is missing" : undefined);
if (problem) console.warn(`Pinch's Python clients not run: ${problem}`);

const PYTHON_DIR = path.join(PROJECT_ROOT, "test/python");

interface PythonRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** The `RESULT {json}` line the script printed. */
  readonly result: Record<string, unknown> | undefined;
}

describe.skipIf(problem)("Pinch's Python clients against relay, through a real LiveKit server", () => {
  const target = livekit as TestLiveKit;
  let server: TestServer;
  let dir: string;
  let goForward: string;
  const rooms = () => new RoomServiceClient(roomServiceUrl(target.url), target.apiKey, target.apiSecret);

  function env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
    return {
      ...process.env,
      PINCH_API_KEY: API_KEY,
      RELAY_BASE_URL: server.baseUrl,
      PYTHONUNBUFFERED: "1",
      ...extra,
    };
  }

  function startPython(args: string[], extra: Record<string, string> = {}) {
    return spawn(path.join(pythonClientsDir(), "bin/python"), args, {
      cwd: PYTHON_DIR,
      env: env(extra),
      stdio: ["ignore", "pipe", "pipe"],
    });
  }

  /** Runs one subcommand of pinch_clients.py to its end (killed after `timeoutMs`). */
  function python(args: string[], timeoutMs = 300_000): Promise<PythonRun> {
    const child = startPython(["pinch_clients.py", ...args]);
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-20_000)));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    return new Promise((resolve) =>
      child.once("close", (code) => {
        clearTimeout(timer);
        const line = stdout.split("\n").find((candidate) => candidate.startsWith("RESULT "));
        const result = line
          ? (JSON.parse(line.slice("RESULT ".length)) as Record<string, unknown>)
          : undefined;
        resolve({ code, stdout, stderr, result });
      }),
    );
  }

  async function roomsOpen(): Promise<number> {
    const text = await (await fetch(`${server.baseUrl}/metrics`)).text();
    return Number(/^relay_rooms_open (\S+)$/mu.exec(text)?.[1] ?? Number.NaN);
  }

  beforeAll(async () => {
    server = await startServer({
      LIVEKIT_URL: target.url,
      LIVEKIT_API_KEY: target.apiKey,
      LIVEKIT_API_SECRET: target.apiSecret,
      // A room ends this long after its last client left (the clients' rooms, and the test's wait).
      ROOM_DEPARTURE_TIMEOUT_SEC: "2",
      RATE_LIMIT_PER_MINUTE: "1000",
    });
    dir = await mkdtemp(path.join(tmpdir(), "relay-pinch-python-"));
    goForward = sharedPath("data/speech/librivox-pocketsphinx/goforward.wav");
  });
  afterAll(async () => {
    await server?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("pinch-sdk translate_file on a 16 kHz and a 48 kHz WAV: translated speech in the output WAV, originals and translations in the transcript", async () => {
    // translate_file stops listening 6-20 s after the end of its input (a fixed wait of its own):
    // the recordings end with 10 s of silence, as a recording of a talk would, so that a busy
    // machine's translated speech comes before it stops.
    const inputs = await Promise.all(
      [16_000, 48_000].map(async (rate) => {
        const input = path.join(dir, `goforward-${rate}.wav`);
        const args = ["-i", goForward, "-af", "apad=pad_dur=10", "-ar", String(rate), "-ac", "1"];
        await runFfmpeg([...args, "-c:a", "pcm_s16le", input], { timeoutMs: 30_000 });
        return input;
      }),
    );
    const runs = await Promise.all(
      inputs.map(async (input, i) => {
        const output = path.join(dir, `translated-${i}.wav`);
        const transcript = path.join(dir, `transcript-${i}.txt`);
        return { run: await python(["sdk-file", input, output, transcript]), output, transcript };
      }),
    );
    for (const { run, output, transcript } of runs) {
      expect(run.code, run.stderr).toBe(0);
      const text = await readFile(transcript, "utf8");
      const [, original, translated] =
        /^ORIGINAL TRANSCRIPT\n([^]*)\n\nTRANSLATED TRANSCRIPT\n([^]*)\n$/u.exec(text)!;
      expect(original).not.toBe("(unavailable)");
      expect(translated).not.toBe("(unavailable)");
      expect(translated).not.toBe(original);
      // The SDK writes PCM16 at the rate LiveKit delivers (48 kHz); its speech is the translation's.
      const wav = await readWav(output);
      expect(wav.sampleRate).toBe(48_000);
      expect(run.result?.output_loud_seconds).toBeGreaterThan(0.5);
    }
  });

  it("pinch-sdk connect_stream with send_pcm16: session, transcript and audio events; a wrong key is the SDK's own auth error", async () => {
    const [stream, wrong] = await Promise.all([python(["sdk-stream", goForward]), python(["sdk-wrong-key"])]);
    expect(stream.code, stream.stderr).toBe(0);
    const result = stream.result as {
      types: string[];
      finals: { kind: string; text: string; raw: Record<string, unknown> }[];
      audio_rates: number[];
      audio_loud_seconds: number;
      errors: string[];
    };
    // In the order they came: the stream starts and ends; transcripts and audio (the translator's
    // track is there from the start, silent between translations) in between.
    expect(result.types[0]).toBe("session_started");
    expect(result.types.at(-1)).toBe("session_ended");
    expect(new Set(result.types)).toEqual(
      new Set(["session_started", "transcript", "audio", "session_ended"]),
    );
    expect(result.errors).toEqual([]);
    const kinds = new Set(result.finals.map((final) => final.kind));
    expect(kinds).toEqual(new Set(["original", "translated"]));
    // The fields Pinch's plugins read beside the SDK's: the language of each text.
    for (const { kind, raw } of result.finals)
      expect(raw.language_detected).toBe(kind === "original" ? "en" : "es");
    expect(result.audio_rates).toEqual([48_000]);
    expect(result.audio_loud_seconds).toBeGreaterThan(0.5);

    expect(wrong.code, wrong.stderr).toBe(0);
    expect(wrong.result).toEqual({
      error: "PinchAuthError",
      message: "Authentication failed. Check your PINCH_API_KEY in the Pinch Portal.",
    });
  });

  it("pipecat-plugins-pinch in a Pipecat pipeline: a recording in, translated OutputAudioRawFrames and TranscriptionFrames out, and the room closes after the EndFrame", async () => {
    const run = await python(["pipecat-plugin", goForward]);
    expect(run.code, run.stderr).toBe(0);
    const result = run.result as {
      transcripts: { user_id: string; text: string; language: string }[];
      audio_loud_seconds: number;
      errors: string[];
    };
    expect(result.errors).toEqual([]);
    // The plugin's convention: user_id "original" for the speech heard, "" for its translation,
    // each with the language relay names (language_detected).
    const original = result.transcripts.filter((frame) => frame.user_id === "original");
    const translated = result.transcripts.filter((frame) => frame.user_id === "");
    expect(original.length).toBeGreaterThan(0);
    expect(translated.length).toBeGreaterThan(0);
    expect(new Set(original.map((frame) => frame.language))).toEqual(new Set(["en"]));
    expect(new Set(translated.map((frame) => frame.language))).toEqual(new Set(["es"]));
    expect(result.audio_loud_seconds).toBeGreaterThan(0.5);
    // Its EndFrame disconnects it from the room (the plugin never calls /session/end): the room
    // closes ROOM_DEPARTURE_TIMEOUT_SEC later, on LiveKit and in the service.
    const room = /room: (api-[0-9a-f]+)/u.exec(run.stderr)?.[1];
    expect(room, run.stderr).toBeDefined();
    await expect.poll(async () => (await rooms().listRooms([room!])).length, WAIT).toBe(0);
    await expect.poll(() => roomsOpen(), WAIT).toBe(0);
  });

  it("livekit-plugins-pinch in a LiveKit Agents worker: the room's speech translated on its own track, transcripts to the README's callback", async () => {
    const agentName = `pinch-test-${randomUUID().slice(0, 8)}`;
    const worker: ChildProcessByStdio<null, Readable, Readable> = startPython(["pinch_agent.py", "start"], {
      LIVEKIT_URL: target.url,
      LIVEKIT_API_KEY: target.apiKey,
      LIVEKIT_API_SECRET: target.apiSecret,
      PINCH_TEST_AGENT_NAME: agentName,
    });
    let output = "";
    worker.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    worker.stderr.on("data", (chunk: Buffer) => (output = (output + chunk.toString()).slice(-50_000)));
    const exited = new Promise((resolve) => worker.once("exit", resolve));
    const name = `pinch-agent-${randomUUID().slice(0, 8)}`;
    let alice: LiveKitParticipant | undefined;
    try {
      await expect.poll(() => output.includes("registered worker"), WAIT).toBe(true);
      await rooms().createRoom({ name, emptyTimeout: 120 });
      const token = new AccessToken(target.apiKey, target.apiSecret, { identity: "alice" });
      token.addGrant({ roomJoin: true, room: name, canPublish: true, canSubscribe: true });
      alice = await LiveKitParticipant.join(target.url, await token.toJwt());
      const dispatcher = new AgentDispatchClient(roomServiceUrl(target.url), target.apiKey, target.apiSecret);
      await dispatcher.createDispatch(name, agentName);
      await expect.poll(() => output.includes(`PINCH-TEST started in ${name}`), WAIT).toBe(true);
      const agentOf = (participant: LiveKitParticipant) =>
        [...participant.room.remoteParticipants.values()].find((p) => p.identity !== "alice");
      await expect.poll(() => agentOf(alice!), WAIT).toBeDefined();
      const agent = agentOf(alice)!;
      await alice.untilHeard();
      await alice.speak(await readWavAsPcm16(goForward));
      // The README: translated audio published back into the room as a separate track, and
      // transcripts (original and translated) through the callback, which prints finals.
      await expect
        .poll(() => alice!.soundSeconds(`${agent.identity}/pinch-translated`), WAIT)
        .toBeGreaterThan(0.5);
      expect(output).toMatch(/^\[original_transcript\] \S/mu);
      expect(output).toMatch(/^\[translated_transcript\] \S/mu);
    } finally {
      await alice?.leave();
      await rooms()
        .deleteRoom(name)
        .catch(() => undefined);
      worker.kill("SIGTERM");
      const timer = setTimeout(() => worker.kill("SIGKILL"), 30_000);
      await exited;
      clearTimeout(timer);
    }
    // The job ended with its room: the plugin left relay's room, which closes.
    await expect.poll(() => roomsOpen(), WAIT).toBe(0);
  });
});
