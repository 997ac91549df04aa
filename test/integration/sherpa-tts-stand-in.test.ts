/**
 * The stand-in Piper voice (test/support/stand-in-models/vits.ts) as sherpa-onnx itself takes it: loaded
 * with `OfflineTts.createAsync`, spoken with `generateAsync`. sherpa-onnx runs in a child process, as the
 * service runs it (src/engines/sherpa-onnx/host-main.ts): a model it refuses ends that process.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import onnxProto from "onnx-proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { medianPitch, rms } from "../support/audio-measures.js";
import { runNodeSource } from "../support/run-script.js";
import {
  type KokoroStandInFiles,
  kokoroStandInPitch,
  writeKokoroStandIn,
} from "../support/stand-in-models/kokoro.js";
import {
  type VitsStandInFiles,
  vitsStandInPitch,
  writeVitsStandIn,
} from "../support/stand-in-models/vits.js";

const { onnx } = onnxProto;

interface Job {
  /** The config's `model` part: `{ vits }` or `{ kokoro }`. */
  readonly model: { readonly vits: VitsStandInFiles } | { readonly kokoro: Partial<KokoroStandInFiles> };
  readonly requests: readonly { readonly text: string; readonly sid: number; readonly speed: number }[];
}

interface Spoken {
  readonly samples: Float32Array;
  readonly sampleRate: number;
  readonly progress: readonly number[];
  readonly chunkSamples: number;
}

interface SherpaRun {
  readonly code: number | null;
  readonly stderr: string;
  readonly loaded?: { readonly numSpeakers: number; readonly sampleRate: number };
  readonly spoken: readonly Spoken[];
  readonly error?: string;
}

// Plain CommonJS for `node -e`: loads the voice as the service's host does (one sentence per callback)
// and prints one JSON line; samples travel as base64 float32.
const CHILD = `
const sherpa = require("sherpa-onnx-node");
const job = JSON.parse(process.argv[1]);
(async () => {
  const result = { spoken: [] };
  try {
    const tts = await sherpa.OfflineTts.createAsync({
      model: { ...job.model, numThreads: 1, provider: "cpu", debug: 0 },
      maxNumSentences: 1,
    });
    result.loaded = { numSpeakers: tts.numSpeakers, sampleRate: tts.sampleRate };
    for (const request of job.requests) {
      const progress = [];
      let chunkSamples = 0;
      const audio = await tts.generateAsync({
        ...request,
        onProgress: (info) => { progress.push(info.progress); chunkSamples += info.samples.length; return 1; },
      });
      const samples = Buffer.from(audio.samples.buffer, audio.samples.byteOffset, audio.samples.byteLength);
      result.spoken.push({ samples: samples.toString("base64"), sampleRate: audio.sampleRate, progress, chunkSamples });
    }
  } catch (error) {
    result.error = error.message;
  }
  console.log(JSON.stringify(result));
})();
`;

async function runSherpa(job: Job): Promise<SherpaRun> {
  const { code, stdout, stderr } = await runNodeSource(CHILD, [JSON.stringify(job)]);
  const line = stdout.trim().split("\n").at(-1);
  if (!line) return { code, stderr, spoken: [] };
  const parsed = JSON.parse(line) as Omit<SherpaRun, "code" | "stderr" | "spoken"> & {
    spoken: (Omit<Spoken, "samples"> & { samples: string })[];
  };
  const spoken = parsed.spoken.map((entry) => {
    const bytes = Buffer.from(entry.samples, "base64");
    return { ...entry, samples: new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4) };
  });
  return { ...parsed, code, stderr, spoken };
}

const TEXT = "Hello world. How are you?";
const duration = ({ samples, sampleRate }: Spoken): number => samples.length / sampleRate;

let workDir: string;
beforeAll(async () => {
  workDir = await mkdtemp(path.join(tmpdir(), "sherpa-tts-stand-in-"));
});
afterAll(async () => {
  await rm(workDir, { recursive: true, force: true });
});

