/**
 * How PocketSphinx's confidence (the mean posterior of its words) separates English from other
 * languages: the check dubbing makes when source_lang is "auto" and the recognizers know English
 * only. Each clip goes through the dubbing pipeline with source_lang "auto" on the default
 * engines until the language is settled (extraction, levelling, VAD, recognition of the first
 * three speech segments); the table lists the confidence of each segment heard, the pooled score
 * the decision is made on, and whether the job was refused.
 *
 *   npm run bench:language-check
 */
import { readdirSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { readWavAsPcm16 } from "../src/audio/wav.js";
import { loadConfig } from "../src/config.js";
import { dubMedia, UnsupportedLanguageError } from "../src/dubbing/index.js";
import { MIN_CONFIDENCE, pooledConfidence, type Heard } from "../src/dubbing/stages/language-detection.js";
import { EngineRegistry } from "../src/engines/routing/registry.js";

const SHARED = process.env.SHARED_DIR ?? path.resolve(import.meta.dirname, "../../shared");
const SPEECH = path.resolve(SHARED, "data/speech");

const wavs = (dir: string) =>
  readdirSync(path.join(SPEECH, dir))
    .filter((file) => file.endsWith(".wav"))
    .sort()
    .map((file) => path.join(dir, file));

const CLIPS: { file: string; language: string }[] = [
  ...wavs("librivox-pocketsphinx").map((file) => ({ file, language: "en" })),
  ...wavs("ljspeech/wavs").map((file) => ({ file, language: "en" })),
  { file: "misc/jfk.wav", language: "en" },
  { file: "misc/librispeech-1995-1837-0001.wav", language: "en" },
  ...wavs("fleurs-dev").map((file) => ({ file, language: /fleurs-(\w+)-/u.exec(file)![1]! })),
  { file: "misc/aishell-BAC009S0724W0121.wav", language: "zh" },
];

const registry = await EngineRegistry.create(loadConfig({ LOG_LEVEL: "silent" }).engines);
// Each final the dubbing's recognizer produces is recorded: the first three are what it pools.
let heard: Heard[] = [];
const recognizer = registry.recognizer.bind(registry);
registry.recognizer = (language) => {
  const engine = recognizer(language)!;
  return {
    info: engine.info,
    capabilities: engine.capabilities,
    close: () => engine.close(),
    async createStream(options) {
      const stream = await engine.createStream(options);
      return {
        write: (pcm) => stream.write(pcm),
        partial: () => stream.partial(),
        abort: () => stream.abort(),
        async finish() {
          const hypothesis = await stream.finish();
          heard.push(hypothesis);
          return hypothesis;
        },
      };
    },
  };
};

/** Stops the job once its source language is settled: nothing after it matters here. */
class Settled extends Error {}

const work = await mkdtemp(path.join(tmpdir(), "bench-language-check-"));
const results: { language: string; pooled: number; refused: boolean }[] = [];
console.log("| clip | language | seconds | segments heard | confidence per segment | pooled | refused |");
console.log("| --- | --- | --- | --- | --- | --- | --- |");
for (const [index, clip] of CLIPS.entries()) {
  heard = [];
  let refused = false;
  try {
    await dubMedia({
      inputPath: path.join(SPEECH, clip.file),
      outputDir: path.join(work, String(index)),
      registry,
      sourceLang: "auto",
      targetLang: "es",
      onSourceLanguage: () => {
        throw new Settled();
      },
    });
  } catch (error) {
    if (error instanceof UnsupportedLanguageError) refused = true;
    else if (!(error instanceof Settled)) throw error;
  }
  const pooled = pooledConfidence(heard) ?? 1;
  results.push({ language: clip.language, pooled, refused });
  const seconds = (await readWavAsPcm16(path.join(SPEECH, clip.file))).length / 16_000;
  console.log(
    `| ${path.basename(clip.file)} | ${clip.language} | ${seconds.toFixed(1)} | ${heard.length} | ` +
      `${heard.map((h) => h.confidence?.toFixed(2) ?? "-").join(", ")} | ${pooled.toFixed(3)} | ${refused ? "yes" : ""} |`,
  );
}
await registry.close();
await rm(work, { recursive: true, force: true });

console.log(`\nRefused below ${MIN_CONFIDENCE} (src/dubbing/stages/language-detection.ts)\n`);
console.log("| language | clips | pooled min | pooled max | refused |");
console.log("| --- | --- | --- | --- | --- |");
for (const language of [...new Set(results.map((r) => r.language))]) {
  const own = results.filter((r) => r.language === language);
  const scores = own.map((r) => r.pooled);
  console.log(
    `| ${language} | ${own.length} | ${Math.min(...scores).toFixed(3)} | ${Math.max(...scores).toFixed(3)} | ` +
      `${own.filter((r) => r.refused).length} |`,
  );
}
