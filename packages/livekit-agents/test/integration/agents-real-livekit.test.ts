/**
 * The plugin in real agents jobs on a real LiveKit server (the pinned build the global setup starts:
 * test/support/servers.ts), against the real relay service and its engines.
 *
 * The agent side is what LiveKit Agents users run, nothing stood in: test/support/relay-agent.ts as
 * a worker (`tsx relay-agent.ts dev`, the framework's `cli.runApp`) registers with the LiveKit server
 * under an agent name of its own; each room gets it by explicit dispatch (LiveKit's AgentDispatch
 * service), LiveKit offers the job to the worker, the worker accepts it and its process pool forks a
 * job process that joins the room with the token LiveKit assigned (`ctx.connect()`, rtc-node 0.13)
 * and runs the plugin. The participants are users' apps: LiveKit's Node SDK (@livekit/rtc-node 1.x,
 * test/support/livekit-participant.ts), publishing real speech over WebRTC on loopback, hearing the
 * agent's tracks and reading its `lk.transcription` text streams. The two rtc-node versions never
 * share a process: the agent's run in the worker's child processes.
 */
import { spawn, type ChildProcessByStdio } from "node:child_process";
import { randomUUID } from "node:crypto";
import path from "node:path";
import type { Readable } from "node:stream";
import { fileURLToPath, pathToFileURL } from "node:url";
import { AccessToken, AgentDispatchClient, RoomServiceClient } from "livekit-server-sdk";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type * as Rtc from "../../../../node_modules/@livekit/rtc-node/dist/index.js";
import { readWavAsPcm16 } from "../../../../src/audio/wav.js";
import { LiveKitParticipant } from "../../../../test/support/livekit-participant.js";
import { PROJECT_ROOT } from "../../../../test/support/run-script.js";
import { API_KEY, startServer, type TestServer } from "../../../../test/support/server.js";
import { testLiveKit, type TestLiveKit } from "../../../../test/support/servers.js";
import { sharedMissing, sharedPath } from "../../../../test/support/shared.js";
import { GREETING } from "../support/relay-agent.js";

const livekit = testLiveKit();
const problem =
  "problem" in livekit
    ? livekit.problem
    : sharedMissing("data/speech/librivox-pocketsphinx/goforward.wav")
      ? "../shared speech is missing"
      : undefined;
if (problem) console.warn(`the LiveKit Agents plugin on a real LiveKit server not tested: ${problem}`);

const AGENT_FILE = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "support", "relay-agent.ts");
const GO_FORWARD = "go forward ten meters";
const TRANSCRIPTION = "lk.transcription";
/** Long enough for real-time speech through the engines on a loaded 2-core machine. */
const WAIT = { timeout: 150_000, interval: 250 };

/** A text stream on `lk.transcription`, as a participant's app receives it. */
interface Caption {
  /** The sender LiveKit reports. */
  readonly from: string;
  readonly text: string;
  readonly attributes: Record<string, string>;
}

/** Collects every `lk.transcription` text stream the participant receives. */
function captionsOf(participant: LiveKitParticipant): Caption[] {
  const captions: Caption[] = [];
  participant.room.registerTextStreamHandler(TRANSCRIPTION, (reader, sender) => {
    reader.readAll().then(
      (text) =>
        captions.push({ from: sender.identity, text: text.trim(), attributes: reader.info.attributes ?? {} }),
      () => undefined,
    );
  });
  return captions;
}

/**
 * The agent worker, as a process of its own (`node --import tsx relay-agent.ts dev`): its output,
 * the job processes' included (they inherit its stdio), is kept.
 */
class AgentWorker {
  output = "";

  private constructor(private readonly child: ChildProcessByStdio<null, Readable, Readable>) {
    for (const stream of [child.stdout, child.stderr])
      stream.setEncoding("utf8").on("data", (chunk: string) => (this.output += chunk));
  }

