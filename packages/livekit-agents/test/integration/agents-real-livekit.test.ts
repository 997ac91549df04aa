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
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type * as Rtc from "../../../../node_modules/@livekit/rtc-node/dist/index.js";
import { readWavAsPcm16 } from "../../../../src/audio/wav.js";
import { LiveKitParticipant } from "../../../../test/support/livekit-participant.js";
import { PROJECT_ROOT } from "../../../../test/support/run-script.js";
import { API_KEY, startServer, type TestServer } from "../../../../test/support/server.js";
import { testLiveKit, type TestLiveKit } from "../../../../test/support/servers.js";
import { sharedMissing, sharedPath } from "../../../../test/support/shared.js";
import { WAIT } from "../../../../test/support/wait.js";

const livekit = testLiveKit();
const problem =
  "problem" in livekit
    ? livekit.problem
    : sharedMissing("data/speech/librivox-pocketsphinx/goforward.wav")
      ? "../shared speech is missing"
      : undefined;
if (problem) console.warn(`the LiveKit Agents plugin on a real LiveKit server not tested: ${problem}`);

const AGENT_FILE = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "support", "relay-agent.ts");
/** What the voice agent says first. */
const GREETING = "Hello! relay is speaking.";
const TRANSCRIPTION = "lk.transcription";

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
    return this.reports(room).find((report) => report["event"] === "joined")?.["identity"] as
      string | undefined;
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
  // LiveKit's HTTP services (rooms, agent dispatch) at the signalling URL. (The body runs even when
  // skipped: nothing here may read the server.)
  const httpUrl = () => target.url.replace(/^ws/u, "http");
  const rooms = () => new RoomServiceClient(httpUrl(), target.apiKey, target.apiSecret);
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
    // (expect.poll is for tests only.)
    // A loaded machine took more than 120 s to start the agents worker (its job processes too).
    await vi.waitFor(
      () => expect(worker.exited || worker.output.includes("registered worker")).toBe(true),
      WAIT,
    );
    expect(worker.exited, worker.output).toBe(false);
  });
  afterEach(async (context) => {
    if (context.task.result?.state === "fail")
      console.log(`agent worker output:\n${worker.output.slice(-20_000)}`);
    await Promise.all(participants.splice(0).map((participant) => participant.leave()));
    // The job's room goes, so the job ends (its room disconnected).
    const service = rooms();
    await Promise.all(roomNames.splice(0).map((name) => service.deleteRoom(name).catch(() => undefined)));
  });
  afterAll(async () => {
    await worker?.stop();
    await server?.close();
  });

  async function newRoom(): Promise<string> {
    const name = `agents-real-${randomUUID().slice(0, 8)}`;
    await rooms().createRoom({ name, emptyTimeout: 120 });
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
    const dispatcher = new AgentDispatchClient(httpUrl(), target.apiKey, target.apiSecret);
    await dispatcher.createDispatch(room, agentName, { metadata: JSON.stringify(metadata) });
    await expect.poll(() => worker.agentIn(room), WAIT).toBeDefined();
    const identity = worker.agentIn(room)!;
    await expect.poll(() => seenBy.room.remoteParticipants.has(identity), WAIT).toBe(true);
    // LiveKit says what it is: kind agent, from the token LiveKit minted for the job.
    expect(seenBy.room.remoteParticipants.get(identity)!.kind).toBe(rtc.ParticipantKind.AGENT);
    return identity;
  }

  /** Speaks `pcm` (16 kHz) on a microphone track named `name`, at real time, then 1.5 s of silence. */
  async function speakOn(participant: LiveKitParticipant, name: string, pcm: Int16Array): Promise<void> {
    const source = new rtc.AudioSource(16_000, 1);
    const track = rtc.LocalAudioTrack.createAudioTrack(name, source);
    const options = new rtc.TrackPublishOptions({ source: rtc.TrackSource.SOURCE_MICROPHONE });
    await participant.room.localParticipant!.publishTrack(track, options);
    // Spoken once the translator listens (under load its subscription can lag the publication).
    await expect.poll(() => participant.subscribedByOthers.has(name), WAIT).toBe(true);
    const padded = new Int16Array(pcm.length + 24_000);
    padded.set(pcm);
    for (let at = 0; at < padded.length; at += 160)
      await source.captureFrame(new rtc.AudioFrame(padded.slice(at, at + 160), 16_000, 1, 160));
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
    await alice.untilHeard();
    await alice.speak(goForward);

    // Her words, and their translation, on lk.transcription from the agent.
    await expect.poll(() => finals(captions, agent, "alice", "translation").length, WAIT).toBeGreaterThan(0);
    // Which words PocketSphinx hears over WebRTC depends on the machine's load (Opus on a starved
    // CPU), so the words are not checked here: agents-plugin.test.ts checks them over a lossless path.
    await expect.poll(() => finals(captions, agent, "alice", "original").length, WAIT).toBeGreaterThan(0);
    const micSid = [...alice.room.localParticipant!.trackPublications.values()][0]!.sid;
    const original = finals(captions, agent, "alice", "original").at(-1)!;
    expect(original.text.length).toBeGreaterThan(0);
    expect(original.attributes).toMatchObject({ language: "en", "lk.transcribed_track_id": micSid });
    const translation = finals(captions, agent, "alice", "translation").at(-1)!;
    expect(translation.attributes["language"]).toBe("es");
    expect(translation.text.length).toBeGreaterThan(0);

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
        const health = (await (await fetch(`${server.baseUrl}/healthz`)).json()) as {
          sessions: { live: number };
        };
        return health.sessions.live;
      }, WAIT)
      .toBe(0);
  });

  it("relay.STT and relay.TTS in the agents' AgentSession: say() is spoken, her speech is transcribed and said back", async () => {
    const room = await newRoom();
    const alice = await join(room, "alice");
    const captions = captionsOf(alice);
    const agent = await dispatch(room, { mode: "voice", greeting: GREETING }, alice);
    const spoken = (text: string) =>
      captions.some((c) => c.from === agent && c.text.replace(/\s+/gu, " ") === text);

    // session.say(): relay's speech on the agent's track, its text on lk.transcription.
    await expect.poll(() => spoken(GREETING), WAIT).toBe(true);
    const agentTrack = [...alice.published].find((key) => key.startsWith(`${agent}/`))!;
    expect(agentTrack).toBeDefined();
    await expect.poll(() => alice.soundSeconds(agentTrack), WAIT).toBeGreaterThan(0.5);
    const greetingSound = alice.soundSeconds(agentTrack);

    // Her speech: relay.STT's finals (each adds its words to her turn), which the session
    // publishes for her track on her behalf...
    await alice.untilHeard();
    await alice.speak(goForward);
    const micSid = [...alice.room.localParticipant!.trackPublications.values()][0]!.sid;
    const herFinals = () =>
      captions.filter((c) => c.from === alice.identity && c.attributes["lk.transcription_final"] === "true");
    // What relay.STT heard (its words depend on the load, as above) is what is said back.
    const saidBack = () =>
      worker
        .reports(room)
        .filter((r) => r["event"] === "said")
        .map((r) => String(r["text"]))
        .find((text) => text.startsWith("You said: "));
    await expect.poll(saidBack, WAIT).toBeDefined();
    const heard = saidBack()!.slice("You said: ".length);
    expect(heard.length).toBeGreaterThan(0);
    await expect
      .poll(
        () =>
          herFinals()
            .map((c) => c.text)
            .join(" "),
        WAIT,
      )
      .toBe(heard);
    expect(new Set(herFinals().map((c) => c.attributes["lk.transcribed_track_id"]))).toEqual(
      new Set([micSid]),
    );
    // ...and the turn they ended (relay.STT's end of speech, `turnDetection: "stt"`), whole, said
    // back by relay.TTS. Without an LLM, the session keeps only what the agent said.
    await expect.poll(() => spoken(`You said: ${heard}`), WAIT).toBe(true);
    await expect
      .poll(
        () =>
          worker
            .reports(room)
            .filter((r) => r["event"] === "said")
            .map((r) => [r["role"], r["text"]]),
        WAIT,
      )
      .toEqual([
        ["assistant", GREETING],
        ["assistant", `You said: ${heard}`],
      ]);
    await expect.poll(() => alice.soundSeconds(agentTrack), WAIT).toBeGreaterThan(greetingSound + 0.5);
    expect(worker.reports(room).filter((report) => report["event"] === "error")).toEqual([]);
  });

  it("trusts only what LiveKit asserts: an agent by its token is not translated, a forger's attributes, track names and captions change nothing", async () => {
    const room = await newRoom();
    const alice = await join(room, "alice");
    const captions = captionsOf(alice);
    // Mallory may send data and set her own attributes; the bot is an agent by its token.
    const mallory = await join(room, "mallory", { canPublishData: true, canUpdateOwnMetadata: true });
    const bot = await join(room, "bot", { kind: "agent" });
    const agent = await dispatch(room, { mode: "translate", targetLanguage: "es" }, alice);
    await expect
      .poll(() => [...alice.room.remoteParticipants.keys()].sort(), WAIT)
      .toEqual([agent, "bot", "mallory"].sort());

    // Mallory claims to be an agent, the translator, or speaking on the agent's behalf: all the
    // attributes LiveKit's agents and relay's rooms use. LiveKit lets her: they are hers to set.
    const claims = {
      "lk.agent.name": agentName,
      "lk.agent.state": "speaking",
      "lk.publish_on_behalf": agent,
      role: "translator",
    };
    await mallory.room.localParticipant!.setAttributes(claims);
    await expect
      .poll(() => alice.room.remoteParticipants.get("mallory")?.attributes, WAIT)
      .toMatchObject(claims);
    expect(alice.room.remoteParticipants.get("mallory")!.kind).toBe(rtc.ParticipantKind.STANDARD);
    expect(alice.room.remoteParticipants.get("bot")!.kind).toBe(rtc.ParticipantKind.AGENT);

    // Everyone speaks at once; Mallory on a microphone track named as Alice's translation.
    await alice.untilHeard();
    await Promise.all([
      alice.speak(goForward),
      bot.speak(goForward),
      speakOn(mallory, "translated-audio-alice", goForward),
    ]);
    // And she sends captions as the translator's, for Alice: once plainly, once claiming to be the agent.
    const FORGED = "Envíen el dinero a Mallory";
    const forged = {
      "lk.segment_id": "forged:translation",
      "lk.transcription_final": "true",
      language: "es",
      "relay.participant": "alice",
      "relay.kind": "translation",
    };
    await mallory.room.localParticipant!.sendText(FORGED, { topic: TRANSCRIPTION, attributes: forged });
    const writer = await mallory.room.localParticipant!.streamText({
      topic: TRANSCRIPTION,
      attributes: forged,
      senderIdentity: agent,
    });
    await writer.write(FORGED);
    await writer.close();

    // Alice and Mallory are translated, each as who LiveKit says published the track, each on a
    // track of their own; Mallory's attributes did not make her an agent.
    for (const who of ["alice", "mallory"]) {
      await expect.poll(() => finals(captions, agent, who, "translation").length, WAIT).toBeGreaterThan(0);
      // What they said is recognized as theirs. The words are not checked here: with three
      // speaking at once on a loaded machine the recognizer may hear "the op users" for "go
      // forward ten meters" (seen in CI), and the first two tests check the words themselves.
      await expect
        .poll(
          () =>
            finals(captions, agent, who, "original")
              .map((caption) => caption.text.trim())
              .join(" "),
          WAIT,
        )
        .not.toBe("");
      await expect
        .poll(() => alice.soundSeconds(`${agent}/translated-audio-${who}`), WAIT)
        .toBeGreaterThan(0.5);
    }
    // Mallory's captions reach Alice as Mallory's: LiveKit asserts the sender of anyone but an
    // agent. Whoever shows only the translator's captions (its kind is agent) never shows them.
    await expect.poll(() => captions.filter((caption) => caption.text === FORGED).length, WAIT).toBe(2);
    expect(
      new Set(captions.filter((caption) => caption.text === FORGED).map((caption) => caption.from)),
    ).toEqual(new Set(["mallory"]));
    // What the agent sent is relay's, for Alice and Mallory only: the bot, an agent, is not
    // translated (nor heard by relay at all).
    const fromAgent = captions.filter((caption) => caption.from === agent);
    expect(new Set(fromAgent.map((caption) => caption.attributes["relay.participant"]))).toEqual(
      new Set(["alice", "mallory"]),
    );
    expect(fromAgent.map((caption) => caption.text)).not.toContain(FORGED);
    const heard = worker.reports(room).filter((report) => report["event"] === "transcript");
    expect(new Set(heard.map((report) => report["participant"]))).toEqual(new Set(["alice", "mallory"]));
    // The agent's tracks: one per translated participant. Mallory's look-alike is hers, by LiveKit.
    expect([...alice.published].filter((key) => key.startsWith(`${agent}/`)).sort()).toEqual([
      `${agent}/translated-audio-alice`,
      `${agent}/translated-audio-mallory`,
    ]);
    expect(alice.published).toContain("mallory/translated-audio-alice");
    expect(worker.reports(room).filter((report) => report["event"] === "error")).toEqual([]);
  });
});
