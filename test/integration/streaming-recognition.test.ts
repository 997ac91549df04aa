/**
 * Streaming English recognition (sherpa-onnx, src/engines/sherpa-onnx/recognizer.ts) through the
 * real service: a stand-in streaming transducer and punctuation model (test/support/stand-in-models/)
 * sit where `relay models pull` puts the real ones, and the default engines then hear English with
 * them. The stand-in writes a made-up word for every 160 ms of speech and none for silence, so what
 * is checked is the flow — interims while someone speaks, finals, punctuated sentences, the engine
 * that served — never the words.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readWavAsPcm16 } from "../../src/audio/wav.js";
import { createSession, RealtimeSocket, type ServerMessage } from "../../src/cli/recording-socket.js";
import { installStandInRecognizer } from "../support/stand-in-models/install.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";
import { speakOneUtterance } from "../support/session-socket.js";
import { sharedMissing, sharedPath } from "../support/shared.js";

const CLIP = "data/speech/librivox-pocketsphinx/sense_and_sensibility_01_austen_64kb-0870.wav";
let modelsDir: string;
let server: TestServer;
let speech: Int16Array;

beforeAll(async () => {
  modelsDir = await mkdtemp(path.join(tmpdir(), "relay-streaming-asr-"));
  await installStandInRecognizer(modelsDir, { punctuation: true });
  server = await startServer({ MODELS_DIR: modelsDir }, { ownEngines: true });
  if (!sharedMissing(CLIP)) speech = await readWavAsPcm16(sharedPath(CLIP));
});
afterAll(async () => {
  await server?.close();
  await rm(modelsDir, { recursive: true, force: true });
});

async function hear(params: Record<string, string>): Promise<RealtimeSocket> {
  const session = await createSession(server.baseUrl, API_KEY, {
    sourceLanguage: "en",
    targetLanguage: "es",
    audioOutputEnabled: "false",
    ...params,
  });
  const socket = await RealtimeSocket.connect(session.ws_url);
  await socket.waitFor((m) => m.type === "ready");
  await speakOneUtterance(socket, speech);
  socket.close();
  return socket;
}

const of = (socket: RealtimeSocket, type: string, final: boolean): ServerMessage[] =>
  socket.messages.filter((m) => m.type === type && m.is_final === final);

describe.skipIf(sharedMissing(CLIP))("streaming English recognition (stand-in models)", () => {
  it("English is heard by the streaming recognizer, with punctuation; other languages by the others", () => {
    const recognizer = server.registry.recognizer("en")!;
    expect(recognizer.info.id).toBe("sherpa-onnx");
    expect(recognizer.info.version).toMatch(/streaming-zipformer-en\+punctuation$/);
    expect(recognizer.capabilities.punctuation).toBe(true);
    expect(recognizer.openRecognition).toBeDefined();
  });

  it("interims before the first final, then the final and its translation", async () => {
    const socket = await hear({ finalizeMode: "stable" });
    const heard = socket.messages.filter(
      (m) => m.type === "original_transcript" && (m.text as string) !== "",
    );
    // How many interims a clip gives depends on the machine: audio that arrives while recognition is
    // behind (the clip is sent at 4x real time) reaches the recognizer in larger pieces, each heard
    // once. What holds under any load: the words are shown as interims before the first final. The
    // growing partial results themselves are the engine's, tested in sherpa-asr-stand-in.test.ts.
    const firstFinal = heard.findIndex((m) => m.is_final === true);
    expect(firstFinal).toBeGreaterThan(0);
    expect(of(socket, "translated_transcript", true).length).toBeGreaterThan(0);
  });

  it("finalizeMode=sentence gets sentences from the punctuation model", async () => {
    const socket = await hear({ finalizeMode: "sentence" });
    const finals = of(socket, "original_transcript", true).filter((m) => (m.text as string) !== "");
    expect(finals.length).toBeGreaterThan(0);
    // The stand-in punctuation capitalizes the first word and ends with a period.
    for (const final of finals) expect(final.text).toMatch(/^\p{Lu}.*\.$/u);
  });

  it("a session's context becomes hotwords for its recognizer, and the session is heard as without", async () => {
    const socket = await hear({
      finalizeMode: "stable",
      context: "Meeting with Anneliese Brandt about Kubernetes, OKRs",
    });
    expect(
      of(socket, "original_transcript", true).filter((m) => (m.text as string) !== "").length,
    ).toBeGreaterThan(0);
  });
});
