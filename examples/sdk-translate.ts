// Real-time speech translation with the SDK (@relay-translate/client; not on the npm registry yet:
// install its packed tarball, see docs/clients.md#sdk).
// Usage: RELAY_SERVER=http://localhost:8080 RELAY_API_KEY=... npx tsx examples/sdk-translate.ts speech.wav [es]
import { RealtimeSession } from "@relay-translate/client";
// Only used to read the WAV file as PCM16 mono 16 kHz, the format the service takes in.
import { readWavAsPcm16 } from "../src/audio/wav.js";

const [wavPath, targetLanguage = "es"] = process.argv.slice(2);
if (!wavPath) throw new Error("usage: sdk-translate.ts <speech.wav> [target language]");

// Creates the session (the API key is used here only) and resolves once the server is ready.
const session = await RealtimeSession.open(
  { baseUrl: process.env.RELAY_SERVER ?? "http://localhost:8080", apiKey: process.env.RELAY_API_KEY },
  { sourceLanguage: "en", targetLanguage },
);
let speechSamples = 0;
session.onAudio = (samples) => (speechSamples += samples.length); // float32 mono 24 kHz: play or save it

// Stream PCM16 in 20 ms frames at real time, as a microphone would, then commit the segment.
const pcm = await readWavAsPcm16(wavPath, 16_000);
void (async () => {
  for (let offset = 0; offset < pcm.length && session.isOpen; offset += 320) {
    session.sendAudio(pcm.subarray(offset, offset + 320));
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  // Commits the last segment; the server answers `finalized` once everything before it is out.
  session.finalize();
})();

// An utterance's finals grow (finalizeMode "stable", the default): each repeats the one before,
// under the same correlation_id, plus the words just settled. So each utterance is printed once, as
// its last finals, when the next one starts or the recording ends.
let utterance = "";
const lines = new Map<string, string>(); // the utterance's last final of each kind
const printUtterance = () => {
  for (const line of lines.values()) console.log(line);
  lines.clear();
};

// Messages are a discriminated union on `type`; interims (is_final: false) may still change.
for await (const message of session) {
  if (
    (message.type === "original_transcript" || message.type === "translated_transcript") &&
    message.is_final
  ) {
    if (message.correlation_id !== utterance) printUtterance();
    utterance = message.correlation_id;
    const language =
      message.type === "original_transcript" ? message.source_language : message.target_language;
    lines.set(message.type, `[${language}] ${message.text}`);
  }
  if (message.type === "error") console.error(`server error: ${message.error}`);
  // Every final, translation and speech of the recording has come: closing now loses nothing,
  // however long a loaded server took (a fixed wait would cut the tail off).
  if (message.type === "finalized") {
    printUtterance();
    session.close();
  }
}
console.log(`received ${(speechSamples / 24_000).toFixed(2)} s of translated speech`);