describe("stand-in Piper voice in sherpa-onnx", () => {
  it("loads as a single-speaker 22 050 Hz voice and speaks sentence by sentence, as long as speech takes", async () => {
    const files = await writeVitsStandIn({ dir: path.join(workDir, "single") });
    const run = await runSherpa({
      model: { vits: files },
      requests: [0.5, 1, 2].map((speed) => ({ text: TEXT, sid: 0, speed })),
    });

    expect(run.error).toBeUndefined();
    expect(run.loaded).toEqual({ numSpeakers: 1, sampleRate: 22050 });
    const [slow, normal, fast] = run.spoken as [Spoken, Spoken, Spoken];
    // Piper's en_US medium voices take about 1.7 s for this text.
    expect(duration(normal)).toBeGreaterThan(1.2);
    expect(duration(normal)).toBeLessThan(2.5);
    expect(normal.sampleRate).toBe(22050);
    // One callback a sentence (maxNumSentences 1), together the whole audio.
    expect(normal.progress).toEqual([0.5, 1]);
    expect(normal.chunkSamples).toBe(normal.samples.length);
    // Speed scales the durations (rounded up to whole frames a phoneme id, as VITS does).
    expect(duration(slow)).toBeGreaterThan(1.6 * duration(normal));
    expect(duration(fast)).toBeLessThan(0.8 * duration(normal));
    // A voice, not silence: speech level, voiced at the stand-in's pitch.
    expect(rms(normal.samples)).toBeGreaterThan(0.05);
    expect(medianPitch(normal)).toBeCloseTo(vitsStandInPitch(0), -1);
  });

  it("gives each speaker of a multi-speaker voice its own pitch", async () => {
    const files = await writeVitsStandIn({ dir: path.join(workDir, "multi"), speakers: 3 });
    const run = await runSherpa({
      model: { vits: files },
      requests: [0, 1].map((sid) => ({ text: TEXT, sid, speed: 1 })),
    });

    expect(run.loaded).toEqual({ numSpeakers: 3, sampleRate: 22050 });
    const [first, second] = run.spoken.map((audio) => medianPitch(audio)) as [number, number];
    expect(first).toBeCloseTo(vitsStandInPitch(0), -1);
    expect(second).toBeCloseTo(vitsStandInPitch(1), -1);
    expect(second - first).toBeGreaterThan(25);
  });

  it("loads the Piper-medium-sized variant, which speaks as the small one does", async () => {
    const files = await writeVitsStandIn({ dir: path.join(workDir, "real"), size: "real", speakers: 2 });
    const run = await runSherpa({ model: { vits: files }, requests: [{ text: TEXT, sid: 1, speed: 1 }] });

    expect(run.error).toBeUndefined();
    expect(run.loaded).toEqual({ numSpeakers: 2, sampleRate: 22050 });
    const [spoken] = run.spoken as [Spoken];
    expect(duration(spoken)).toBeGreaterThan(1.2);
    expect(duration(spoken)).toBeLessThan(2.5);
    expect(medianPitch(spoken)).toBeCloseTo(vitsStandInPitch(1), -1);
  });

  it("ends sherpa-onnx's process when metadata it requires is missing", async () => {
    const files = await writeVitsStandIn({ dir: path.join(workDir, "no-language") });
    const model = onnx.ModelProto.decode(await readFile(files.model));
    model.metadataProps = model.metadataProps.filter((entry) => entry.key !== "language");
    await writeFile(files.model, onnx.ModelProto.encode(model).finish());

    const run = await runSherpa({ model: { vits: files }, requests: [] });
    // _Exit(-1): nothing thrown, nothing printed by the script.
    expect(run.code).toBe(255);
    expect(run.loaded).toBeUndefined();
    expect(run.stderr).toContain("'language' does not exist in the metadata");
  });

  it("rejects a truncated model file without ending the process", async () => {
    const files = await writeVitsStandIn({ dir: path.join(workDir, "truncated") });
    const bytes = await readFile(files.model);
    await writeFile(files.model, bytes.subarray(0, bytes.length >> 1));

    const run = await runSherpa({ model: { vits: files }, requests: [] });
    expect(run.code).toBe(0);
    expect(run.error).toMatch(/Protobuf parsing failed/u);
  });
});

describe("stand-in Kokoro v1.0 voice in sherpa-onnx", () => {
  it("loads as a 24 kHz multi-speaker voice whose speakers differ in pitch", async () => {
    const files = await writeKokoroStandIn({ dir: path.join(workDir, "kokoro"), speakers: 3 });
    const run = await runSherpa({
      model: { kokoro: files },
      requests: [
        { text: TEXT, sid: 0, speed: 1 },
        { text: TEXT, sid: 1, speed: 1 },
        { text: TEXT, sid: 0, speed: 2 },
      ],
    });

    expect(run.error).toBeUndefined();
    expect(run.loaded).toEqual({ numSpeakers: 3, sampleRate: 24000 });
    const [first, second, fast] = run.spoken as [Spoken, Spoken, Spoken];
    expect(first.sampleRate).toBe(24000);
    expect(duration(first)).toBeGreaterThan(1);
    expect(duration(first)).toBeLessThan(2.5);
    expect(first.progress).toEqual([0.5, 1]);
    expect(duration(fast)).toBeLessThan(0.8 * duration(first));
    expect(rms(first.samples)).toBeGreaterThan(0.05);
    expect(medianPitch(first)).toBeCloseTo(kokoroStandInPitch(0), -1);
    expect(medianPitch(second)).toBeCloseTo(kokoroStandInPitch(1), -1);
  });

  it("ends sherpa-onnx's process when a multi-language model gets neither lang nor lexicon", async () => {
    const files = await writeKokoroStandIn({ dir: path.join(workDir, "kokoro-no-lang") });
    const withoutLang = {
      model: files.model,
      voices: files.voices,
      tokens: files.tokens,
      dataDir: files.dataDir,
    };
    const run = await runSherpa({ model: { kokoro: withoutLang }, requests: [] });
    expect(run.code).toBe(255);
    expect(run.stderr).toContain("please pass --kokoro-lexicon or --kokoro-lang");
  });
});
