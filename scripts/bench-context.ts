/**
 * What a session's `context` does on the embedded engines (src/core/glossary.ts):
 *
 *   1. translation: on FLORES development sentences that contain names (the names our parser finds
 *      in each sentence, as a user would list them), the share of names kept in Apertium's Spanish
 *      without context and with it, per placeholder form, and the word-overlap F1 against FLORES's
 *      own Spanish (names kept in English where the reference translates them cost some); and the
 *      share of placeholders that survive the Opus-MT stand-in's tokenizer (real tokenizer files,
 *      an echoing model: this measures the tokenizer, not a translation);
 *   2. recognition: PocketSphinx's recall of the names in LJSpeech and LibriVox readings, without
 *      context and with the names as context (words its dictionary lacks are added, vocabulary.ts);
 *   3. cost: finalize → final translation at 6 concurrent sessions of the service (PocketSphinx,
 *      Apertium), without context and with a 30-term context whose names occur in the speech.
 *
 *   npm run bench:context
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import path from "node:path";
import { readWavAsPcm16 } from "../src/audio/wav.js";
import { glossaryFromContext, translationTerms } from "../src/core/glossary.js";
import { protectTerms, type PlaceholderForm } from "../src/core/term-protection.js";
import { createApertiumEngine } from "../src/engines/apertium/index.js";
import { createPocketSphinxEngine } from "../src/engines/pocketsphinx/index.js";
import { createTransformersEngine } from "../src/engines/transformers-js/index.js";
import { translationModels } from "../src/engines/transformers-js/models.js";
import { installStandInTranslation } from "../test/support/stand-in-models/install.js";
import { startServiceProcess } from "../test/support/service-process.js";
import { CLIPS, SHARED, loadClip, measureConcurrency } from "./realtime-load.js";

const FORMS: readonly PlaceholderForm[] = ["digits", "name", "tag"];
const SENTENCES = 120;
const SESSIONS = 6;
const API_KEY = "bench-key";

console.log(
  `Machine: ${cpus()[0]?.model ?? "unknown CPU"} × ${cpus().length}, Node.js ${process.version}, ` +
    `${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC, load average ${loadavg()[0]!.toFixed(1)}\n`,
);

// ---------------------------------------------------------------- 1. translation
const flores = (language: string) =>
  readFileSync(path.join(SHARED, `data/text/flores-dev/${language}.txt`), "utf8").split("\n");
const english = flores("en");
const spanish = flores("es");
const cases = english
  .map((text, i) => ({ text, reference: spanish[i]!, terms: translationTerms(glossaryFromContext(text)) }))
  .filter((c) => c.text.trim() && c.terms.length > 0)
  .slice(0, SENTENCES);
const names = cases.reduce((sum, c) => sum + c.terms.length, 0);
const keptIn = (translation: string, c: (typeof cases)[number]) =>
  c.terms.filter((term) => translation.includes(term.target)).length;
const words = (text: string) => text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
function f1(output: string, reference: string): number {
  const counts = new Map<string, number>();
  for (const word of words(reference)) counts.set(word, (counts.get(word) ?? 0) + 1);
  let hits = 0;
  const out = words(output);
  for (const word of out) {
    const left = counts.get(word) ?? 0;
    if (left > 0) {
      hits++;
      counts.set(word, left - 1);
    }
  }
  return (2 * hits) / Math.max(1, out.length + words(reference).length);
}

const apertium = await createApertiumEngine({});
const translate = (text: string) => apertium.translate({ text, from: "en", to: "es" });
const plain = await Promise.all(cases.map((c) => translate(c.text)));
const rows: string[] = [
  `| Apertium en→es, ${cases.length} sentences, ${names} names | names kept | placeholders back | F1 vs FLORES es |`,
  "| --- | --- | --- | --- |",
  `| without context | ${pct(cases.reduce((s, c, i) => s + keptIn(plain[i]!, c), 0) / names)} | – | ${mean(cases.map((c, i) => f1(plain[i]!, c.reference))).toFixed(3)} |`,
];
for (const form of FORMS) {
  let kept = 0;
  let back = 0;
  const scores: number[] = [];
  for (const [i, c] of cases.entries()) {
    const shielded = protectTerms(c.text, c.terms, form);
    const restored = shielded && shielded.restore(await translate(shielded.text));
    if (restored !== undefined) back++;
    const output = restored ?? plain[i]!;
    kept += keptIn(output, c);
    scores.push(f1(output, c.reference));
  }
  rows.push(
    `| with context, \`${form}\` placeholders${form === apertium.capabilities.placeholder ? " (used)" : ""} | ${pct(kept / names)} | ${back} / ${cases.length} | ${mean(scores).toFixed(3)} |`,
  );
}
await apertium.close();
console.log(rows.join("\n"), "\n");

const standIns = mkdtempSync(path.join(tmpdir(), "relay-bench-context-"));
installStandInTranslation(standIns, "opus-mt-en-es");
const opus = await createTransformersEngine({ models: translationModels(["opus-mt-en-es"], standIns) });
const opusRows = ["| Opus-MT en-es stand-in (tokenizer round trip) | placeholders back |", "| --- | --- |"];
for (const form of FORMS) {
  let back = 0;
  for (const c of cases.slice(0, 40)) {
    const shielded = protectTerms(c.text, c.terms, form);
    if (shielded?.restore(await opus.translate({ text: shielded.text, from: "en", to: "es" })) !== undefined)
      back++;
  }
  opusRows.push(`| \`${form}\`${form === opus.capabilities.placeholder ? " (used)" : ""} | ${back} / 40 |`);
}
await opus.close();
console.log(opusRows.join("\n"), "\n");

// ---------------------------------------------------------------- 2. recognition
const READINGS: readonly (readonly [string, string])[] = [
  ["ljspeech/wavs/LJ001-0031.wav", "Sweynheim, Pannartz, Subiaco, Rome"],
  ["ljspeech/wavs/LJ001-0024.wav", "Maintz, Peter Schoeffer"],
  ["ljspeech/wavs/LJ001-0027.wav", "Schoeffer"],
  ["ljspeech/wavs/LJ001-0028.wav", "Strasburg, Basle, Paris, Lubeck"],
  ["ljspeech/wavs/LJ001-0030.wav", "Italy, Germany, France"],
  ["ljspeech/wavs/LJ001-0003.wav", "Chinese, Netherlands"],
  ["ljspeech/wavs/LJ001-0007.wav", "Gutenberg"],
  ["ljspeech/wavs/LJ001-0021.wav", "Gutenberg Bible"],
  ["ljspeech/wavs/LJ001-0014.wav", "Middle Ages"],
  ["librivox-pocketsphinx/sense_and_sensibility_01_austen_64kb-0870.wav", "John Dashwood"],
];
const pocketsphinx = await createPocketSphinxEngine({
  maxDecoders: 2,
  decoderSettings: { "-maxhmmpf": "2000", "-fwdflat": "no", "-bestpath": "yes" },
});
async function recognize(pcm: Int16Array, context: string): Promise<string> {
  const stream = await pocketsphinx.createStream({ language: "en", glossary: glossaryFromContext(context) });
  for (let i = 0; i < pcm.length; i += 3200) await stream.write(pcm.subarray(i, i + 3200));
  return (await stream.finish()).text;
}
const recall = { without: 0, with: 0, total: 0 };
const recallRows = [
  "| reading | names | heard without context | heard with it |",
  "| --- | --- | --- | --- |",
];
for (const [file, context] of READINGS) {
  const pcm = await readWavAsPcm16(path.join(SHARED, "data/speech", file));
  const nameWords = context.split(/[,\s]+/u).filter(Boolean);
  const found = (text: string) => nameWords.filter((word) => new RegExp(`\\b${word}\\b`, "iu").test(text));
  const [without, withContext] = [found(await recognize(pcm, "")), found(await recognize(pcm, context))];
  recall.without += without.length;
  recall.with += withContext.length;
  recall.total += nameWords.length;
  recallRows.push(
    `| ${path.basename(file, ".wav")} | ${context} | ${without.join(", ") || "–"} | ${withContext.join(", ") || "–"} |`,
  );
}
recallRows.push(
  `| **all** | ${recall.total} name words | ${pct(recall.without / recall.total)} | ${pct(recall.with / recall.total)} |`,
);
await pocketsphinx.close();
console.log(recallRows.join("\n"), "\n");

// ---------------------------------------------------------------- 3. cost
// 30 terms: the names the clips' speakers say, then names that occur nowhere.
const spoken = [
  "John Dashwood",
  "Gutenberg",
  "Americans",
  "Schoeffer",
  "Maintz",
  "Italy",
  "Germany",
  "Middle Ages",
];
const others = Array.from({ length: 30 - spoken.length }, (_, i) => `Zelinski${String.fromCharCode(97 + i)}`);
const CONTEXT = [...spoken, ...others].join(", ");

const clips = await Promise.all(CLIPS.map(loadClip));
const service = await startServiceProcess("bench-context", {
  API_KEYS: API_KEY,
  DATA_DIR: mkdtempSync(path.join(tmpdir(), "relay-bench-context-data-")),
  RATE_LIMIT_PER_MINUTE: "10000",
});
// A warm-up round, then the two settings in turn, three rounds, so the machine's drift falls on
// both. PocketSphinx decoders carry the words they were given, so the first round with the context
// adds them to the decoders its sessions take, and later rounds find decoders ready.
await measureConcurrency(service.baseUrl, API_KEY, clips.slice(0, 2), 2);
const costRows = [
  `| round | ${SESSIONS} sessions × ${clips.length} clips | finalize → final translation p50 | p90 | missing |`,
  "| --- | --- | --- | --- | --- |",
];
for (let round = 1; round <= 3; round++) {
  for (const [label, params] of [
    ["no context", {}],
    ["30-term context", { context: CONTEXT }],
  ] as const) {
    const run = await measureConcurrency(service.baseUrl, API_KEY, clips, SESSIONS, params);
    costRows.push(
      `| ${round} | ${label} | ${run.finalizeToFinalTranslationP50Ms} ms | ${run.finalizeToFinalTranslationP90Ms} ms | ${run.missingFinals} |`,
    );
  }
}
service.child.kill("SIGTERM");
console.log(costRows.join("\n"));

function pct(share: number): string {
  return `${(100 * share).toFixed(1)} %`;
}
function mean(values: readonly number[]): number {
  return values.reduce((a, b) => a + b, 0) / Math.max(1, values.length);
}
