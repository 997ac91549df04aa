/**
 * The encoder window of relay's whisper.cpp engine on real weights: faster-whisper's tiny.en and
 * base (CTranslate2), converted to ggml by scripts/convert-whisper-ct2-to-ggml.py, each clip decoded
 * once whole (one final decode, as whisper-cpp-real.test.ts does) under several windows. Per setting
 * and model: word agreement with the full 30 s window and with faster-whisper on the same weights,
 * and the mean decode time. Chooses the engine's `ENCODER_*_FRAMES` defaults.
 *
 * Clips: ../shared/data/speech ljspeech (32), librivox-pocketsphinx, misc/jfk and the LibriSpeech
 * one in English on both models; fleurs-dev es and de on base (decoded as their language).
 *
 *   npx tsx scripts/bench-whisper-window.ts [results.json]
 *
 * Needs the real models (sh scripts/setup-real-models.sh), the models Python environment and relay's
 * native addon (npm run setup). The engine runs unchanged; a wrapper around the native binding only
 * replaces the `audioCtx` (and, for one check, `maxTokens`) the engine asks for.
 */
import { execFile } from "node:child_process";
import { readdirSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { readWavAsPcm16 } from "../src/audio/wav.js";
import { wordErrorRate } from "../src/engines/kit/models/check-metrics.js";
import {
  loadWhisperBinding,
  type NativeTranscribeOptions,
  type NativeWhisperContext,
  type WhisperBinding,
} from "../src/engines/whisper-cpp/binding.js";
import { createWhisperCppEngine } from "../src/engines/whisper-cpp/index.js";
import { pythonEnvDir } from "../test/support/python-clients.js";
import { realModelDir, type RealModel } from "../test/support/real-models.js";
import { PROJECT_ROOT } from "../test/support/run-script.js";
import { sharedPath } from "../test/support/shared.js";

const run = promisify(execFile);
const PYTHON = path.join(pythonEnvDir("models"), "bin", "python");
const SAMPLES_PER_FRAME = 320;
const FULL_FRAMES = 1500;

interface Setting {
  readonly name: string;
  /** Encoder frames for a decode of `samples`; 0: whisper's full window. */
  readonly frames: (samples: number) => number;
  /** Lifts the engine's bound on tokens per pass (to tell a loop the bound cuts from one it causes). */
  readonly unboundedTokens?: boolean;
}

const audioFrames = (samples: number): number => Math.ceil(samples / SAMPLES_PER_FRAME);
const fit =
  (margin: number, minimum = 0) =>
  (samples: number): number =>
    Math.min(FULL_FRAMES, Math.max(minimum, audioFrames(samples) + margin));

const SETTINGS: readonly Setting[] = [
  { name: "full 30 s window", frames: () => 0 },
  { name: "full, no token bound", frames: () => 0, unboundedTokens: true },
  { name: "fit +64 (1.28 s)", frames: fit(64) },
  { name: "fit +64, no token bound", frames: fit(64), unboundedTokens: true },
  { name: "fit +128 (2.56 s)", frames: fit(128) },
  { name: "fit +256 (5.12 s)", frames: fit(256) },
  { name: "fit +500 (10 s)", frames: fit(500) },
  { name: "fit +64, at least 5 s", frames: fit(64, 250) },
  { name: "fit +64, at least 10 s", frames: fit(64, 500) },
  { name: "fit +64, at least 15 s", frames: fit(64, 750) },
  { name: "fit +64, at least 20 s", frames: fit(64, 1000) },
];

interface Clip {
  readonly file: string;
  readonly language: string;
  readonly pcm: Int16Array;
}

/** The native binding, with the window (and token bound) of `current.setting` in every decode. */
function windowBinding(native: WhisperBinding, current: { setting: Setting }): WhisperBinding {
  const Inner = native.module.WhisperContext;
  class WindowContext implements NativeWhisperContext {
    private readonly inner: NativeWhisperContext;
    constructor(options: { filePath: string; useGpu?: boolean; useFlashAttn?: boolean }) {
      this.inner = new Inner(options);
    }
    static toggleNativeLog(enable: boolean, callback?: (level: string, text: string) => void): void {
      Inner.toggleNativeLog(enable, callback);
    }
    transcribeData(audio: ArrayBuffer, options: NativeTranscribeOptions) {
      const { setting } = current;
      return this.inner.transcribeData(audio, {
        ...options,
        audioCtx: setting.frames(audio.byteLength / 2),
        ...(setting.unboundedTokens ? { maxTokens: 0 } : {}),
      });
    }
    release(): Promise<void> {
      return this.inner.release();
    }
  }
  return { ...native, module: { WhisperContext: WindowContext } };
}

async function fasterWhisper(model: RealModel, language: string, clips: readonly Clip[]): Promise<string[]> {
  if (clips.length === 0) return [];
  const script = path.join(PROJECT_ROOT, "test/python/faster_whisper_transcribe.py");
  const { stdout } = await run(
    PYTHON,
    [script, realModelDir(model), language, ...clips.map((clip) => clip.file)],
    { maxBuffer: 16 << 20 },
  );
  return (JSON.parse(stdout) as { text: string }[]).map((result) => result.text);
}

/** 1 − corpus WER of `hypotheses` against `references` (check-metrics' scoring words). */
const agreement = (references: readonly string[], hypotheses: readonly string[]): number =>
  1 - wordErrorRate(references, hypotheses) / 100;

async function loadClips(): Promise<{ english: Clip[]; foreign: Clip[] }> {
  const dir = (...parts: string[]): string[] => {
    const full = sharedPath("data", "speech", ...parts);
    return readdirSync(full)
      .filter((name) => name.endsWith(".wav"))
      .sort()
      .map((name) => path.join(full, name));
  };
  const read = async (file: string, language: string): Promise<Clip> => ({
    file,
    language,
    pcm: await readWavAsPcm16(file),
  });
  const englishFiles = [
    ...dir("ljspeech", "wavs"),
    ...dir("librivox-pocketsphinx"),
    sharedPath("data", "speech", "misc", "jfk.wav"),
    sharedPath("data", "speech", "misc", "librispeech-1995-1837-0001.wav"),
  ];
  const foreignFiles = dir("fleurs-dev").filter((file) => /fleurs-(es|de)-/u.test(path.basename(file)));
  return {
    english: await Promise.all(englishFiles.map((file) => read(file, "en"))),
    foreign: await Promise.all(
      foreignFiles.map((file) => read(file, /fleurs-(\w+)-/u.exec(path.basename(file))![1]!)),
    ),
  };
}

interface Row {
  readonly model: string;
  readonly setting: string;
  readonly withFull: number;
  readonly withFasterWhisper: number;
  readonly meanMs: number;
  readonly meanFrames: number;
}

async function benchModel(
  label: string,
  modelPath: string,
  clips: readonly Clip[],
  references: readonly string[],
): Promise<Row[]> {
  const current = { setting: SETTINGS[0]! };
  const engine = await createWhisperCppEngine({
    modelPath,
    threads: 2,
    maxConcurrent: 1,
    binding: windowBinding(loadWhisperBinding("native"), current),
  });
  const texts = SETTINGS.map(() => [] as string[]);
  const ms = SETTINGS.map(() => 0);
  try {
    for (const [n, clip] of clips.entries()) {
      // Settings alternate within each clip, so that load from elsewhere spreads over all of them.
      for (const [i, setting] of SETTINGS.entries()) {
        current.setting = setting;
        const started = performance.now();
        const stream = await engine.createStream({ language: clip.language });
        await stream.write(clip.pcm);
        const { text } = await stream.finish();
        ms[i]! += performance.now() - started;
        texts[i]!.push(text);
      }
      process.stderr.write(`${label} ${n + 1}/${clips.length}\r`);
      const full = texts[0]!.at(-1)!;
      for (const [i, setting] of SETTINGS.entries()) {
        const text = texts[i]!.at(-1)!;
        if (agreement([full], [text]) < 1) {
          console.log(
            `${label} ${path.basename(clip.file)} [${setting.name}]: ${text}\n    full window: ${full}`,
          );
        }
      }
    }
  } finally {
    await engine.close();
  }
  return SETTINGS.map((setting, i) => ({
    model: label,
    setting: setting.name,
    withFull: agreement(texts[0]!, texts[i]!),
    withFasterWhisper: agreement(references, texts[i]!),
    meanMs: ms[i]! / clips.length,
    meanFrames:
      clips.reduce((sum, clip) => sum + (setting.frames(clip.pcm.length) || FULL_FRAMES), 0) / clips.length,
  }));
}

async function main(): Promise<void> {
  const output = process.argv[2];
  const { english, foreign } = await loadClips();
  const dir = await mkdtemp(path.join(tmpdir(), "bench-whisper-window-"));
  try {
    const tinyEn = path.join(dir, "ggml-tiny.en.bin");
    const base = path.join(dir, "ggml-base.bin");
    const convert = (model: RealModel, file: string) =>
      run(PYTHON, [
        path.join(PROJECT_ROOT, "scripts/convert-whisper-ct2-to-ggml.py"),
        realModelDir(model),
        file,
      ]);
    await Promise.all([convert("whisper-tiny.en", tinyEn), convert("whisper-base", base)]);
    // The references first, so that faster-whisper takes no CPU from the timed decodes.
    const tinyReferences = await fasterWhisper("whisper-tiny.en", "en", english);
    const baseReferences = [
      ...(await fasterWhisper("whisper-base", "en", english)),
      ...(await fasterWhisper(
        "whisper-base",
        "es",
        foreign.filter((clip) => clip.language === "es"),
      )),
      ...(await fasterWhisper(
        "whisper-base",
        "de",
        foreign.filter((clip) => clip.language === "de"),
      )),
    ];
    const baseClips = [
      ...english,
      ...foreign.filter((clip) => clip.language === "es"),
      ...foreign.filter((clip) => clip.language === "de"),
    ];
    const seconds = (clips: readonly Clip[]): string =>
      (clips.reduce((sum, clip) => sum + clip.pcm.length, 0) / 16_000).toFixed(0);
    console.log(
      `tiny.en: ${english.length} English clips (${seconds(english)} s); ` +
        `base: those and ${foreign.length} fleurs es/de (${seconds(baseClips)} s)`,
    );
    const rows = [
      ...(await benchModel("tiny.en", tinyEn, english, tinyReferences)),
      ...(await benchModel("base", base, baseClips, baseReferences)),
    ];
    console.log(
      "\n| setting | model | agreement with the full window | agreement with faster-whisper | mean frames | mean decode (ms) |",
    );
    console.log("| --- | --- | --- | --- | --- | --- |");
    for (const setting of SETTINGS) {
      for (const row of rows.filter((r) => r.setting === setting.name)) {
        console.log(
          `| ${row.setting} | ${row.model} | ${row.withFull.toFixed(3)} | ${row.withFasterWhisper.toFixed(3)} | ` +
            `${row.meanFrames.toFixed(0)} | ${row.meanMs.toFixed(0)} |`,
        );
      }
    }
    if (output) await writeFile(output, `${JSON.stringify(rows, null, 2)}\n`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
