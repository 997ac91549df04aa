/**
 * Clone voices in the speaker's own voice, through the real service over HTTP/WebSocket with real
 * speech (PocketSphinx, Apertium, eSpeak NG) and the OpenVoice engine in its host process over the
 * stand-in models (test/support/stand-in-models/tone-color.ts): their extractor measures the
 * spectral centroid of a speaker's speech, and their converter then says a sine at that many kHz.
 * So the translated speech shows whose tone colour converted it: the LibriVox reader's (≈ 0.50 kHz)
 * or the LJSpeech reader's (≈ 0.64 kHz), predicted here from the input by `standInToneColorKhz`.
 * Nothing here measures voice quality: a stand-in has none.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { concatFloat32 } from "../../src/audio/pcm.js";
import { encodeWav } from "../../src/audio/wav.js";
import { createLivePipeline } from "../../src/pipeline/session-pipeline.js";
import { languagePlan } from "../../src/pipeline/language-plan.js";
import type { PipelineEvent } from "../../src/pipeline/translation-pipeline.js";
import { resample } from "../../src/audio/resampler.js";
import type { RealtimeSocket } from "../../src/cli/recording-socket.js";
import { buildConversation, clipsOf, type SpeakerName } from "../support/conversations.js";
import { dubbingClient } from "../support/dubbing-client.js";
import { createRoomSession, joinRoom, playToRoomTranslation } from "../support/room-client.js";
import { openSession, playToLastTranslation } from "../support/session-socket.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";
import { sharedMissing } from "../support/shared.js";
import { installStandInToneColor } from "../support/stand-in-models/install.js";
import { standInToneColorKhz, TONE_COLOR_STAND_IN_AMPLITUDE } from "../support/stand-in-models/tone-color.js";

const run = promisify(execFile);
const OUTPUT_RATE = 24_000;

let server: TestServer;
let modelsDir: string;
let work: string;
/** The speech each test plays, per speaker, and the tone colour (kHz) the stand-in makes of it. */
const speech = new Map<SpeakerName, { pcm: Int16Array; khz: number }>();

async function speakerSpeech(name: SpeakerName, seconds: number): Promise<{ pcm: Int16Array; khz: number }> {
  const clips = await clipsOf(name);
  const parts: Int16Array[] = [];
  let total = 0;
  for (const clip of clips) {
    if (total >= seconds * 16_000) break;
    parts.push(clip, new Int16Array(16_000));
    total += clip.length + 16_000;
  }
  const pcm = new Int16Array(total);
  let at = 0;
  for (const part of parts) {
    pcm.set(part, at);
    at += part.length;
  }
  const floats = Float32Array.from(pcm, (v) => v / 32_768);
  return { pcm, khz: standInToneColorKhz(await resample(floats, 16_000, 22_050)) };
}

/**
 * The frequencies (Hz) of the 50 ms windows of `audio` that are the stand-in converter's sine:
 * nearly all of their energy at one frequency (a voice never is), and at its amplitude unless
 * `anyLevel` (a dub's clips are levelled to the original speech).
 */
function convertedWindows(audio: Float32Array, { anyLevel = false, rate = OUTPUT_RATE } = {}): number[] {
  const size = rate / 20;
  const found: number[] = [];
  for (let start = 0; start + size <= audio.length; start += size) {
    const window = audio.subarray(start, start + size);
    let energy = 0;
    let crossings = 0;
    for (let i = 0; i < size; i++) {
      energy += window[i]! ** 2;
      if (i > 0 && window[i - 1]! < 0 !== window[i]! < 0) crossings++;
    }
    const amplitude = Math.sqrt((2 * energy) / size);
    if (anyLevel ? amplitude < 0.01 : Math.abs(amplitude - TONE_COLOR_STAND_IN_AMPLITUDE) > 0.05) continue;
    const hz = (crossings * rate) / (2 * size);
    // Goertzel: the share of the window's energy at that frequency.
    const w = (2 * Math.PI * hz) / rate;
    let [s1, s2] = [0, 0];
    for (let i = 0; i < size; i++) [s1, s2] = [window[i]! + 2 * Math.cos(w) * s1 - s2, s1];
    const power = (s1 * s1 + s2 * s2 - 2 * Math.cos(w) * s1 * s2) / (size / 2);
    if (power / energy > 0.8) found.push(hz);
  }
  return found;
}

/** The session's or participant's speech, joined. */
const heard = (socket: RealtimeSocket): Float32Array => concatFloat32(socket.audioFrames);

