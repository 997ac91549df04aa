/**
 * An agent worker as LiveKit Agents users run one (`tsx relay-agent.ts dev`, as
 * examples/livekit-agent/agent.ts): `cli.runApp` registers it with the LiveKit server (explicit
 * dispatch only, as `RELAY_TEST_AGENT_NAME`), and every job dispatched to it runs in a job process of
 * the framework's own (its process pool forks one per job, which imports this file for the agent).
 * The job's dispatch metadata says what it runs, with the plugin from this checkout's sources:
 *
 * - `{"mode":"translate","targetLanguage":"es"}`: `relay.Translator` on `ctx.room`;
 * - `{"mode":"voice","greeting":"…"}`: an AgentSession with `relay.STT` and `relay.TTS` and no LLM,
 *   as the README shows it: it says the greeting, then says back each turn it heard.
 *
 * What the test cannot see in the room is printed on stdout as `RELAY-TEST {json}` lines: where the
 * job joined and as whom, the translator's finals and errors, the session's final transcripts, what
 * the agent said and the session's errors.
 */
import { fileURLToPath } from "node:url";
import { type JobContext, type llm, ServerOptions, cli, defineAgent, voice } from "@livekit/agents";
import * as relay from "../../src/index.js";

function report(event: Record<string, unknown>): void {
  console.log(`RELAY-TEST ${JSON.stringify(event)}`);
}

/** Says back each turn of the user's, in relay's voice. */
class EchoAgent extends voice.Agent {
  constructor() {
    super({ instructions: "Say back what the user says." });
  }

  override async onUserTurnCompleted(_chatCtx: llm.ChatContext, message: llm.ChatMessage): Promise<void> {
    const heard = message.textContent;
    if (heard) this.session.say(`You said: ${heard}`);
  }
}

export default defineAgent({
  entry: async (ctx: JobContext) => {
    const metadata = JSON.parse(ctx.job.metadata || "{}") as {
      mode?: string;
      targetLanguage?: string;
      greeting?: string;
    };
    await ctx.connect();
    const room = ctx.room.name;
    report({ room, event: "joined", identity: ctx.room.localParticipant?.identity, mode: metadata.mode });
    if (metadata.mode === "voice") {
      const session = new voice.AgentSession({
        stt: new relay.STT({ language: "en" }),
        tts: new relay.TTS({ language: "en", voiceType: "female" }),
        // No VAD given: the framework's default (its bundled silero). No LLM: the agent says back.
        turnHandling: { turnDetection: "stt" },
      });
      session.on(voice.AgentSessionEventTypes.UserInputTranscribed, (event) => {
        if (event.isFinal) report({ room, event: "user_transcript", text: event.transcript });
      });
      session.on(voice.AgentSessionEventTypes.ConversationItemAdded, ({ item }) => {
        if (item.type === "message") report({ room, event: "said", role: item.role, text: item.textContent });
      });
      session.on(voice.AgentSessionEventTypes.Error, (event) => {
        const { error } = event.error as { error?: unknown };
        report({ room, event: "error", error: error instanceof Error ? error.message : String(error) });
      });
      await session.start({ agent: new EchoAgent(), room: ctx.room });
      if (metadata.greeting) session.say(metadata.greeting);
      return;
    }
    const translator = new relay.Translator({
      targetLanguage: metadata.targetLanguage ?? "es",
      voiceType: "female",
    });
    translator.on("transcript", (transcript) => {
      if (transcript.is_final)
        report({ room, event: "transcript", participant: transcript.participant, type: transcript.type });
    });
    translator.on("error", (error) =>
      report({ room, event: "error", participant: error.participant, error: error.message }),
    );
    translator.start(ctx.room);
    ctx.addShutdownCallback(() => translator.close());
  },
});

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  cli.runApp(
    new ServerOptions({
      agent: fileURLToPath(import.meta.url),
      agentName: process.env["RELAY_TEST_AGENT_NAME"] ?? "relay-test-agent",
      // The worker's health server on loopback only (a free port in dev mode).
      host: "127.0.0.1",
      // A job process imports this file through tsx: seconds on a busy machine, not the default 10.
      initializeProcessTimeout: 120_000,
      // The worker tells LiveKit its load, by default the machine's CPU use, and LiveKit offers a
      // job only to a worker under 1 ("no workers with sufficient capacity"): on a machine whose
      // cores other tests keep busy, no job would come. This worker takes every job it is offered.
      loadFunc: async () => 0,
    }),
  );
}
