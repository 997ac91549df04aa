/**
 * Model hosts under a hostile client's load (issue 29), on real-size stand-in models (random weights:
 * the compute and memory are real, the output is not; test/support/stand-in-models/):
 *
 *   A. hotword recognizers: the hotword host's resident memory after 1, 12 and 50 context changes of
 *      one account (each utterance opened with new names), and after three accounts' 12 each; and the
 *      recognizers still alive (the host keeps at most 2 per account, 4 in all, and frees the rest);
 *   B. abandoned speech: four 1,000-character unpunctuated speaks cancelled after 300 ms, then
 *      another account's "Hello there.": its first audio against the same request on an idle host,
 *      the host's memory, and the most passes ever running at once (the slots are 2);
 *   C. the deadlines' cost on the normal path: arming and clearing a request's timer, against a
 *      streaming-recognition request's round trip (160 ms of audio on the real-size recognizer).
 *
 *   npm run bench:hosts
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { createSherpaRecognizer } from "../src/engines/sherpa-onnx/recognizer.js";
import { createSherpaTtsEngine } from "../src/engines/sherpa-onnx/tts.js";
import { neuralVoiceModels, recognizerFiles } from "../src/engines/sherpa-onnx/models.js";
import { defaultVoice } from "../src/voices/library.js";
import { installStandInRecognizer, installStandInVoice } from "../test/support/stand-in-models/install.js";

const MiB = 2 ** 20;
const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
};
/** The n-th of many distinct names (hotwords leave out words with digits). */
const nameOf = (n: number) =>
  `Zeph${String.fromCharCode(97 + (n % 26))}${String.fromCharCode(97 + Math.floor(n / 26))}yr`;
const speechLike = (samples: number) =>
  Int16Array.from({ length: samples }, (_, i) => Math.round(8000 * Math.sin(i / 7) * Math.sin(i / 900)));

async function hotwords(dir: string): Promise<void> {
  await installStandInRecognizer(dir, { punctuation: false, size: "real" });
  const engine = await createSherpaRecognizer({ ...recognizerFiles(undefined, false, dir) });
  const utterance = async (context: string, account: string) => {
    const stream = await engine.createStream({ language: "en", context, account });
    await stream.write(speechLike(8_000));
    await stream.finish();
  };
  console.log("\nA. Hotword recognizers (real-size streaming zipformer stand-in)\n");
  console.log("| context changes | hotword host RSS (MiB) | recognizers alive | hotword sets kept |");
  console.log("|---|---|---|---|");
  const row = async (label: string) => {
    // Freed recognizers are finalized soon after the host collects: give it a moment.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const stats = await engine.hotwordStats();
    const sets = Object.entries(stats.hotwordSets)
      .map(([account, count]) => `${account}: ${count}`)
      .join(", ");
    console.log(`| ${label} | ${(stats.rss / MiB).toFixed(0)} | ${stats.recognizers} | ${sets} |`);
  };
  let change = 0;
  for (const upTo of [1, 12, 50]) {
    while (change < upTo) await utterance(nameOf(change++), "a");
    await row(`${upTo} (one account)`);
  }
  for (const account of ["b", "c"])
    for (let i = 0; i < 12; i++) await utterance(nameOf(account === "b" ? 100 + i : 200 + i), account);
  await row("+ 12 each for two more accounts");
  const plain = engine.hosts!().find((host) => host.host === "sherpa-onnx recognizer")!;
  console.log(`\nThe plain recognizer's host meanwhile: ${(plain.rssBytes / MiB).toFixed(0)} MiB.`);

  // C. The normal path: one accept round trip per 160 ms of audio.
  const stream = await engine.createStream({ language: "en" });
  const trips: number[] = [];
  for (let i = 0; i < 100; i++) {
    const start = performance.now();
    await stream.write(speechLike(2_560));
    trips.push(performance.now() - start);
  }
  stream.abort();
  const timers = 100_000;
  const start = performance.now();
  for (let i = 0; i < timers; i++) clearTimeout(setTimeout(() => undefined, 10_000));
  const perTimerUs = ((performance.now() - start) * 1000) / timers;
  console.log("\nC. What the deadlines cost on the normal path\n");
  console.log("| | time |");
  console.log("|---|---|");
  console.log(
    `| recognition round trip, 160 ms of audio (p50 / p90) | ${percentile(trips, 50).toFixed(2)} / ${percentile(trips, 90).toFixed(2)} ms |`,
  );
  console.log(`| arming and clearing one request's deadline | ${perTimerUs.toFixed(2)} µs |`);
  await engine.close();
}

async function abandonedSpeech(dir: string): Promise<void> {
  await installStandInVoice(dir, "piper-en_US-libritts_r-medium", { speakers: 1, size: "real" });
  const engine = await createSherpaTtsEngine({ models: neuralVoiceModels(undefined, dir) });
  const voice = defaultVoice("female");
  const firstAudio = async (account: string) => {
    const start = performance.now();
    const speech = engine.synthesizeStream!({ text: "Hello there.", language: "en", voice, account });
    const iterator = speech[Symbol.asyncIterator]();
    await iterator.next();
    const first = performance.now() - start;
    await iterator.return?.();
    return first;
  };
  await firstAudio("warm");
  const idle = [await firstAudio("y"), await firstAudio("y"), await firstAudio("y")];
  const before = await engine.passes();
  const unpunctuated = Array.from({ length: 200 }, (_, i) => `word${i % 10}`)
    .join(" ")
    .slice(0, 1_000);
  const abandoned = Array.from({ length: 4 }, async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error("the session closed")), 300);
    let chunks = 0;
    try {
      for await (const chunk of engine.synthesizeStream!(
        { text: unpunctuated, language: "en", voice, account: "x" },
        controller.signal,
      ))
        chunks += chunk.samples.length > 0 ? 1 : 0;
    } catch {
      // cancelled, as meant
    }
    return chunks;
  });
  await new Promise((resolve) => setTimeout(resolve, 300));
  const other = await firstAudio("y");
  const delivered = (await Promise.all(abandoned)).reduce((sum, n) => sum + n, 0);
  const after = await engine.passes();
  console.log("\nB. Four abandoned 1,000-character speaks (real-size Piper medium stand-in)\n");
  console.log("| | value |");
  console.log("|---|---|");
  console.log(
    `| another account's "Hello there.", first audio, idle host (median of 3) | ${percentile(idle, 50).toFixed(0)} ms |`,
  );
  console.log(`| the same, right after the four were abandoned | ${other.toFixed(0)} ms |`);
  console.log(`| audio chunks the four delivered before they were abandoned | ${delivered} |`);
  console.log(
    `| TTS host RSS before / after | ${(before.rss / MiB).toFixed(0)} / ${(after.rss / MiB).toFixed(0)} MiB |`,
  );
  console.log(
    `| passes run for the four (1,000 characters = 13 passes each) | ${after.total - before.total - 1} |`,
  );
  console.log(`| most passes at once (slots: 2) | ${after.mostAtOnce} |`);
  await engine.close();
}

const dir = await mkdtemp(path.join(tmpdir(), "relay-bench-hosts-"));
try {
  await hotwords(path.join(dir, "asr"));
  await abandonedSpeech(path.join(dir, "tts"));
} finally {
  await rm(dir, { recursive: true, force: true });
}
