// A translation room from TypeScript, browser-free, with only `fetch` and the `ws` package.
// Usage: RELAY_SERVER=http://localhost:8080 RELAY_API_KEY=... npx tsx examples/room-translate.ts speech.wav [es-ES]
// Works with the embedded room server (the default). With LiveKit configured, join with a LiveKit SDK instead.
import WebSocket from "ws";
// Only used to read/write WAV files: PCM16 mono 16 kHz in, float32 mono 24 kHz out.
import { readWavAsPcm16, writeWavFloat32 } from "../src/audio/wav.js";

const server = process.env.RELAY_SERVER ?? "http://localhost:8080";
const [wavPath, targetLanguage = "es-ES"] = process.argv.slice(2);
if (!wavPath) throw new Error("usage: room-translate.ts <speech.wav> [target language, e.g. es-ES]");

// 1. Create the room. The translator is in it before this returns; the API key is used only here.
const response = await fetch(new URL("/api/beta1/session", server), {
  method: "POST",
  headers: { authorization: `Bearer ${process.env.RELAY_API_KEY}`, "content-type": "application/json" },
  body: JSON.stringify({ source_language: "en-US", target_language: targetLanguage, voice_type: "clone" }),
});
if (!response.ok)
  throw new Error(`POST /api/beta1/session: HTTP ${response.status} ${await response.text()}`);
const { url, token, room_name } = (await response.json()) as {
  url: string;
  token: string;
  room_name: string;
};
console.log(`room ${room_name}`);

// 2. Join: the token goes in `access_token`, as LiveKit clients pass it. A bad token fails the handshake (401).
const ws = new WebSocket(`${url}?access_token=${encodeURIComponent(token)}`);
const speech: Float32Array[] = [];
let lastArrival = Date.now();
let translatedFinals = 0;
const joined = new Promise<void>((resolve, reject) => {
  ws.on("message", (data: Buffer, isBinary) => {
    lastArrival = Date.now();
    if (isBinary) {
      // The translator's speech: float32 little-endian mono 24 kHz. Copied: the Buffer may be unaligned.
      speech.push(new Float32Array(new Uint8Array(data).buffer));
      return;
    }
    const message = JSON.parse(data.toString()) as { type: string; [key: string]: unknown };
    if (message.type === "joined") resolve();
    else if (message.type === "participant_joined" || message.type === "participant_left")
      console.log(`${message.type}: ${message.identity}`);
    else if (message.type === "error") console.error(`server error: ${message.error}`);
    // Transcripts carry `participant`: whose speech it is. Only finals are printed here.
    else if (message.is_final === true && message.type === "original_transcript")
      console.log(`[${message.participant} ${message.source_language}] ${message.text}`);
    else if (message.is_final === true && message.type === "translated_transcript") {
      translatedFinals += 1;
      console.log(`[${message.participant} ${message.target_language}] ${message.text}`);
    }
  });
  ws.on("unexpected-response", (_request, res) => reject(new Error(`join refused: HTTP ${res.statusCode}`)));
  ws.on("error", reject);
});
await joined;

// 3. Publish the "microphone": PCM16 LE 16 kHz mono in 20 ms frames at real-time pace. Rooms have no
//    `finalize`: a pause ends an utterance, so a second of silence follows the speech.
const pcm = await readWavAsPcm16(wavPath, 16_000);
const audio = new Int16Array(pcm.length + 16_000);
audio.set(pcm);
const started = Date.now();
for (let offset = 0; offset < audio.length && ws.readyState === WebSocket.OPEN; offset += 320) {
  const frame = audio.subarray(offset, offset + 320);
  ws.send(Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength));
  await new Promise((resolve) =>
    setTimeout(resolve, Math.max(0, started + (offset + 320) / 16 - Date.now())),
  );
}

// 4. Rooms have no end-of-results message (a session's `finalized`): wait for a translated final,
//    then until the speech after it has stopped for 2 s (at most a minute, for speech nobody heard),
//    save the translated speech, and leave.
const giveUpAt = Date.now() + 60_000;
while ((translatedFinals === 0 || Date.now() - lastArrival < 2000) && Date.now() < giveUpAt)
  await new Promise((resolve) => setTimeout(resolve, 100));
const samples = new Float32Array(speech.reduce((n, frame) => n + frame.length, 0));
speech.reduce((offset, frame) => (samples.set(frame, offset), offset + frame.length), 0);
await writeWavFloat32("room-translation.wav", { samples, sampleRate: 24_000 });
console.log(`saved ${(samples.length / 24_000).toFixed(2)} s of translated speech to room-translation.wav`);
ws.close(1000);
