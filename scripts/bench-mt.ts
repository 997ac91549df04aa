/**
 * Neural translation cost (transformers.js in its host process, src/engines/transformers-js/) on
 * real-size stand-ins (test/support/stand-in-models/translation.ts, `size: "real"`: Opus-MT's and
 * M2M100 418M's architectures, int8, random weights). A stand-in decodes exactly its source's tokens
 * plus one (it echoes the input), so a sentence costs what a real model's translation of the same
 * length costs; its tokenizer is built from the shared texts, so token counts are only close to the
 * real SentencePiece ones.
 *
 *   - latency: `translate` per FLORES dev English line (the engine may cut a line into sentences),
 *     one session calling in turn, and 8 sessions each calling in turn on their own lines;
 *   - saturation: 32 callers over a fixed set of lines, sentences per second;
 *   - both with onnxruntime's 1 thread (the engine's default) and with 2;
 *   - memory: the host's RSS with no model, after each direction is first used, and with
 *     `maxLoaded: 2` while three directions are used in turn (with and without `maxHostMiB`).
 *
 * The stand-ins are written once to /tmp/relay-bench-mt-models/ and reused by later runs (rewritten
 * when the stand-in's source changes).
 *
 *   npm run bench:mt
 */
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { AutoTokenizer, env, LogLevel } from "@huggingface/transformers";
import { createTransformersEngine, type TransformersEngine } from "../src/engines/transformers-js/index.js";
import type { LanguageCode } from "../src/core/contracts.js";
import { findMtModel } from "../src/engines/transformers-js/catalogue.js";
import { isMtPulled, mtModelDir, translationModels } from "../src/engines/transformers-js/models.js";
import { SHARED_DIR } from "../test/support/shared.js";
import { installStandInTranslation } from "../test/support/stand-in-models/install.js";

const CACHE = "/tmp/relay-bench-mt-models";
const MARIAN = ["opus-mt-en-es", "opus-mt-en-fr", "opus-mt-en-de"] as const;
const M2M100 = "m2m100-418m";
const TO: Record<string, LanguageCode> = {
  "opus-mt-en-es": "es",
  "opus-mt-en-fr": "fr",
  "opus-mt-en-de": "de",
  [M2M100]: "ja",
};
const LINES = 64;
const SESSIONS = 8;
const SATURATION_CALLERS = 32;
const SATURATION_LINES = 160;
const M2M100_LINES = 15;
const MiB = 1024 * 1024;

const started = performance.now();
const percentile = (values: number[], p: number) =>
  [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor((p / 100) * values.length))]!;
const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;

/** A stand-in is reused when it was written completely by the stand-in code as it is now. */
const STAND_IN_SOURCE = createHash("sha256")
  .update(
    ["translation.ts", "onnx-graph.ts"]
      .map((file) => readFileSync(new URL(`../test/support/stand-in-models/${file}`, import.meta.url)))
      .join("\n"),
  )
  .digest("hex");

function ensureStandIn(name: string): "cached" | string {
  const dir = mtModelDir(findMtModel(name)!, CACHE);
  const marker = path.join(dir, ".bench-mt-stand-in");
  if (
    isMtPulled(findMtModel(name)!, CACHE) &&
    existsSync(marker) &&
    readFileSync(marker, "utf8") === STAND_IN_SOURCE
  )
    return "cached";
  const start = performance.now();
  installStandInTranslation(CACHE, name, { size: "real" });
  writeFileSync(marker, STAND_IN_SOURCE);
  return `written in ${((performance.now() - start) / 1000).toFixed(1)} s`;
}

/** Bytes of a model's files on disk. */
function sizeOnDisk(dir: string): number {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile())
    .reduce((total, entry) => total + statSync(path.join(entry.parentPath, entry.name)).size, 0);
}

const mb = (bytes: number) => `${(bytes / 1e6).toFixed(0)} MB`;
const mib = (bytes: number) => (bytes / MiB).toFixed(0);

