/**
 * A LiveKit agent on relay. `translate` (the default) translates everyone in the room into
 * RELAY_TARGET (Spanish unless set): each participant's translated speech on a track of its own,
 * transcripts on `lk.transcription`. `echo` is a voice agent with relay's recognition and speech
 * and no LLM: it says back what it heard.
 *
 *   RELAY_API_KEY=… LIVEKIT_URL=wss://… LIVEKIT_API_KEY=… LIVEKIT_API_SECRET=… npx tsx agent.ts dev
 */
import { fileURLToPath } from "node:url";
import { type JobContext, type llm, ServerOptions, cli, defineAgent, voice } from "@livekit/agents";
import * as relay from "@relay-translate/livekit-agents";

/** Says back each turn of the user's, in relay's voice. */
class EchoAgent extends voice.Agent {
  constructor() {
    super({ instructions: "Repeat what the user says." });
  }

  override async onUserTurnCompleted(_chatCtx: llm.ChatContext, message: llm.ChatMessage): Promise<void> {
    const heard = message.textContent;
    if (heard) this.session.say(`You said: ${heard}`);
  }
}

export default defineAgent({
  entry: async (ctx: JobContext) => {
    await ctx.connect();
    if (process.env["RELAY_AGENT_MODE"] === "echo") {
      const session = new voice.AgentSession({
        stt: new relay.STT({ language: "en" }),
        tts: new relay.TTS({ language: "en", voiceType: "female" }),
        // No VAD: the turn ends when relay's transcripts say the speech has.
        turnHandling: { turnDetection: "stt" },
      });
      await session.start({ agent: new EchoAgent(), room: ctx.room });
      return;
    }
    const translator = new relay.Translator({
      targetLanguage: process.env["RELAY_TARGET"] ?? "es",
      voiceType: "female",
    });
    translator.on("transcript", (transcript) => {
      if (transcript.is_final)
        console.log(`${transcript.participant} (${transcript.type}): ${transcript.text}`);
    });
    translator.on("error", (error) => console.error(`${error.participant}: ${error.message}`));
    translator.start(ctx.room);
    ctx.addShutdownCallback(() => translator.close());
  },
});

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  cli.runApp(new ServerOptions({ agent: fileURLToPath(import.meta.url) }));
}
