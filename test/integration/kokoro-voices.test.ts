/**
 * Kokoro v1.0 through the real service: a stand-in (test/support/stand-in-models/kokoro.ts) whose
 * speakers are named as the real model's are ("am_adam": American English, male), installed where
 * `relay models pull kokoro-multi-lang` puts the real one, beside a stand-in Spanish Piper voice.
 * Kokoro then speaks English and Chinese (it comes first in the catalogue), Piper Spanish. Each
 * stand-in speaker is a tone of its own pitch (`kokoroStandInPitch`), so what is checked is which
 * speaker spoke, never how.
 */
import { mkdtemp, rm, truncate } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSherpaTtsEngine } from "../../src/engines/sherpa-onnx/tts.js";
import { neuralVoiceModels } from "../../src/engines/sherpa-onnx/models.js";
import { defaultVoice } from "../../src/voices/library.js";
import { measureVoice } from "../../src/voices/voice-features.js";
import { kokoroStandInPitch } from "../support/stand-in-models/kokoro.js";
import { installStandInKokoro, installStandInVoice } from "../support/stand-in-models/install.js";
import { startServer, type TestServer } from "../support/server.js";
import { joinFrames, openTtsSession, speakLine } from "../support/tts-session.js";

/** Speaker ids 0–5: two American men, two American women, two Mandarin women. */
const SPEAKER_NAMES = ["am_adam", "am_michael", "af_alloy", "af_bella", "zf_xiaobei", "zf_xiaoni"];
let modelsDir: string;
let server: TestServer;

beforeAll(async () => {
  modelsDir = await mkdtemp(path.join(tmpdir(), "relay-kokoro-"));
  await installStandInKokoro(modelsDir, SPEAKER_NAMES);
  await installStandInVoice(modelsDir, "piper-es_ES-sharvard-medium", { speakers: 2, voice: "es" });
  server = await startServer({ MODELS_DIR: modelsDir }, { ownEngines: true });
});
afterAll(async () => {
  await server?.close();
  await rm(modelsDir, { recursive: true, force: true });
});

const pitchOf = (samples: Float32Array, rate: number) => measureVoice(samples, rate)?.medianF0Hz ?? 0;
const near = (hz: number, ids: number[]) => ids.some((id) => Math.abs(hz - kokoroStandInPitch(id)) < 10);

describe("Kokoro (stand-in) beside a Piper voice", () => {
  it("speaks English and Chinese with Kokoro, Spanish with Piper, the rest with eSpeak NG", async () => {
    const { voice_output } = (await (await fetch(`${server.baseUrl}/v1/languages`)).json()) as {
      voice_output: { language: string; engine: string }[];
    };
    const engineOf = (language: string) => voice_output.find((v) => v.language === language)?.engine;
    expect(engineOf("en")).toBe("sherpa-onnx");
    expect(engineOf("zh")).toBe("sherpa-onnx");
    expect(engineOf("es")).toBe("sherpa-onnx");
    expect(engineOf("fr")).toBe("espeak-ng");
    expect(server.registry.synthesizer("en")!.info.version).toMatch(
      /kokoro-multi-lang\+piper-es_ES-sharvard-medium$/u,
    );
  });

  it("gives each library voice a Kokoro speaker of its gender and language, in 24 kHz frames", async () => {
    const socket = await openTtsSession(server.baseUrl, { targetLanguage: "en" });
    const male = joinFrames(
      await speakLine(socket, { text: "Good morning to you all.", voiceId: String(defaultVoice("male").id) }),
    );
    const female = joinFrames(
      await speakLine(socket, {
        text: "Good morning to you all.",
        voiceId: String(defaultVoice("female").id),
      }),
    );
    socket.close();
    // The American men are speakers 0 and 1, the American women 2 and 3 (never the Mandarin ones).
    expect(near(pitchOf(male, 24_000), [0, 1])).toBe(true);
    expect(near(pitchOf(female, 24_000), [2, 3])).toBe(true);
  });

  it("speaks Chinese with the Mandarin speakers, men's voices too (Kokoro names no Mandarin man here)", async () => {
    const tts = server.registry.synthesizer("zh")!;
    for (const gender of ["female", "male"] as const) {
      const audio = await tts.synthesize({
        text: "你好。谢谢。",
        language: "zh",
        voice: defaultVoice(gender),
      });
      expect(audio.samples.length).toBeGreaterThan(0);
      expect(near(pitchOf(audio.samples, audio.sampleRate), [4, 5])).toBe(true);
    }
  });

  it("refuses a voices.bin that does not fit the model, before sherpa-onnx could end its process", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "relay-kokoro-bad-"));
    try {
      await installStandInKokoro(dir, SPEAKER_NAMES);
      const models = neuralVoiceModels(["kokoro-multi-lang"], dir);
      const { voices } = models[0]!.files as { voices: string };
      await truncate(voices, 1000);
      await expect(createSherpaTtsEngine({ models })).rejects.toThrow(/voices\.bin holds 1000 bytes/u);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
