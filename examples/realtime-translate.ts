// Real-time speech translation over the raw protocol, with only `fetch` and the `ws` package.
// Usage: RELAY_SERVER=http://localhost:8080 RELAY_API_KEY=... npx tsx examples/realtime-translate.ts speech.wav [es]
import WebSocket from "ws";
// Only used to read the WAV file as PCM16 mono 16 kHz, the format the service takes in.
import { readWavAsPcm16 } from "../src/audio/wav.js";

const server = process.env.RELAY_SERVER ?? "http://localhost:8080";
const [wavPath, targetLanguage = "es"] = process.argv.slice(2);
if (!wavPath) throw new Error("usage: realtime-translate.ts <speech.wav> [target language]");

// 1. Create a session: every query parameter becomes session metadata. The API key goes here only.
const url = new URL("/v1/session", server);
url.search = new URLSearchParams({ sourceLanguage: "en", targetLanguage }).toString();
const response = await fetch(url, { headers: { authorization: `Bearer ${process.env.RELAY_API_KEY}` } });
if (!response.ok) throw new Error(`GET /v1/session: HTTP ${response.status} ${await response.text()}`);
const { ws_url } = (await response.json()) as { ws_url: string }; // pre-signed, valid for 60 s

// 2. Open the WebSocket. JSON arrives in text frames, translated speech in binary frames.
const ws = new WebSocket(ws_url);
const speech: Float32Array[] = [];
let finalized: () => void = () => {};
const allResults = new Promise<void>((resolve) => (finalized = resolve));
const ready = new Promise<void>((resolve, reject) => {
  ws.on("message", (data: Buffer, isBinary) => {
    if (isBinary) {
      // float32 little-endian mono 24 kHz, ~80 ms per frame. Copied: the Buffer may not be 4-byte aligned.
      speech.push(new Float32Array(new Uint8Array(data).buffer));
      return;
    }
    const message = JSON.parse(data.toString()) as { type: string; [key: string]: unknown };
    if (message.type === "ready") resolve();
    // The answer to `finalize`: every result of the audio sent before it has come.
    else if (message.type === "finalized") finalized();
    // An error right after `ready` means the session parameters were rejected; the server then closes.
    else if (message.type === "error") {
      console.error(`server error: ${message.error}`);
      process.exitCode = 1;
    }
    // Interim transcripts (is_final: false) may still change; this example prints only finals.
    else if (message.is_final === true && message.type === "original_transcript")
      console.log(`[${message.source_language}] ${message.text}`);
    else if (message.is_final === true && message.type === "translated_transcript")
      console.log(`[${message.target_language}] ${message.text}`);
  });
  ws.on("close", (code) => {
    reject(new Error(`socket closed (${code}) before ready`));
    finalized(); // a session the server ended has no more results to wait for
  });
  ws.on("error", reject);
});

// 3. Audio must not be sent before `ready`.
await ready;

// 4. Stream PCM16 LE in 20 ms frames (320 samples), paced at real time as a microphone would be.
const pcm = await readWavAsPcm16(wavPath, 16_000);
const started = Date.now();
for (let offset = 0; offset < pcm.length && ws.readyState === WebSocket.OPEN; offset += 320) {
  const frame = pcm.subarray(offset, offset + 320);
  ws.send(Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength));
  const due = started + (offset + 320) / 16; // 16 samples per ms
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, due - Date.now())));
}

// 5. `finalize` commits the current segment now instead of waiting for the speaker to pause.
ws.send(JSON.stringify({ type: "finalize" }));

// 6. Wait for `finalized` (beyond the spec): the finals, translations and speech of everything sent
//    before the `finalize` are out, however long a loaded server takes. A fixed wait loses the tail.
await allResults;

// 7. Close normally (1000). The collected speech could now be played or written to a WAV file.
const samples = speech.reduce((n, frame) => n + frame.length, 0);
console.log(`received ${(samples / 24_000).toFixed(2)} s of translated speech in ${speech.length} frames`);
ws.close(1000);
