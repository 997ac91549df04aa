/**
 * The stand-in streaming recognizer (test/support/stand-in-models/streaming-transducer.ts) and online
 * punctuation model (punctuation.ts) as sherpa-onnx itself takes them: OnlineRecognizer with greedy
 * search and with modified beam search and hotwords, endpointing, OnlinePunctuation. sherpa-onnx runs in
 * child processes (as src/engines/sherpa-onnx/host-main.ts runs it): a model it refuses ends the process.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import onnxProto from "onnx-proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writePunctuationStandIn, type PunctuationStandIn } from "../support/stand-in-models/punctuation.js";
import {
  writeStreamingTransducerStandIn,
  type StreamingTransducerStandIn,
} from "../support/stand-in-models/streaming-transducer.js";
import { runNodeSource } from "../support/run-script.js";
import { sharedMissing, sharedPath } from "../support/shared.js";

const { onnx } = onnxProto;
const SHERPA = createRequire(import.meta.url).resolve("sherpa-onnx-node");
const CLIPS = "librivox-pocketsphinx";
const SPEECH_MISSING = sharedMissing("data", "speech", CLIPS);
const clip = (): string => sharedPath("data", "speech", CLIPS, "goforward.wav");

interface Job {
  readonly sherpa: string;
  readonly transducer?: StreamingTransducerStandIn;
  readonly modelType?: string;
  readonly punctuation?: PunctuationStandIn;
  readonly wav?: string;
  readonly hotwordsFile?: string;
  readonly texts?: readonly string[];
}

/** One pass of audio through a stream: what a session would see, in audio seconds. */
interface Pass {
  readonly partials: readonly { readonly at: number; readonly text: string }[];
  readonly endpointAt: number | null;
  readonly finalText: string;
  readonly timestamps: readonly number[];
  /** The result after `reset` at the endpoint, once the trailing silence is all fed. */
  readonly afterReset: string;
}

interface Recognized {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stderr: string;
  readonly error?: string;
  readonly greedy?: { readonly speech: Pass; readonly again: Pass; readonly silence: Pass };
  readonly beam?: { readonly speech: Pass };
  readonly punctuated?: readonly string[];
}

// Plain CommonJS for `node -e`: feeds audio in 100 ms pieces as a session does, decoding whatever is
// ready after each, and prints one JSON line.
const CHILD = `
const job = JSON.parse(process.argv[1]);
const sherpa = require(job.sherpa);
const result = {};
function recognizer(decodingMethod, extra) {
  return new sherpa.OnlineRecognizer({
    featConfig: { sampleRate: 16000, featureDim: 80 },
    modelConfig: {
      transducer: { encoder: job.transducer.encoder, decoder: job.transducer.decoder, joiner: job.transducer.joiner },
      tokens: job.transducer.tokens, numThreads: 1, provider: "cpu", debug: 0,
      ...(job.modelType ? { modelType: job.modelType } : {}),
      ...extra.model,
    },
    decodingMethod,
    enableEndpoint: true,
    rule1MinTrailingSilence: 2.4,
    rule2MinTrailingSilence: 1.2,
    rule3MinUtteranceLength: 20,
    ...extra.recognizer,
  });
}
function pass(rec, samples) {
  const stream = rec.createStream();
  const out = { partials: [], endpointAt: null, finalText: "", timestamps: [], afterReset: "" };
  for (let i = 0; i < samples.length; i += 1600) {
    stream.acceptWaveform({ samples: samples.subarray(i, i + 1600), sampleRate: 16000 });
    while (rec.isReady(stream)) rec.decode(stream);
    const at = Math.min(i + 1600, samples.length) / 16000;
    const r = rec.getResult(stream);
    if (out.endpointAt === null) {
      if (r.text && r.text !== (out.partials.at(-1) || {}).text) out.partials.push({ at, text: r.text });
      if (rec.isEndpoint(stream)) {
        Object.assign(out, { endpointAt: at, finalText: r.text, timestamps: r.timestamps });
        rec.reset(stream);
      }
    }
  }
  out.afterReset = rec.getResult(stream).text;
  return out;
}
try {
  if (job.transducer) {
    const speech = sherpa.readWave(job.wav).samples;
    const withSilence = new Float32Array(speech.length + 3 * 16000);
    withSilence.set(speech);
    const greedy = recognizer("greedy_search", {});
    result.greedy = {
      speech: pass(greedy, withSilence),
      again: pass(greedy, withSilence),
      silence: pass(greedy, new Float32Array(4 * 16000)),
    };
    const beam = recognizer("modified_beam_search", {
      model: { modelingUnit: "bpe", bpeVocab: job.transducer.bpeVocab },
      recognizer: { maxActivePaths: 4, hotwordsFile: job.hotwordsFile, hotwordsScore: 1.5 },
    });
    result.beam = { speech: pass(beam, withSilence) };
  }
  if (job.punctuation) {
    const punct = new sherpa.OnlinePunctuation({
      model: { cnnBilstm: job.punctuation.model, bpeVocab: job.punctuation.bpeVocab, numThreads: 1 },
    });
    result.punctuated = job.texts.map((text) => punct.addPunct(text));
  }
} catch (error) {
  result.error = error.message;
}
console.log(JSON.stringify(result));
`;