  static start(target: TestLiveKit, relayUrl: string, agentName: string): AgentWorker {
    const child = spawn(process.execPath, ["--import", "tsx", AGENT_FILE, "dev", "--log-level", "info"], {
      cwd: PROJECT_ROOT,
      env: {
        ...process.env,
        LIVEKIT_URL: target.url,
        LIVEKIT_API_KEY: target.apiKey,
        LIVEKIT_API_SECRET: target.apiSecret,
        RELAY_TEST_AGENT_NAME: agentName,
        RELAY_SERVER: relayUrl,
        RELAY_API_KEY: API_KEY,
        // rtc-node's own debug lines are not wanted here.
        NODE_ENV: "production",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    return new AgentWorker(child);
  }

  get exited(): boolean {
    return this.child.exitCode !== null || this.child.signalCode !== null;
  }

  /** The `RELAY-TEST` reports of the job in `room`. */
  reports(room: string): Record<string, unknown>[] {
    return this.output
      .split("\n")
      .filter((line) => line.startsWith("RELAY-TEST "))
      .map((line) => JSON.parse(line.slice("RELAY-TEST ".length)) as Record<string, unknown>)
      .filter((report) => report["room"] === room);
  }

  /** The identity the job in `room` joined with, once it has. */
  agentIn(room: string): string | undefined {
    return this.reports(room).find((report) => report["event"] === "joined")?.["identity"] as string | undefined;
  }

  /** SIGTERM, as `cli.runApp` expects to be stopped; SIGKILL if it has not ended after 30 s. */
  async stop(): Promise<void> {
    if (this.exited) return;
    const exited = new Promise((resolve) => this.child.once("exit", resolve));
    this.child.kill("SIGTERM");
    const timer = setTimeout(() => this.child.kill("SIGKILL"), 30_000);
    await exited;
    clearTimeout(timer);
  }
}

describe.skipIf(problem)("the plugin in real agents jobs on a real LiveKit server", () => {
  const target = livekit as TestLiveKit;
  const httpUrl = target.url.replace(/^ws/u, "http");
  const rooms = new RoomServiceClient(httpUrl, target.apiKey, target.apiSecret);
  const agentName = `relay-test-${randomUUID().slice(0, 8)}`;
  let server: TestServer;
  let worker: AgentWorker;
  let rtc: typeof Rtc;
  let goForward: Int16Array;
  const participants: LiveKitParticipant[] = [];
  const roomNames: string[] = [];

  beforeAll(async () => {
    server = await startServer({ MAX_SESSIONS: "16", PUBLIC_BASE_URL: "" });
    goForward = await readWavAsPcm16(sharedPath("data/speech/librivox-pocketsphinx/goforward.wav"));
    // The same module test/support/livekit-participant.ts loads: the workspace root's rtc-node 1.x
    // (a bare import here would resolve this package's 0.13).
    rtc = (await import(
      pathToFileURL(path.join(PROJECT_ROOT, "node_modules/@livekit/rtc-node/dist/index.js")).href
    )) as typeof Rtc;
    worker = AgentWorker.start(target, server.baseUrl, agentName);
    await expect
      .poll(() => worker.exited || worker.output.includes("registered worker"), { timeout: 120_000 })
      .toBe(true);
    expect(worker.exited, worker.output).toBe(false);
  });
  afterEach(async (context) => {
    if (context.task.result?.state === "fail") console.log(`agent worker output:\n${worker.output.slice(-20_000)}`);
    await Promise.all(participants.splice(0).map((participant) => participant.leave()));
    // The job's room goes, so the job ends (its room disconnected).
    await Promise.all(roomNames.splice(0).map((name) => rooms.deleteRoom(name).catch(() => undefined)));
  });
  afterAll(async () => {
    await worker?.stop();
    await server?.close();
  });

  async function newRoom(): Promise<string> {
    const name = `agents-real-${randomUUID().slice(0, 8)}`;
    await rooms.createRoom({ name, emptyTimeout: 120 });
    roomNames.push(name);
    return name;
  }

  async function join(
    room: string,
    identity: string,
    grants: { kind?: "agent"; canPublishData?: boolean; canUpdateOwnMetadata?: boolean } = {},
  ): Promise<LiveKitParticipant> {
    const token = new AccessToken(target.apiKey, target.apiSecret, { identity });
    if (grants.kind) token.kind = grants.kind;
    token.addGrant({
      roomJoin: true,
      room,
      canPublish: true,
      canSubscribe: true,
      canPublishData: grants.canPublishData ?? false,
      canUpdateOwnMetadata: grants.canUpdateOwnMetadata ?? false,
    });
    const participant = await LiveKitParticipant.join(target.url, await token.toJwt());
    participants.push(participant);
    return participant;
  }

  /** Dispatches the worker's agent to `room` (LiveKit's AgentDispatch) and waits for it there. */
  async function dispatch(room: string, metadata: Record<string, unknown>, seenBy: LiveKitParticipant) {
    await new AgentDispatchClient(httpUrl, target.apiKey, target.apiSecret).createDispatch(room, agentName, {
      metadata: JSON.stringify(metadata),
    });
    await expect.poll(() => worker.agentIn(room), WAIT).toBeDefined();
    const identity = worker.agentIn(room)!;
    await expect.poll(() => seenBy.room.remoteParticipants.has(identity), WAIT).toBe(true);
    // LiveKit says what it is: kind agent, from the token LiveKit minted for the job.
    expect(seenBy.room.remoteParticipants.get(identity)!.kind).toBe(rtc.ParticipantKind.AGENT);
    return identity;
  }

  const finals = (captions: Caption[], from: string, participant: string, kind: "original" | "translation") =>
    captions.filter(
      (caption) =>
        caption.from === from &&
        caption.attributes["relay.participant"] === participant &&
        caption.attributes["relay.kind"] === kind &&
        caption.attributes["lk.transcription_final"] === "true",
    );

  it("relay.Translator in a dispatched job: real speech in over WebRTC, translated speech and transcriptions out", async () => {
    const room = await newRoom();
    const alice = await join(room, "alice");
    const captions = captionsOf(alice);
    const agent = await dispatch(room, { mode: "translate", targetLanguage: "es" }, alice);
    await alice.speak(goForward);

    // Her words, and their translation, on lk.transcription from the agent.
    await expect.poll(() => finals(captions, agent, "alice", "translation").length, WAIT).toBeGreaterThan(0);
    await expect
      .poll(() => finals(captions, agent, "alice", "original").map((caption) => caption.text), WAIT)
      .toContain(GO_FORWARD);
    const micSid = [...alice.room.localParticipant!.trackPublications.values()][0]!.sid;
    const original = finals(captions, agent, "alice", "original").find((caption) => caption.text === GO_FORWARD)!;
    expect(original.attributes).toMatchObject({ language: "en", "lk.transcribed_track_id": micSid });
    const translation = finals(captions, agent, "alice", "translation").at(-1)!;
    expect(translation.attributes["language"]).toBe("es");
    expect(translation.text.length).toBeGreaterThan(0);
    expect(translation.text).not.toBe(GO_FORWARD);

    // Her translated speech, on a track of her own: sound, not silence.
    await expect.poll(() => alice.soundSeconds(`${agent}/translated-audio-alice`), WAIT).toBeGreaterThan(0.5);
    expect([...alice.published].filter((key) => key.startsWith(`${agent}/`))).toEqual([
      `${agent}/translated-audio-alice`,
    ]);
    expect(worker.reports(room).filter((report) => report["event"] === "error")).toEqual([]);

    // She leaves: the translator closes her relay session.
    await alice.leave();
    await expect
      .poll(async () => {
        const health = (await (await fetch(`${server.baseUrl}/healthz`)).json()) as { sessions: { live: number } };
        return health.sessions.live;
      }, WAIT)
      .toBe(0);
  }, 300_000);

  it("relay.STT and relay.TTS in the agents' AgentSession: say() is spoken, her speech is transcribed and said back", async () => {
    const room = await newRoom();
    const alice = await join(room, "alice");
    const captions = captionsOf(alice);
    const agent = await dispatch(room, { mode: "voice" }, alice);
    const spoken = (text: string) => captions.some((c) => c.from === agent && c.text.replace(/\s+/gu, " ") === text);

    // session.say(): relay's speech on the agent's track, its text on lk.transcription.
    await expect.poll(() => spoken(GREETING), WAIT).toBe(true);
    const agentTrack = [...alice.published].find((key) => key.startsWith(`${agent}/`))!;
    expect(agentTrack).toBeDefined();
    await expect.poll(() => alice.soundSeconds(agentTrack), WAIT).toBeGreaterThan(0.5);
    const greetingSound = alice.soundSeconds(agentTrack);

    // Her speech: relay.STT's transcript, which the session publishes for her track...
    await alice.speak(goForward);
    const micSid = [...alice.room.localParticipant!.trackPublications.values()][0]!.sid;
    await expect
      .poll(
        () =>
          captions
            .filter((c) => c.from === alice.identity && c.attributes["lk.transcription_final"] === "true")
            .map((c) => c.text),
        WAIT,
      )
      .toContain(GO_FORWARD);
    expect(
      captions.find((c) => c.from === alice.identity && c.text === GO_FORWARD)!.attributes["lk.transcribed_track_id"],
    ).toBe(micSid);
    expect(worker.reports(room).filter((r) => r["event"] === "user_transcript").map((r) => r["text"])).toContain(
      GO_FORWARD,
    );
    // ...and the turn it ended, said back by relay.TTS (no LLM).
    await expect.poll(() => spoken(`You said: ${GO_FORWARD}`), WAIT).toBe(true);
    await expect.poll(() => alice.soundSeconds(agentTrack), WAIT).toBeGreaterThan(greetingSound + 0.5);
    expect(worker.reports(room).filter((report) => report["event"] === "error")).toEqual([]);
  }, 300_000);
});