/** Windows converted to a tone colour within 5 % of `khz`. */
const near = (windows: readonly number[], khz: number) =>
  windows.filter((hz) => Math.abs(hz - 1000 * khz) <= 50 * khz).length;

beforeAll(async () => {
  if (sharedMissing("data/speech")) return;
  work = await mkdtemp(path.join(tmpdir(), "relay-voice-clone-"));
  modelsDir = path.join(work, "models");
  await installStandInToneColor(modelsDir);
  server = await startServer({ MODELS_DIR: modelsDir, DUBBING_WORKERS: "1", RATE_LIMIT_PER_MINUTE: "1000" });
  speech.set("librivox", await speakerSpeech("librivox", 12));
  speech.set("lj", await speakerSpeech("lj", 12));
});

afterAll(async () => {
  await server?.close();
  if (work) await rm(work, { recursive: true, force: true });
});

describe.skipIf(sharedMissing("data/speech"))("clone voices in the speaker's own voice", () => {
  it("says which voice clone uses on /healthz and /v1/languages", async () => {
    for (const route of ["/healthz", "/v1/languages"]) {
      const body = (await (await fetch(new URL(route, server.baseUrl))).json()) as Record<string, unknown>;
      expect(body.voice_clone).toEqual({ mode: "tone-color", engine: "openvoice" });
    }
  });

  it("sessions with voiceType=clone: each session's speech in its own speaker's tone colour, never another's", async () => {
    const man = speech.get("librivox")!;
    const woman = speech.get("lj")!;
    // The stand-in's two tone colours must be told apart by the measure below.
    expect(Math.abs(man.khz - woman.khz)).toBeGreaterThan(0.08);
    const params = { sourceLanguage: "en", targetLanguage: "es", voiceType: "clone" };
    const [a, b] = await Promise.all([
      openSession(server.baseUrl, params),
      openSession(server.baseUrl, params),
    ]);
    await Promise.all([playToLastTranslation(a, man.pcm), playToLastTranslation(b, woman.pcm)]);
    const [ofMan, ofWoman] = [convertedWindows(heard(a)), convertedWindows(heard(b))];
    // Converted speech (at least a second of it, after the first 3 s of each speaker's speech)…
    expect(near(ofMan, man.khz)).toBeGreaterThan(20);
    expect(near(ofWoman, woman.khz)).toBeGreaterThan(20);
    // …and none in the other session's speaker's tone colour.
    expect(near(ofMan, woman.khz)).toBe(0);
    expect(near(ofWoman, man.khz)).toBe(0);
    a.close();
    b.close();
  });

  it("relay-2 with a man and a woman: each label's lines in its own speaker's tone colour", async () => {
    // The session's own pipeline (src/pipeline/session-pipeline.ts, as the socket builds it), read
    // event by event: lines are spoken in order, one clip each, so each clip is its line's.
    const conversation = await buildConversation("librivox", "lj", { maxTurns: 4 });
    const pipeline = createLivePipeline(server.registry, {
      plan: languagePlan({
        sourceLanguage: "en",
        targetLanguage: "es",
        twoWay: false,
      }),
      finalizeMode: "sentence",
      voice: "clone",
      labelSpeakers: true,
    });
    const events: PipelineEvent[] = [];
    const reading = (async () => {
      for await (const event of pipeline.events) events.push(event);
    })();
    for (let at = 0; at < conversation.pcm.length; at += 1600) {
      pipeline.pushAudio(conversation.pcm.subarray(at, at + 1600));
      // Twice real time, as long as recognition keeps up: the tone colours are extracted as the
      // speech arrives. A loaded machine recognizes slower than that, and audio beyond the backlog
      // bound would be dropped (with an error, the bound's own test): wait for it to catch up.
      await new Promise((resolve) => setTimeout(resolve, 50));
      while (pipeline.backlogMs > 5000) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    await pipeline.end();
    await reading;
    expect(events.filter((e) => e.type === "error")).toEqual([]);
    const lines = events.filter((e) => e.type === "translated" && e.isFinal && e.text !== "");
    const clips: Float32Array[][] = [[]];
    for (const event of events)
      if (event.type === "audio") {
        clips.at(-1)!.push(event.samples);
        if (event.clipEnd) clips.push([]);
      }
    clips.pop();
    expect(clips).toHaveLength(lines.length);
    const [man, woman] = [speech.get("librivox")!.khz, speech.get("lj")!.khz];
    /** Whose tone colour converted each label's lines (lines still in the library voice left out). */
    const colours = new Map<string, Set<"man" | "woman">>();
    let converted = 0;
    lines.forEach((line, i) => {
      const windows = convertedWindows(concatFloat32(clips[i]!));
      if (windows.length < 5) return;
      const hz = windows.sort((x, y) => x - y)[windows.length >> 1]!;
      const whose = Math.abs(hz - 1000 * man) < Math.abs(hz - 1000 * woman) ? "man" : "woman";
      const label = (line as { speaker?: string }).speaker ?? "";
      converted++;
      colours.set(label, (colours.get(label) ?? new Set()).add(whose));
    });
    // Most lines converted (each speaker's first 3 s is not), two labels, each in one speaker's
    // tone colour, and not the same one.
    expect(converted).toBeGreaterThanOrEqual(lines.length - 2);
    const byLabel = [...colours.values()];
    expect(byLabel).toHaveLength(2);
    for (const whose of byLabel) expect(whose.size).toBe(1);
    expect(new Set(byLabel.map((whose) => [...whose][0]))).toEqual(new Set(["man", "woman"]));
  });

  it("a room created as the Pinch clients create it (voiceType clone) speaks in the speaker's tone colour", async () => {
    const man = speech.get("librivox")!;
    const response = await fetch(new URL("/api/beta1/session", server.baseUrl), {
      method: "POST",
      headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" },
      body: JSON.stringify({ sourceLanguage: "en-US", targetLanguage: "es-ES", voiceType: "clone" }),
    });
    const room = (await response.json()) as { url: string; token: string; voice_clone: string };
    expect(room.voice_clone).toBe("tone-color");
    const socket = await joinRoom(room);
    await playToRoomTranslation(socket, man.pcm);
    await expect.poll(() => near(convertedWindows(heard(socket)), man.khz)).toBeGreaterThan(20);
    socket.close();
  });

  it("without the model, the same room speaks in the nearest library voice and says so", async () => {
    const off = await startServer({ MODELS_DIR: path.join(work, "no-models") });
    try {
      const health = (await (await fetch(new URL("/healthz", off.baseUrl))).json()) as Record<
        string,
        unknown
      >;
      expect(health.voice_clone).toEqual({ mode: "library", engine: null });
      const room = await createRoomSession(off.baseUrl, API_KEY, {
        source_language: "en-US",
        target_language: "es-ES",
        voice_type: "clone",
      });
      expect((room as unknown as { voice_clone: string }).voice_clone).toBe("library");
      const socket = await joinRoom(room);
      await playToRoomTranslation(socket, speech.get("librivox")!.pcm);
      await expect.poll(() => heard(socket).length / OUTPUT_RATE).toBeGreaterThan(2);
      expect(convertedWindows(heard(socket))).toHaveLength(0);
      socket.close();
    } finally {
      await off.close();
    }
  });

  it("dubbing with voice=clone dubs each speaker's lines in their own tone colour", async () => {
    const conversation = await buildConversation("librivox", "lj", { maxTurns: 3 });
    const input = path.join(work, "conversation.wav");
    await writeFile(input, encodeWav(conversation.pcm));
    const client = dubbingClient(server.baseUrl, API_KEY);
    const sourceUrl = await client.upload(input, "audio/wav");
    const created = await client.request("POST", "/api/dubbing/jobs", {
      source_url: sourceUrl,
      source_lang: "en",
      target_lang: "es",
      voice: "clone",
    });
    expect(created.status).toBe(201);
    const job = await client.finished(created.body.job_id as string);
    expect(job.status).toBe("completed");
    const output = path.join(work, "dubbed.mp3");
    await writeFile(output, Buffer.from(await (await fetch(job.output_url as string)).arrayBuffer()));
    const { stdout } = await run(
      "ffmpeg",
      ["-v", "error", "-i", output, "-f", "f32le", "-ac", "1", "-ar", String(OUTPUT_RATE), "-"],
      { encoding: "buffer", maxBuffer: 1 << 28 },
    );
    const audio = new Float32Array(stdout.buffer, stdout.byteOffset, stdout.byteLength / 4);
    const windows = convertedWindows(audio, { anyLevel: true });
    expect(near(windows, speech.get("librivox")!.khz)).toBeGreaterThan(10);
    expect(near(windows, speech.get("lj")!.khz)).toBeGreaterThan(10);
  });
});