async function runSherpa(job: Job, cwd: string): Promise<Recognized> {
  // cwd: a crash's core file, if the system writes one, lands in the temporary directory.
  const { code, signal, stdout, stderr } = await runNodeSource(CHILD, [JSON.stringify(job)], cwd);
  const line = stdout.trim().split("\n").at(-1);
  const parsed = line ? (JSON.parse(line) as Omit<Recognized, "code" | "signal" | "stderr">) : {};
  return { ...parsed, code, signal, stderr };
}

async function editModel(file: string, edit: (bytes: Buffer) => Uint8Array): Promise<void> {
  await writeFile(file, edit(await readFile(file)));
}

function withoutMetadata(key: string): (bytes: Buffer) => Uint8Array {
  return (bytes) => {
    const model = onnx.ModelProto.decode(bytes);
    model.metadataProps = model.metadataProps.filter((entry) => entry.key !== key);
    return onnx.ModelProto.encode(model).finish();
  };
}

const truncated = (bytes: Buffer): Uint8Array => bytes.subarray(0, bytes.length >> 1);

let workDir: string;
let hotwordsFile: string;
beforeAll(async () => {
  workDir = await mkdtemp(path.join(tmpdir(), "sherpa-asr-stand-in-"));
  hotwordsFile = path.join(workDir, "hotwords.txt");
  // One phrase a line, BPE-encoded with bpe.vocab; an optional ":score" boosts one phrase more.
  await writeFile(hotwordsFile, "GO FORWARD\nTEN METERS :3.0\n");
});
afterAll(async () => {
  await rm(workDir, { recursive: true, force: true });
});

