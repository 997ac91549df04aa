/**
 * relay-2 speaker labels through the sherpa-onnx speaker engine: the speaker-embedding stand-in
 * (test/support/stand-in-models/speaker-embedding.ts) where `relay models pull speaker-campplus-en`
 * puts the model, the real server choosing it over the MFCC engine, and the two-person conversation
 * of test/integration/speakers.test.ts. The stand-in's embedding is a hand-made statistic, not
 * CAM++: what passes here is the engine's plumbing and the tracker's use of it, not a real
 * model's accuracy. A model sherpa-onnx would crash on is refused, and MFCC serves instead.
 * The stand-in's noisy 0.5 s embeddings find changes of voice inside one person's speech: what
 * the pipeline makes of such splits (no empty final, labels without gaps) is tested here too.
 */
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import onnxProto from "onnx-proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSession, RealtimeSocket, type ServerMessage } from "../../src/cli/recording-socket.js";
import { createSherpaSpeakerEngine } from "../../src/engines/sherpa-onnx/speaker-embedding.js";
import { findSherpaModelOf } from "../../src/engines/sherpa-onnx/catalogue.js";
import { sherpaModelDir } from "../../src/engines/sherpa-onnx/models.js";
import { buildConversation, speakerOf, type Conversation } from "../support/conversations.js";
import { injectApp } from "../support/app.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";
import { playToLastTranslation } from "../support/session-socket.js";
import { sharedMissing } from "../support/shared.js";
import { writeSpeakerEmbeddingStandIn } from "../support/stand-in-models/speaker-embedding.js";

// onnx-proto is CommonJS: its namespace is a property of the default export.
const { onnx } = onnxProto;

const SPEECH_MISSING =
  sharedMissing("data/speech/ljspeech/wavs") || sharedMissing("data/speech/librivox-pocketsphinx");
/**
 * The real-model defaults (0.4 / 0.5) are CAM++'s; the stand-in's scale is its own. Measured on this
 * conversation through the engine (0.5 s blocks pooled): one person's 1.5 s stretches 0.15–0.87
 * apart (median 0.40), the two people's 0.52–1.28 (5th percentile 0.74); 3 s stretches 0.12–0.42
 * and 0.71–1.18. With the defaults it hands out five labels for two people; with these, two.
 */