const cpus = os.cpus();
// The machine's 1-minute load before this run (other processes' work shows in every figure).
const loadAtStart = os.loadavg()[0]!.toFixed(1);
console.log(
  `Machine: ${cpus[0]?.model ?? "unknown CPU"} × ${cpus.length}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, Node.js ${process.version}, ${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC, load average ${loadAtStart}\n`,
);

const sizes = new Map<string, number>();
for (const name of [...MARIAN, M2M100]) {
  const how = ensureStandIn(name);
  sizes.set(name, sizeOnDisk(mtModelDir(findMtModel(name)!, CACHE)));
  console.log(`- stand-in ${name}: ${mb(sizes.get(name)!)} on disk, ${how} (cache: ${CACHE}/)`);
}
console.log();

const english = readFileSync(path.join(SHARED_DIR, "data/text/flores-dev/en.txt"), "utf8")
  .split("\n")
  .map((line) => line.trim())
  .filter(Boolean);
// Warm-up lines come from the end of the file, away from the measured ones.
const warmLines = english.slice(-3);

/** Mean source tokens per line with the model's stand-in tokenizer (`</s>` included). */
async function meanTokens(name: string, lines: readonly string[]): Promise<number> {
  env.allowRemoteModels = false;
  // Its warning that Marian has no "fast" tokenizer concerns tokenizing accuracy, not counts here.
  env.logLevel = LogLevel.ERROR;
  env.localModelPath = `${path.join(CACHE, "mt")}/`;
  const tokenizer = await AutoTokenizer.from_pretrained(name);
  return mean(lines.map((line) => tokenizer.encode(line).length));
}
const meanWords = (lines: readonly string[]) => mean(lines.map((line) => line.split(/\s+/u).length));

async function engineFor(name: string, threads: number) {
  const engine = await createTransformersEngine({ models: translationModels([name], CACHE), threads });
  await engine.warmUp?.();
  for (const line of warmLines) await engine.translate({ text: line, from: "en", to: TO[name]! });
  return engine;
}

interface Run {
  readonly latencies: number[];
  readonly seconds: number;
  readonly batches: number;
  readonly sentences: number;
}