describe.skipIf(SPEECH_MISSING)("stand-in streaming recognizer and punctuation in sherpa-onnx", () => {
  // goforward.wav: 2.8 s, speech from about 0.5 s to 2.3 s, room noise around it; 3 s of silence follow.
  const SPEECH_START = 0.4;
  const SPEECH_END = 2.4;

  it("gives partial results while someone speaks, an endpoint after trailing silence, and punctuation", async () => {
    const transducer = writeStreamingTransducerStandIn({ dir: path.join(workDir, "asr") });
    const punctuation = writePunctuationStandIn({ dir: path.join(workDir, "punct") });
    const run = await runSherpa(
      {
        sherpa: SHERPA,
        transducer,
        punctuation,
        hotwordsFile,
        wav: clip(),
        texts: ["how are you i am fine thank you", "hello", ""],
      },
      workDir,
    );
    expect(run.error).toBeUndefined();
    expect(run.code).toBe(0);

    for (const { speech } of [run.greedy!, run.beam!]) {
      // Several growing partial results, all while the speech lasts; tokens only where it is loud.
      expect(speech.partials.length).toBeGreaterThanOrEqual(3);
      expect(speech.partials[0]!.at).toBeGreaterThan(SPEECH_START);
      expect(speech.partials.at(-1)!.at).toBeLessThanOrEqual(SPEECH_END + 0.5);
      expect(speech.finalText).toBe(speech.partials.at(-1)!.text);
      expect(speech.finalText).toMatch(/^[A-Z' ]+$/u);
      expect(Math.min(...speech.timestamps)).toBeGreaterThanOrEqual(SPEECH_START);
      expect(Math.max(...speech.timestamps)).toBeLessThanOrEqual(SPEECH_END);
      // Rule 2: 1.2 s of trailing silence after something was decoded (plus a chunk and lookahead).
      expect(speech.endpointAt).toBeGreaterThan(SPEECH_END + 1.2 - 0.5);
      expect(speech.endpointAt).toBeLessThan(SPEECH_END + 1.2 + 1);
      // After reset, the silence that follows adds nothing.
      expect(speech.afterReset).toBe("");
    }
    // The same audio, the same words (they mean nothing).
    expect(run.greedy!.again.finalText).toBe(run.greedy!.speech.finalText);
    // Silence alone: no text, and rule 1's 2.4 s endpoint.
    expect(run.greedy!.silence.partials).toEqual([]);
    expect(run.greedy!.silence.endpointAt).toBeGreaterThanOrEqual(2.4);
    expect(run.greedy!.silence.endpointAt).toBeLessThan(3.4);

    expect(run.punctuated).toEqual(["How are you i am fine thank you.", "Hello.", ""]);
  });

  it("ends the process on what sherpa-onnx cannot load, except where a config value stands in", async () => {
    const cases = {
      // _Exit(-1) on a required key; an encoder without model_type is a null model (SIGSEGV)…
      noChunk: { file: "encoder" as const, edit: withoutMetadata("T") },
      noModelType: { file: "encoder" as const, edit: withoutMetadata("model_type") },
      // …unless modelConfig.modelType names it.
      noModelTypeButConfig: {
        file: "encoder" as const,
        edit: withoutMetadata("model_type"),
        modelType: "zipformer2",
      },
      // An unreadable file is an uncaught C++ exception: abort.
      truncatedJoiner: { file: "joiner" as const, edit: truncated },
      noComma: { file: "punctuation" as const, edit: withoutMetadata("COMMA") },
    };
    const runs = await Promise.all(
      Object.entries(cases).map(async ([name, { file, edit, ...rest }]) => {
        const dir = path.join(workDir, name);
        if (file === "punctuation") {
          const punctuation = writePunctuationStandIn({ dir });
          await editModel(punctuation.model, edit);
          return runSherpa({ sherpa: SHERPA, punctuation, texts: ["hello"] }, workDir);
        }
        const transducer = writeStreamingTransducerStandIn({ dir });
        await editModel(transducer[file], edit);
        return runSherpa({ sherpa: SHERPA, transducer, hotwordsFile, wav: clip(), ...rest }, workDir);
      }),
    );
    const [noChunk, noModelType, noModelTypeButConfig, truncatedJoiner, noComma] = runs as [
      Recognized,
      Recognized,
      Recognized,
      Recognized,
      Recognized,
    ];
    expect(noChunk.code).toBe(255);
    expect(noChunk.stderr).toContain("'T' does not exist in the metadata");
    expect(noModelType.signal).toBe("SIGSEGV");
    expect(noModelType.stderr).toContain("No model_type in the metadata");
    expect(noModelTypeButConfig.code).toBe(0);
    expect(noModelTypeButConfig.error).toBeUndefined();
    expect(truncatedJoiner.signal).toBe("SIGABRT");
    expect(truncatedJoiner.stderr).toMatch(/Protobuf parsing failed/u);
    expect(noComma.code).toBe(255);
    expect(noComma.stderr).toContain("'COMMA' does not exist in the metadata");
  });
});