const STAND_IN_THRESHOLDS = { SPEAKER_SAME_BELOW: "0.6", SPEAKER_NEW_ABOVE: "0.75" };
const root = mkdtempSync(path.join(tmpdir(), "relay-neural-speakers-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A models directory holding the stand-in where `relay models pull speaker-campplus-en` puts it; returns the file. */
function pullStandIn(modelsDir: string): string {
  const entry = findSherpaModelOf("speaker", "speaker-campplus-en")!;
  const target = path.join(sherpaModelDir(entry, modelsDir), entry.speaker.model);
  const { model } = writeSpeakerEmbeddingStandIn({
    dir: path.join(root, "written", path.basename(modelsDir)),
  });
  mkdirSync(path.dirname(target), { recursive: true });
  renameSync(model, target);
  return target;
}

/** The model at `file` with its `framework` metadata replaced. */
function withFramework(file: string, framework: string): void {
  const model = onnx.ModelProto.decode(readFileSync(file));
  for (const entry of model.metadataProps) if (entry.key === "framework") entry.value = framework;
  writeFileSync(file, onnx.ModelProto.encode(model).finish());
}

describe.skipIf(SPEECH_MISSING)("relay-2 speaker labels through a pulled speaker-embedding model", () => {
  let server: TestServer;
  let conversation: Conversation;

  beforeAll(async () => {
    const modelsDir = path.join(root, "models");
    pullStandIn(modelsDir);
    server = await startServer({ MODELS_DIR: modelsDir, ...STAND_IN_THRESHOLDS }, { ownEngines: true });
    // A woman and a man, two turns each (test/support/conversations.ts).
    conversation = await buildConversation("lj", "librivox", { seed: 1, maxTurns: 2 });
  });
  afterAll(async () => {
    await server?.close();
  });

  it("the registry serves the sherpa-onnx speaker engine, and says so on /healthz and /v1/languages", async () => {
    const health = (await (await fetch(new URL("/healthz", server.baseUrl))).json()) as {
      engines: { kind: string; id: string }[];
      unavailable_engines: unknown[];
    };
    expect(health.unavailable_engines).toEqual([]);
    expect(health.engines).toContainEqual(
      expect.objectContaining({ kind: "speakers", id: "sherpa-onnx-speaker" }),
    );
    const languages = (await (
      await fetch(new URL("/v1/languages", server.baseUrl), {
        headers: { authorization: `Bearer ${API_KEY}` },
      })
    ).json()) as { engines: { kind: string; id: string }[] };
    expect(languages.engines).toContainEqual(
      expect.objectContaining({ kind: "speakers", id: "sherpa-onnx-speaker" }),
    );
  });

  /** Streams `pcm` through a relay-2 session, finalizes, and returns every message once the last final's translation is in. */
  async function play(pcm: Int16Array, finalizeMode: string): Promise<ServerMessage[]> {
    const session = await createSession(server.baseUrl, API_KEY, {
      modelName: "relay-2",
      sourceLanguage: "en",
      targetLanguage: "es",
      finalizeMode,
      audioOutputEnabled: "false",
    });
    const socket = await RealtimeSocket.connect(session.ws_url);
    await socket.waitFor((m) => m.type === "ready");
    await playToLastTranslation(socket, pcm);
    socket.close();
    return socket.messages;
  }

  /** Every original final's label is its person's (who speaks most of its span): "1" and "2", one per person. */
  function expectOneLabelPerPerson(messages: ServerMessage[], exchange: Conversation): void {
    const labelled = messages
      .filter((m) => m.type === "original_transcript" && m.is_final === true)
      .map((m) => ({
        label: m.speaker as string,
        person: speakerOf(exchange, (m.start_ms as number) * 16, (m.end_ms as number) * 16),
      }));
    expect(new Set(labelled.map((l) => l.label))).toEqual(new Set(["1", "2"]));
    const labelOf = new Map<string, string>();
    for (const { label, person } of labelled) {
      if (!labelOf.has(person!)) labelOf.set(person!, label);
      expect(label, `a final of ${person}`).toBe(labelOf.get(person!));
    }
    expect(labelOf.size).toBe(2);
    expect(new Set(labelOf.values()).size).toBe(2);
  }

  it("labels the conversation's transcripts, one label per person", async () => {
    const messages = await play(conversation.pcm, "sentence");
    const transcripts = messages.filter((m) => m.type.endsWith("_transcript"));
    expect(transcripts.length).toBeGreaterThan(10);
    for (const message of transcripts) expect(message.speaker).toMatch(/^[1-9][0-9]*$/);
    // The stand-in tells the woman and the man apart; the change of voice it finds near the end of
    // the woman's first utterance makes a label of the tracker's that no final carries, and
    // clients never see it: the man is "2".
    expectOneLabelPerPerson(messages, conversation);
  });

  // Issue 30, item 9. In this exchange the stand-in finds changes of voice inside the woman's
  // speech: before, a label went to a stretch whose words then moved to the man's segment, a
  // segment ended with an empty final, and the man's whole first turn was lost (PocketSphinx's
  // word timings, shifted by its silence removal, put every word past the cut).
  it.each(["sentence", "stable"])(
    "%s finals: none is empty, each segment ends with one, and labels run 1, 2 without gaps",
    async (finalizeMode) => {
      const exchange = await buildConversation("lj", "librivox", { seed: 3, maxTurns: 2 });
      const messages = await play(exchange.pcm, finalizeMode);
      const transcripts = messages.filter((m) => m.type.endsWith("_transcript"));
      const finals = transcripts.filter((m) => m.is_final === true);
      for (const final of finals)
        expect(final, JSON.stringify(final)).toMatchObject({ text: expect.stringMatching(/\S/) });
      // every segment that showed interims ends with a final (the last one may still be growing)
      const shown = transcripts.filter((m) => m.type === "original_transcript");
      for (const id of [...new Set(shown.map((m) => m.correlation_id))].slice(0, -1))
        expect(shown.findLast((m) => m.correlation_id === id)?.is_final, `segment ${String(id)}`).toBe(true);
      const labels = [...new Set(finals.map((m) => Number(m.speaker)))].sort((a, b) => a - b);
      expect(labels).toEqual(labels.map((_, i) => i + 1));
      expectOneLabelPerPerson(messages, exchange);
    },
    120_000,
  );
});

describe("a speaker model sherpa-onnx would crash on", () => {
  const modelsDir = path.join(root, "bad-models");
  const file = pullStandIn(modelsDir);
  // An unknown framework makes sherpa-onnx crash (a segmentation fault), not throw.
  withFramework(file, "kaldi");

  it("is refused before it is loaded, with the reason", async () => {
    await expect(createSherpaSpeakerEngine({ model: file })).rejects.toThrow(
      /sherpa-onnx cannot use framework "kaldi"/,
    );
  });

  it("leaves the MFCC engine telling speakers apart, the refusal on /healthz", async () => {
    const app = await injectApp({ MODELS_DIR: modelsDir }, { ownEngines: true });
    try {
      expect(app.registry.speakers.info.id).toBe("mfcc-gaussian");
      const health = (await (await app.inject("/healthz")).json()) as {
        status: string;
        unavailable_engines: { id: string; reason: string }[];
      };
      expect(health.status).toBe("degraded");
      expect(health.unavailable_engines).toEqual([
        { id: "sherpa-onnx-speaker", reason: expect.stringMatching(/framework "kaldi"/) },
      ]);
    } finally {
      await app.close();
    }
  });
});
