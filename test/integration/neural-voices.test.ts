/**
 * Neural voices (sherpa-onnx, src/engines/sherpa-onnx/) through the real service: stand-in Piper
 * voices (test/support/stand-in-models/vits.ts) sit in the models directory where `relay models
 * pull` puts real ones, and the default engines then speak English and Spanish through them and
 * every other language through eSpeak NG. The stand-ins say nothing: each speaker is a tone of its
 * own pitch (`vitsStandInPitch`), as long as a real voice would take, so what is checked here is
 * which speaker spoke, in what order and how much, never how it sounds.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, truncate, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import onnxProto from "onnx-proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSherpaTtsEngine } from "../../src/engines/sherpa-onnx/tts.js";
import { neuralVoiceModels } from "../../src/engines/sherpa-onnx/models.js";
import { createSession, RealtimeSocket } from "../../src/cli/recording-socket.js";
import { defaultVoice, findVoice, VOICES } from "../../src/voices/library.js";
import { measureVoice } from "../../src/voices/voice-features.js";
import { readWavAsPcm16 } from "../../src/audio/wav.js";
import { dubMedia } from "../../src/dubbing/index.js";
import { playToLastTranslation } from "../support/session-socket.js";
import { sharedMissing, sharedPath } from "../support/shared.js";
import { installStandInVoice } from "../support/stand-in-models/install.js";
import { vitsStandInPitch } from "../support/stand-in-models/vits.js";
import { buildConversation } from "../support/conversations.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";
import { joinFrames, openTtsSession, speakLine } from "../support/tts-session.js";

const execFileAsync = promisify(execFile);
const ENGLISH = "piper-en_US-libritts_r-medium";
const GO_FORWARD = "data/speech/librivox-pocketsphinx/goforward.wav";
const CONVERSATION_MISSING =
  sharedMissing("data/speech/ljspeech/wavs") || sharedMissing("data/speech/librivox-pocketsphinx");
const SPANISH = "piper-es_ES-sharvard-medium";
let modelsDir: string;
let server: TestServer;

beforeAll(async () => {
  modelsDir = await mkdtemp(path.join(tmpdir(), "relay-neural-voices-"));
  // Eight English speakers (pitches 110–390 Hz: two men, six women); four Spanish (two men, two women).
  await installStandInVoice(modelsDir, ENGLISH, { speakers: 8, voice: "en-us" });
  await installStandInVoice(modelsDir, SPANISH, { speakers: 4, voice: "es", language: "Spanish" });
  server = await startServer({ MODELS_DIR: modelsDir }, { ownEngines: true });
});
afterAll(async () => {
  await server?.close();
  await rm(modelsDir, { recursive: true, force: true });
});

const openTts = (params: Record<string, string>) => openTtsSession(server.baseUrl, params);
const pitchOf = (samples: Float32Array, rate: number) => measureVoice(samples, rate)?.medianF0Hz ?? 0;

describe("neural voices (sherpa-onnx, stand-in Piper models)", () => {
  it("the service names sherpa-onnx for English and Spanish and eSpeak NG for the rest", async () => {
    const languages = (await (await fetch(`${server.baseUrl}/v1/languages`)).json()) as Record<
      string,
      unknown
    >;
    const text = JSON.stringify(languages);
    expect(text).toContain("sherpa-onnx");
    expect(text).toContain("espeak-ng");
    expect(server.registry.synthesizer("en")!.info.id).toBe("sherpa-onnx");
    expect(server.registry.synthesizer("es")!.info.id).toBe("sherpa-onnx");
    expect(server.registry.synthesizer("fr")!.info.id).toBe("espeak-ng");
  });

  it("mode=tts speaks through the neural voice: 24 kHz frames, each library voice a speaker of its gender", async () => {
    const socket = await openTts({ targetLanguage: "en" });
    const female = joinFrames(
      await speakLine(socket, {
        text: "Good morning. How are you today?",
        voiceId: String(defaultVoice("female").id),
      }),
    );
    const male = joinFrames(
      await speakLine(socket, {
        text: "Good morning. How are you today?",
        voiceId: String(defaultVoice("male").id),
      }),
    );
    socket.close();
    // 24 kHz frames of the stand-in's length: about 1.5–3 s for these two sentences.
    for (const audio of [female, male]) {
      expect(audio.length / 24_000).toBeGreaterThan(1);
      expect(audio.length / 24_000).toBeLessThan(5);
    }
    // The stand-in's speakers 0 and 1 are men (110, 150 Hz), 2–7 women (190 Hz and up).
    expect(pitchOf(male, 24_000)).toBeLessThan(160);
    expect(pitchOf(female, 24_000)).toBeGreaterThan(170);
  });

  it("spreads the 35 voices of a gender over that gender's speakers", () => {
    const tts = server.registry.synthesizer("en")!;
    expect(tts.info.id).toBe("sherpa-onnx");
    // Through the engine directly: distinct pitches show distinct speakers.
    return (async () => {
      const pitches = new Set<number>();
      for (const voice of VOICES.filter((v) => v.gender === "female" && !v.strongAccent).slice(0, 35)) {
        const audio = await tts.synthesize({ text: "Hello.", language: "en", voice });
        pitches.add(Math.round(pitchOf(audio.samples, audio.sampleRate) / 10));
      }
      // Six female stand-in speakers: the female voices use all six.
      expect(pitches.size).toBe(6);
    })();
  });

  it("speech comes sentence by sentence: one chunk per sentence, in order", async () => {
    const tts = server.registry.synthesizer("en")!;
    const chunks: number[] = [];
    const text = "One. Two two two two two two two two. Three three.";
    for await (const chunk of tts.synthesizeStream!({ text, language: "en", voice: defaultVoice("male") }))
      chunks.push(chunk.samples.length);
    expect(chunks).toHaveLength(3);
    // The long middle sentence makes the longest chunk: the chunks are the sentences, in order.
    expect(chunks[1]).toBeGreaterThan(chunks[0]!);
    expect(chunks[1]).toBeGreaterThan(chunks[2]!);
  });

  it("a cancelled synthesis stops and the engine goes on serving", async () => {
    const tts = server.registry.synthesizer("en")!;
    const controller = new AbortController();
    const long = Array.from({ length: 40 }, (_, i) => `Sentence number ${i} is here.`).join(" ");
    const stream = tts.synthesizeStream!(
      { text: long, language: "en", voice: defaultVoice("female") },
      controller.signal,
    );
    let chunks = 0;
    await expect(
      (async () => {
        for await (const chunk of stream)
          if (chunk.samples.length > 0 && ++chunks === 2) controller.abort(new Error("session closed"));
      })(),
    ).rejects.toThrow("session closed");
    expect(chunks).toBeLessThan(40);
    const after = await tts.synthesize({
      text: "Still here.",
      language: "en",
      voice: defaultVoice("female"),
    });
    expect(after.samples.length).toBeGreaterThan(0);
  });

  it("a Spanish speech-to-speech line is spoken by the Spanish neural voice", async () => {
    const socket = await openTts({ targetLanguage: "es" });
    const audio = joinFrames(
      await speakLine(socket, { text: "Buenos días a todos.", voiceId: String(defaultVoice("male").id) }),
    );
    socket.close();
    // The Spanish stand-in's men: 110 and 150 Hz.
    const pitch = pitchOf(audio, 24_000);
    expect([vitsStandInPitch(0), vitsStandInPitch(1)].some((hz) => Math.abs(pitch - hz) < 10)).toBe(true);
  });
});

describe.skipIf(CONVERSATION_MISSING)("voiceId=auto with neural voices", () => {
  // voiceId=auto measures the library as the neural engine speaks it and matches each person's
  // voice to it. The stand-in's speakers are tones without a vocal tract, so the formant spacing
  // that decides gender for real voices means nothing here: what this proves is the flow (each
  // person matched to a voice of their own, spoken by a neural speaker), not which gender is chosen.
  it("gives each speaker of a conversation a library voice of their own, spoken by a neural speaker", async () => {
    // A woman and a man, two turns each (test/support/conversations.ts).
    const conversation = await buildConversation("lj", "librivox", { seed: 1, maxTurns: 2 });
    const session = await createSession(server.baseUrl, API_KEY, {
      modelName: "relay-2",
      sourceLanguage: "en",
      targetLanguage: "es",
      voiceId: "auto",
      finalizeMode: "sentence",
    });
    const socket = await RealtimeSocket.connect(session.ws_url);
    await socket.waitFor((m) => m.type === "ready");
    await playToLastTranslation(socket, conversation.pcm);
    socket.close();
    const voiced = socket.messages.filter(
      (m) => m.type === "translated_transcript" && m.voiceId !== undefined,
    );
    // Voices follow the speaker labels (a line at a turn's edge may carry the previous label); a
    // label's voice may still change until it is locked, so its last one counts.
    const lastVoice = new Map(voiced.map((m) => [m.speaker as string, m.voiceId as string]));
    expect(lastVoice.size).toBe(2);
    const [first, second] = [...lastVoice.values()];
    expect(first).not.toBe(second);
    for (const message of voiced) expect(findVoice(Number(message.voiceId))).toBeDefined();
    // The translation is spoken, by the Spanish stand-in (its speakers' pitches).
    const audio = joinFrames(socket.received.flatMap((r) => (r.audio ? [r.audio] : [])));
    expect(audio.length).toBeGreaterThan(24_000);
  });
});

describe.skipIf(sharedMissing(GO_FORWARD))("dubbing with neural voices", () => {
  it("a dubbed track is spoken by the target language's neural voice", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "relay-neural-dub-"));
    try {
      const result = await dubMedia({
        inputPath: sharedPath(GO_FORWARD),
        outputDir: dir,
        registry: server.registry,
        sourceLang: "en",
        targetLang: "es",
        voice: defaultVoice("male"),
      });
      expect(result.segments.length).toBeGreaterThan(0);
      const wav = path.join(dir, "dubbed.wav");
      await execFileAsync("ffmpeg", [
        "-v",
        "error",
        "-i",
        result.outputPath,
        "-ac",
        "1",
        "-ar",
        "16000",
        wav,
      ]);
      const dubbed = await readWavAsPcm16(wav);
      const samples = Float32Array.from(dubbed, (s) => s / 32_768);
      const pitch = pitchOf(samples, 16_000);
      expect([vitsStandInPitch(0), vitsStandInPitch(1)].some((hz) => Math.abs(pitch - hz) < 10)).toBe(true);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("the host process", () => {
  /** The sherpa-onnx host processes this test process started (children running host-main). */
  async function hostPids(): Promise<number[]> {
    const pids: number[] = [];
    for (const pid of await readdir("/proc")) {
      if (!/^\d+$/u.test(pid)) continue;
      const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => "");
      const parent = Number(stat.split(") ")[1]?.split(" ")[1]);
      const cmdline = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "");
      if (parent === process.pid && cmdline.includes("host-main")) pids.push(Number(pid));
    }
    return pids;
  }

  it("a host that dies fails the syntheses in flight with why; after a back-off a new host serves the same voices", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "relay-host-death-"));
    const before = new Set(await hostPids());
    const engine = await createSherpaTtsEngine({
      models: (await installStandInVoice(dir, ENGLISH, { speakers: 1 }), neuralVoiceModels([ENGLISH], dir)),
    });
    try {
      const [host] = (await hostPids()).filter((pid) => !before.has(pid));
      expect(host).toBeDefined();
      const long = Array.from({ length: 200 }, (_, i) => `Sentence number ${i} is here.`).join(" ");
      const chunks: number[] = [];
      const inFlight = (async () => {
        for await (const chunk of engine.synthesizeStream!({
          text: long,
          language: "en",
          voice: defaultVoice("male"),
        })) {
          chunks.push(chunk.samples.length);
          if (chunks.length === 1) process.kill(host!, "SIGKILL");
        }
      })();
      await expect(inFlight).rejects.toThrow(/sherpa-onnx TTS stopped \(SIGKILL\)/u);
      // Straight after a crash the engine refuses at once (the registry's next engine speaks)...
      await expect(
        engine.synthesize({ text: "Too soon.", language: "en", voice: defaultVoice("male") }),
      ).rejects.toThrow(/sherpa-onnx TTS is restarting after 1 failure in a row/u);
      expect(engine.hosts!()[0]).toMatchObject({ state: "failing", restarts: { crash: 1 } });
      // ...and once the back-off (0.5 s) has passed, a new host serves.
      await new Promise((resolve) => setTimeout(resolve, 600));
      const after = await engine.synthesize({
        text: "Still here.",
        language: "en",
        voice: defaultVoice("male"),
      });
      expect(after.samples.length).toBeGreaterThan(0);
      const [replacement] = (await hostPids()).filter((pid) => !before.has(pid));
      expect(replacement).toBeDefined();
      expect(replacement).not.toBe(host);
      expect(engine.hosts!()[0]).toMatchObject({ state: "up", failures: 0 });
    } finally {
      await engine.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("model files sherpa-onnx would die on are refused with a message", () => {
  it("a model without the metadata sherpa-onnx requires, a truncated one, and one that is not ONNX", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "relay-bad-voice-"));
    try {
      await installStandInVoice(dir, ENGLISH, { speakers: 1 });
      const [model] = neuralVoiceModels([ENGLISH], dir);
      const whole = await readFile(model!.files.model);
      const { onnx } = onnxProto;
      const decoded = onnx.ModelProto.decode(whole);
      decoded.metadataProps = decoded.metadataProps.filter((entry) => entry.key !== "language");
      await writeFile(model!.files.model, onnx.ModelProto.encode(decoded).finish());
      await expect(createSherpaTtsEngine({ models: [model!] })).rejects.toThrow(
        /lacks the metadata sherpa-onnx requires of a vits model: language/,
      );
      await writeFile(model!.files.model, whole);
      await truncate(model!.files.model, 300);
      await expect(createSherpaTtsEngine({ models: [model!] })).rejects.toThrow(/not a complete ONNX model/);
      await writeFile(model!.files.model, "not onnx at all");
      await expect(createSherpaTtsEngine({ models: [model!] })).rejects.toThrow(/ONNX/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("one bad voice disables only itself", () => {
  it("a voice whose tokens sherpa-onnx cannot read is left out; the others speak", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "relay-one-bad-voice-"));
    try {
      await installStandInVoice(dir, ENGLISH, { speakers: 1 });
      const spanishDir = await installStandInVoice(dir, SPANISH, {
        speakers: 1,
        voice: "es",
        language: "Spanish",
      });
      // A tokens.txt sherpa-onnx ends its process over as it loads the voice.
      await writeFile(path.join(spanishDir, "tokens.txt"), "\u0000\u0001garbage line without id\n");
      const engine = await createSherpaTtsEngine({ models: neuralVoiceModels(undefined, dir) });
      try {
        expect(engine.capabilities.languages).toEqual(["en"]);
        expect(engine.unavailableParts).toEqual([
          { id: `sherpa-onnx-voice ${SPANISH}`, reason: expect.stringMatching(/stopped|tokens/u) },
        ]);
        // Its process died loading the bad voice: a bad model, not a failing host.
        expect(engine.hosts!()[0]).toMatchObject({ failures: 0 });
        const audio = await engine.synthesize({
          text: "Hello.",
          language: "en",
          voice: defaultVoice("male"),
        });
        expect(audio.samples.length).toBeGreaterThan(0);
      } finally {
        await engine.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
