/**
 * Recognizers' speed:
 * 1. PocketSphinx decoder settings: word error rate, CPU and end-of-utterance time on the LibriVox
 *    clips in ../shared/data/speech (streamed in 32 ms writes with a partial hypothesis every 160 ms,
 *    as the pipeline does). Chooses the `POCKETSPHINX_SETTINGS` default.
 * 2. whisper.cpp: the time of one final decode of a 10 s utterance (jfk.wav) through the engine, with
 *    the addon built for this CPU and with the prebuilt fallback, on whisper.cpp's test models (real
 *    tiny/base architecture, random weights: real compute, meaningless text — only time counts).
 *
 *   npm run bench:asr              (both)
 *   npm run bench:asr -- whisper   (whisper.cpp only)
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { readWavAsPcm16 } from "../src/audio/wav.js";
import { createPocketSphinxEngine } from "../src/engines/pocketsphinx/index.js";
import type { AsrStreamOptions } from "../src/core/contracts.js";
import { createWhisperCppEngine } from "../src/engines/whisper-cpp/index.js";
import { wordEdits } from "../src/engines/kit/models/check-metrics.js";

const SHARED = process.env.SHARED_DIR ?? path.resolve(import.meta.dirname, "../../shared");
const DIR = path.resolve(SHARED, "data/speech/librivox-pocketsphinx");

const PROFILES: Record<string, Record<string, string>> = {
  "library defaults": {},
  "-maxhmmpf 3000": { "-maxhmmpf": "3000" },
  "-fwdflat no -bestpath no": { "-fwdflat": "no", "-bestpath": "no" },
  "-maxhmmpf 3000 -fwdflat no -bestpath yes": { "-maxhmmpf": "3000", "-fwdflat": "no", "-bestpath": "yes" },
  "-maxhmmpf 2000 -fwdflat no -bestpath yes (default)": {
    "-maxhmmpf": "2000",
    "-fwdflat": "no",
    "-bestpath": "yes",
  },
  "-maxhmmpf 1500 -fwdflat no -bestpath yes": { "-maxhmmpf": "1500", "-fwdflat": "no", "-bestpath": "yes" },
};

async function benchPocketSphinx(): Promise<void> {
  const references = readFileSync(path.join(DIR, "transcription"), "utf8")
    .trim()
    .split("\n")
    .map((line) => /<s> (.*) <\/s> \((.*)\)/u.exec(line)!)
    .map((match) => ({ words: match[1]!.split(" "), file: `${match[2]}.wav` }));
  references.push({ words: "go forward ten meters".split(" "), file: "goforward.wav" });
  const clips = await Promise.all(
    references.map(async (r) => ({ ...r, pcm: await readWavAsPcm16(path.join(DIR, r.file)) })),
  );
  const totalWords = references.reduce((sum, r) => sum + r.words.length, 0);
  const audioSeconds = clips.reduce((sum, clip) => sum + clip.pcm.length / 16_000, 0);

  console.log(`${clips.length} clips, ${totalWords} words, ${audioSeconds.toFixed(1)} s\n`);
  console.log("| settings | WER | CPU s per audio s | finish() mean (ms) |");
  console.log("| --- | --- | --- | --- |");
  for (const [name, settings] of Object.entries(PROFILES)) {
    const engine = await createPocketSphinxEngine({ decoderSettings: settings, maxDecoders: 1 });
    let errors = 0;
    let finishMs = 0;
    const cpuBefore = process.cpuUsage();
    for (const clip of clips) {
      const stream = await engine.createStream({ language: "en" });
      for (let i = 0; i < clip.pcm.length; i += 512) {
        await stream.write(clip.pcm.subarray(i, i + 512));
        if (i % 2560 === 2048) await stream.partial();
      }
      const started = performance.now();
      const { text } = await stream.finish();
      finishMs += performance.now() - started;
      const words = text
        .replace(/\bmr\b/gu, "mister")
        .replace(/\./gu, "")
        .split(" ")
        .filter(Boolean);
      errors += wordEdits(clip.words, words);
    }
    const cpu = process.cpuUsage(cpuBefore);
    const cpuPerSecond = (cpu.user + cpu.system) / 1e6 / audioSeconds;
    console.log(
      `| ${name} | ${(errors / totalWords).toFixed(3)} | ${cpuPerSecond.toFixed(3)} | ${(finishMs / clips.length).toFixed(0)} |`,
    );
    await engine.close();
  }
}

/** Median of a few timings. */
function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function benchWhisper(): Promise<void> {
  const jfk = await readWavAsPcm16(path.resolve(SHARED, "data/speech/misc/jfk.wav"));
  const utterance = jfk.subarray(0, 10 * 16_000);
  const cases: { binding: "native" | "prebuilt"; fit: boolean; language: AsrStreamOptions; runs: number }[] =
    [
      { binding: "prebuilt", fit: false, language: { language: "en" }, runs: 1 },
      { binding: "native", fit: false, language: { language: "en" }, runs: 3 },
      { binding: "native", fit: true, language: { language: "en" }, runs: 3 },
      { binding: "native", fit: true, language: { language: "auto", candidates: ["en", "es"] }, runs: 3 },
    ];
  console.log("\n10 s utterance (jfk.wav), one final decode, 2 threads\n");
  console.log("| model | binding | encoder window | language | decode s (median) | words out |");
  console.log("| --- | --- | --- | --- | --- | --- |");
  for (const size of ["tiny", "base"]) {
    for (const c of cases) {
      let engine;
      try {
        engine = await createWhisperCppEngine({
          modelPath: path.resolve(SHARED, `models/whisper-cpp-test/for-tests-ggml-${size}.bin`),
          binding: c.binding,
          fitEncoderWindow: c.fit,
          threads: 2,
          maxConcurrent: 1,
          decodeTimeoutMs: 600_000,
        });
      } catch (error) {
        console.log(`| ${size} | ${c.binding} | – | – | unavailable: ${(error as Error).message} | – |`);
        continue;
      }
      const times: number[] = [];
      let words = 0;
      for (let run = 0; run < c.runs; run++) {
        const stream = await engine.createStream(c.language);
        await stream.write(utterance);
        const started = performance.now();
        words = (await stream.finish()).words.length;
        times.push((performance.now() - started) / 1000);
      }
      const language =
        c.language.language === "auto" ? `auto among ${c.language.candidates!.join(", ")}` : "en";
      console.log(
        `| ${size} | ${c.binding} | ${c.fit ? "fitted (10 s + 1.3 s)" : "30 s"} | ${language} | ${median(times).toFixed(2)} | ${words} |`,
      );
      await engine.close();
    }
  }
}

if (process.argv[2] !== "whisper") await benchPocketSphinx();
await benchWhisper();
