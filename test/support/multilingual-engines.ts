import { writeFile } from "node:fs/promises";
import path from "node:path";
import { standInEntry, startOpenAiServer, type OpenAiTestServer } from "./openai-server.js";
import { replyTaggedWithLanguage } from "./stand-in-engines.js";

/**
 * The engines of the tests of rooms in several languages: English heard by the embedded PocketSphinx,
 * Spanish and German by the protocol-faithful OpenAI-compatible stand-in (no Spanish or German
 * recognizer runs offline here), which also identifies languages and translates what Apertium does
 * not (into and out of German); eSpeak NG speaks every language. The stand-in's translations are
 * tagged with the language asked for ("[German] …"), so a test sees which it was.
 */
export async function multilingualEngines(
  dir: string,
): Promise<{ remote: OpenAiTestServer; enginesFile: string }> {
  const remote = await startOpenAiServer();
  remote.reply = replyTaggedWithLanguage;
  const enginesFile = path.join(dir, "engines.json");
  await writeFile(
    enginesFile,
    JSON.stringify({
      asr: [{ engine: "pocketsphinx" }, standInEntry(remote, "whisper-large", ["en", "es", "de"])],
      mt: [{ engine: "apertium" }, standInEntry(remote, "llm", ["en", "es", "de"])],
      tts: [{ engine: "espeak-ng" }],
    }),
  );
  return { remote, enginesFile };
}