/** `callers` loops, each translating its share of `lines` in turn. */
async function run(engine: TransformersEngine, to: LanguageCode, lines: readonly string[], callers: number) {
  const before = await engine.stats();
  const latencies: number[] = [];
  const start = performance.now();
  await Promise.all(
    Array.from({ length: callers }, async (_, c) => {
      for (let i = c; i < lines.length; i += callers) {
        const sent = performance.now();
        await engine.translate({ text: lines[i]!, from: "en", to });
        latencies.push(performance.now() - sent);
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  const after = await engine.stats();
  return {
    latencies,
    seconds,
    batches: after.batches - before.batches,
    sentences: after.sentences - before.sentences,
  } satisfies Run;
}

const rows: string[] = [];
function row(model: string, threads: number, callers: number, lines: readonly string[], result: Run): void {
  const { latencies, seconds, batches, sentences } = result;
  rows.push(
    `| ${model} (${mb(sizes.get(model)!)}) | ${threads} | ${callers} | ${lines.length} | ${percentile(latencies, 50).toFixed(0)} | ${percentile(latencies, 90).toFixed(0)} | ${(sentences / seconds).toFixed(1)} | ${batches} / ${sentences} (${(sentences / batches).toFixed(1)}) |`,
  );
}

// Memory first, on fresh hosts. `stats()` before anything is translated is the host with
// transformers.js and onnxruntime loaded but no model.
console.log("Memory (host RSS):\n");
console.log("| engine | step | loaded | host RSS (MiB) | Δ (MiB) | model on disk |");
console.log("| --- | --- | --- | --- | --- | --- |");
async function memorySteps(label: string, engine: TransformersEngine, steps: readonly string[]) {
  let previous = (await engine.stats()).host.rss;
  console.log(`| ${label} | fresh host, no model | none | ${mib(previous)} | | |`);
  for (const name of steps) {
    await engine.translate({ text: english[0]!, from: "en", to: TO[name]! });
    const { host } = await engine.stats();
    console.log(
      `| ${label} | en→${TO[name]} (${name}) | ${host.loaded.join(", ")} | ${mib(host.rss)} | ${host.rss >= previous ? "+" : ""}${mib(host.rss - previous)} | ${mb(sizes.get(name)!)} |`,
    );
    previous = host.rss;
  }
}
{
  const engine = await createTransformersEngine({
    models: translationModels([MARIAN[0], MARIAN[1], M2M100], CACHE),
  });
  await memorySteps("maxLoaded 4", engine, [MARIAN[0], MARIAN[1], M2M100]);
  await engine.close();
}
{
  const engine = await createTransformersEngine({
    models: translationModels([...MARIAN], CACHE),
    maxLoaded: 2,
  });
  await memorySteps("maxLoaded 2", engine, [...MARIAN, ...MARIAN, ...MARIAN]);
  await engine.close();
}
{
  // The same, with the host replaced once it passes 1 GiB (`maxHostMiB`; the default is 3 GiB).
  const engine = await createTransformersEngine({
    models: translationModels([...MARIAN], CACHE),
    maxLoaded: 2,
    maxHostMiB: 1024,
  });
  await memorySteps("maxLoaded 2, maxHostMiB 1024", engine, [...MARIAN, ...MARIAN, ...MARIAN]);
  console.log(`\n(hosts replaced for their memory: ${(await engine.stats()).recycled})`);
  await engine.close();
}

// Latency and throughput with each thread count (1 is the default). On a 2-core machine
// a second onnxruntime thread can cost more than it brings, hence both.
const lines = english.slice(0, LINES);
const saturationLines = english.slice(0, SATURATION_LINES);
const m2mLines = english.slice(0, M2M100_LINES);
for (const threads of [1, 2]) {
  const engine = await engineFor(MARIAN[0], threads);
  row(MARIAN[0], threads, 1, lines, await run(engine, "es", lines, 1));
  row(MARIAN[0], threads, SESSIONS, lines, await run(engine, "es", lines, SESSIONS));
  row(
    MARIAN[0],
    threads,
    SATURATION_CALLERS,
    saturationLines,
    await run(engine, "es", saturationLines, SATURATION_CALLERS),
  );
  await engine.close();
}
for (const threads of [1, 2]) {
  const engine = await engineFor(M2M100, threads);
  row(M2M100, threads, 1, m2mLines, await run(engine, "ja", m2mLines, 1));
  await engine.close();
}

console.log(
  `\nLatency per translate call (one FLORES dev English line; the engine cuts it into sentences), after warm-up.` +
    ` Lines: ${LINES} (${meanWords(lines).toFixed(1)} words, ${(await meanTokens(MARIAN[0], lines)).toFixed(1)} Opus-MT stand-in tokens a line);` +
    ` M2M100: the first ${M2M100_LINES} (${meanWords(m2mLines).toFixed(1)} words, ${(await meanTokens(M2M100, m2mLines)).toFixed(1)} tokens);` +
    ` saturation: ${SATURATION_LINES} lines (${meanWords(saturationLines).toFixed(1)} words).\n`,
);
console.log(
  "| model (on disk) | threads | callers | lines | latency p50 (ms) | latency p90 (ms) | sentences/s (as the engine cut them) | batches / sentences (mean batch) |",
);
console.log("| --- | --- | --- | --- | --- | --- | --- | --- |");
for (const line of rows) console.log(line);
console.log(
  `\nTotal ${((performance.now() - started) / 1000).toFixed(0)} s; load average ${os.loadavg()[0]!.toFixed(1)} at the end (${loadAtStart} at the start).`,
);
