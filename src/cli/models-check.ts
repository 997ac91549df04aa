/**
 * `relay models check`: a self-test of the neural models installed in the models directory, on
 * sentences shipped with relay (data/check/, see its README):
 *
 * - speech: each installed English voice (sherpa-onnx TTS) speaks the English sentences, the
 *   streaming recognizer (else the default whisper model) hears them, and the word error rate of
 *   what it heard is held to the recognizer's published LibriSpeech figure (whisper's: to a round
 *   trip measured on real weights);
 * - translation: each installed translation model (transformers.js) translates the FLORES-101
 *   sentences of each direction it serves, and their chrF is held to the model's published figures;
 * - clone: with a tone colour model and a speaker-embedding model installed, a voice's speech
 *   converted to each shipped speaker's tone colour must be more like that speaker, to the speaker
 *   model, than it was unconverted (models-check-clone.ts).
 *
 * Timings come with the scores: milliseconds per sentence, and the real-time factors (processing
 * time over the audio's duration) of speaking, hearing and converting. A check far below its limit
 * (src/engines/kit/models/check-metrics.ts says which and why), or a conversion no closer to its
 * speaker, makes the command exit 1; with nothing installed that can be checked it says what to
 * pull and exits 0.
 */
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import type { AsrEngine, LanguageCode, TtsEngine } from "../core/contracts.js";
import type { TransformersEngine } from "../engines/transformers-js/index.js";
import { pulledToneColorModel } from "../engines/openvoice/models.js";
import {
  chrF,
  chrfFloor,
  MEASURED_ROUND_TRIP_WER,
  measuredWerLimit,
  PUBLISHED_WER,
  werLimit,
  wordErrorRate,
} from "../engines/kit/models/check-metrics.js";
import { modelPath } from "../engines/kit/models/download.js";
import { DEFAULT_WHISPER_MODEL } from "../engines/routing/engine-config.js";
import { findModel } from "../engines/whisper-cpp/catalogue.js";
import { MT_CATALOGUE, type MtModelEntry, type MtQuality } from "../engines/transformers-js/catalogue.js";
import { isMtPulled, translationModels } from "../engines/transformers-js/models.js";
import { sherpaModelsOf, type SherpaEntryOf } from "../engines/sherpa-onnx/catalogue.js";
import {
  isPulled,
  knownModelsOf,
  neuralVoiceModels,
  recognizerFiles,
} from "../engines/sherpa-onnx/models.js";
import { CliError } from "./network.js";
import { printTable } from "./output.js";
import type { CloneOutcome } from "./models-check-clone.js";

/** data/check/ of the repository: two levels above this module, from src/cli/ and dist/cli/ alike. */
export const CHECK_DATA_DIR = fileURLToPath(new URL("../../data/check/", import.meta.url));

/** The columns of the table the check prints. */
export const CHECK_COLUMNS = [
  "CHECK",
  "MODEL",
  "SCORE",
  "LIMIT",
  "PUBLISHED",
  "MS/SENTENCE",
  "TTS RTF",
  "ASR RTF",
  "CLONE RTF",
  "RESULT",
];

/** The recognizer's input rate. */
const ASR_RATE = 16_000;
/**
 * Engines are given more time than the service gives them (10 s): the check waits for a slow
 * machine's answer rather than fail it, and reports how slow it was.
 */
const TIMEOUT_MS = 60_000;

export interface CheckOptions {
  /** Print each sentence's reference and what came out. */
  readonly verbose?: boolean;
}

interface Row {
  readonly check: string;
  readonly model: string;
  readonly score: string;
  readonly limit: string;
  readonly published: string;
  readonly msPerSentence: string;
  readonly ttsRtf: string;
  readonly asrRtf: string;
  readonly cloneRtf: string;
  readonly result: string;
  readonly failed: boolean;
}

/** A row for a check that could not run (its engine did not load, a sentence failed). */
function failedRow(check: string, model: string, error: unknown): Row {
  const message = (error instanceof Error ? error.message : String(error)).split("\n")[0]!;
  return {
    check,
    model,
    score: "-",
    limit: "-",
    published: "-",
    msPerSentence: "-",
    ttsRtf: "-",
    asrRtf: "-",
    cloneRtf: "-",
    result: `FAILED: ${message}`,
    failed: true,
  };
}

async function lines(file: string): Promise<string[]> {
  const text = await readFile(`${CHECK_DATA_DIR}${file}`, "utf8");
  return text
    .split("\n")
    .map((line) => line.trim())
    .filter(Boolean);
}

const progress = (message: string) => process.stderr.write(`${message}\n`);
const fixed = (value: number, digits = 1) => value.toFixed(digits);

function toPcm16(samples: Float32Array): Int16Array {
  const pcm = new Int16Array(samples.length);
  for (let i = 0; i < samples.length; i++)
    pcm[i] = Math.round(Math.max(-1, Math.min(1, samples[i]!)) * 32767);
  return pcm;
}

/** Prints what was meant and what came out, sentence by sentence. */
function printPairs(title: string, references: readonly string[], outputs: readonly string[]): void {
  console.log(`${title}:`);
  references.forEach((reference, i) => {
    console.log(`  want: ${reference}`);
    console.log(`  got:  ${outputs[i]}`);
  });
  console.log("");
}

/** One English voice speaks the sentences; the recognizer hears them. */
async function speechCheck(
  voice: SherpaEntryOf<"tts">,
  recognizer: { readonly name: string; readonly engine: AsrEngine },
  dir: string,
  sentences: readonly string[],
  options: CheckOptions,
): Promise<Row> {
  const check = "speech (en)";
  const model = `${voice.name} → ${recognizer.name}`;
  const [{ createSherpaTtsEngine }, { resample }, { defaultVoice }] = await Promise.all([
    import("../engines/sherpa-onnx/tts.js"),
    import("../audio/resampler.js"),
    import("../voices/library.js"),
  ]);
  progress(`speech: ${voice.name} speaks ${sentences.length} sentences, ${recognizer.name} hears them`);
  let tts: TtsEngine;
  try {
    tts = await createSherpaTtsEngine({
      models: neuralVoiceModels([voice.name], dir),
      timeoutMs: TIMEOUT_MS,
    });
  } catch (error) {
    return failedRow(check, model, error);
  }
  try {
    const heard: string[] = [];
    let speakingMs = 0;
    let hearingMs = 0;
    let audioSeconds = 0;
    for (const text of sentences) {
      const spoken = performance.now();
      const audio = await tts.synthesize({ text, language: "en", voice: defaultVoice("female") });
      speakingMs += performance.now() - spoken;
      audioSeconds += audio.samples.length / audio.sampleRate;
      const pcm = toPcm16(await resample(audio.samples, audio.sampleRate, ASR_RATE));
      const started = performance.now();
      const stream = await recognizer.engine.createStream({ language: "en" });
      await stream.write(pcm);
      heard.push((await stream.finish()).text);
      hearingMs += performance.now() - started;
    }
    if (options.verbose) printPairs(`${check}, ${model}`, sentences, heard);
    const wer = wordErrorRate(sentences, heard);
    const published = PUBLISHED_WER[recognizer.name];
    const measured = MEASURED_ROUND_TRIP_WER[recognizer.name];
    const limit = published ? werLimit(published) : measured ? measuredWerLimit(measured) : undefined;
    const failed = limit !== undefined && wer > limit;
    return {
      check,
      model,
      score: `WER ${fixed(wer)} %`,
      limit: limit === undefined ? "-" : `≤ ${fixed(limit)} %`,
      published: published
        ? `WER ${published.testClean} / ${published.testOther} % (LibriSpeech)`
        : measured
          ? `round trip ${fixed(measured.wer)} % (measured, a real Piper voice)`
          : "none",
      msPerSentence: fixed((speakingMs + hearingMs) / sentences.length, 0),
      ttsRtf: audioSeconds > 0 ? fixed(speakingMs / 1000 / audioSeconds, 3) : "-",
      asrRtf: audioSeconds > 0 ? fixed(hearingMs / 1000 / audioSeconds, 3) : "-",
      cloneRtf: "-",
      result: limit === undefined ? "measured (nothing published)" : failed ? "FAR BELOW" : "ok",
      failed,
    };
  } catch (error) {
    return failedRow(check, model, error);
  } finally {
    await tts.close();
  }
}

/** The published figures of a direction, from the test set its floor is taken from. */
function publishedOf(quality: readonly MtQuality[], direction: string): string {
  const own = quality.filter((q) => q.direction === direction);
  const chosen =
    own.find((q) => q.metric === "chrF") ?? own.find((q) => q.testSet.startsWith("FLORES")) ?? own[0];
  if (!chosen) return "none";
  const figures = own
    .filter((q) => q.testSet === chosen.testSet)
    .map((q) => `${q.metric} ${q.metric === "chrF" && q.value <= 1 ? fixed(q.value * 100) : q.value}`);
  return `${figures.join(", ")} (${chosen.testSet})`;
}

/** One translation model translates the sentences of each of its directions. */
async function translationChecks(
  entry: MtModelEntry,
  dir: string,
  flores: ReadonlyMap<LanguageCode, readonly string[]>,
  options: CheckOptions,
  notes: string[],
): Promise<Row[]> {
  const { createTransformersEngine } = await import("../engines/transformers-js/index.js");
  const checkOf = (from: string, to: string) => `translation ${from}-${to}`;
  progress(`translation: ${entry.name} (${entry.directions.map((d) => `${d.from}-${d.to}`).join(", ")})`);
  let engine: TransformersEngine | undefined;
  try {
    engine = await createTransformersEngine({
      models: translationModels([entry.name], dir),
      timeoutMs: TIMEOUT_MS,
    });
    await engine.warmUp?.();
  } catch (error) {
    await engine?.close();
    return entry.directions.map(({ from, to }) => failedRow(checkOf(from, to), entry.name, error));
  }
  const rows: Row[] = [];
  try {
    for (const { from, to } of entry.directions) {
      const check = checkOf(from, to);
      const sources = flores.get(from);
      const references = flores.get(to);
      if (!sources || !references) {
        rows.push(failedRow(check, entry.name, new Error(`no shipped sentences for ${from} or ${to}`)));
        continue;
      }
      try {
        const translations: string[] = [];
        const started = performance.now();
        for (const text of sources) translations.push(await engine.translate({ text, from, to }));
        const msPerSentence = (performance.now() - started) / sources.length;
        if (options.verbose) printPairs(`${check}, ${entry.name}`, references, translations);
        const direction = `${from}-${to}`;
        const score = chrF(references, translations);
        const floor = chrfFloor(entry.quality, direction, chrF(references, sources));
        notes.push(`${check}, ${entry.name}: floor ${fixed(floor.floor)} = ${floor.basis}`);
        const failed = score < floor.floor;
        rows.push({
          check,
          model: entry.name,
          score: `chrF ${fixed(score)}`,
          limit: `≥ ${fixed(floor.floor)} [${notes.length}]`,
          published: publishedOf(entry.quality, direction),
          msPerSentence: fixed(msPerSentence, 0),
          ttsRtf: "-",
          asrRtf: "-",
          cloneRtf: "-",
          result: failed ? "FAR BELOW" : "ok",
          failed,
        });
      } catch (error) {
        rows.push(failedRow(check, entry.name, error));
      }
    }
  } finally {
    await engine.close();
  }
  return rows;
}

/** A clone row: passes when the converted speech is more like the speaker than the unconverted. */
function cloneRow(model: string, { speaker, result }: CloneOutcome): Row {
  const check = `clone (${speaker})`;
  if ("error" in result) return failedRow(check, model, result.error);
  const failed = !(result.converted > result.unconverted);
  return {
    check,
    model,
    score: `cos ${fixed(result.converted, 3)}`,
    limit: `> ${fixed(result.unconverted, 3)} (unconverted)`,
    published: "none",
    msPerSentence: fixed(result.msPerSentence, 0),
    ttsRtf: fixed(result.ttsRtf, 3),
    asrRtf: "-",
    cloneRtf: fixed(result.cloneRtf, 3),
    result: failed ? "NOT CLOSER" : "ok",
    failed,
  };
}

/** `relay models check`: runs what is installed in `dir`; 0 when every check passes (or none can run). */
export async function checkModels(dir: string, options: CheckOptions = {}): Promise<number> {
  // Imported Piper voices too (`relay models import piper`).
  const englishVoices = knownModelsOf("tts", dir).filter(
    (entry) => entry.languages.includes("en") && isPulled(entry, dir),
  );
  const recognizers = sherpaModelsOf("streaming-asr").filter((entry) => isPulled(entry, dir));
  // Without a streaming recognizer, the default whisper model hears the voices (the service's own
  // recognizer then; it has real weights measured, MEASURED_ROUND_TRIP_WER).
  const whisperFile = modelPath(findModel(DEFAULT_WHISPER_MODEL)!, dir);
  const whisper = recognizers.length === 0 && existsSync(whisperFile);
  const translators = MT_CATALOGUE.filter((entry) => isMtPulled(entry, dir));
  const voiceToPull =
    sherpaModelsOf("tts").find((entry) => entry.default && entry.languages.includes("en"))?.name ?? "a voice";
  const recognizerToPull = sherpaModelsOf("streaming-asr")[0]?.name ?? "a recognizer";
  const speech = englishVoices.length > 0 && (recognizers.length > 0 || whisper);
  const toneColor = pulledToneColorModel(dir);
  const speakerModel = sherpaModelsOf("speaker").find((entry) => isPulled(entry, dir));
  const speakerToPull = sherpaModelsOf("speaker")[0]?.name ?? "a speaker model";
  const clone = toneColor !== undefined && speakerModel !== undefined;

  if (!speech && translators.length === 0 && !clone) {
    console.log(
      `nothing to check in ${dir}: no English neural voice with a recognizer, no translation model, ` +
        "and no tone colour model with a speaker model is installed" +
        // A voice alone is not checked: say it was seen, so a user does not think it was refused.
        (englishVoices.length > 0
          ? ` (English voices installed: ${englishVoices.map((entry) => entry.name).join(", ")}; they are checked through a streaming recognizer or whisper ${DEFAULT_WHISPER_MODEL}).\n`
          : ".\n") +
        `Pull them with \`relay models pull ${voiceToPull}\`, \`relay models pull ${recognizerToPull}\`, ` +
        `\`relay models pull tone-color\`, \`relay models pull ${speakerToPull}\` and ` +
        "`relay models pull mt en-es` (or any direction), then run `relay models check` again.",
    );
    return 0;
  }
  if (!speech) {
    console.log(
      englishVoices.length === 0
        ? `speech: skipped, no English neural voice is installed (\`relay models pull ${voiceToPull}\`)`
        : `speech: skipped, no recognizer is installed (\`relay models pull ${recognizerToPull}\` or \`relay models pull ${DEFAULT_WHISPER_MODEL}\`)`,
    );
  }
  if (!clone) {
    console.log(
      toneColor === undefined
        ? "clone: skipped, no tone colour model is installed (`relay models pull tone-color`)"
        : `clone: skipped, no speaker-embedding model is installed (\`relay models pull ${speakerToPull}\`)`,
    );
  }
  if (translators.length === 0)
    console.log("translation: skipped, no translation model is installed (`relay models pull mt en-es`)");

  if (!existsSync(CHECK_DATA_DIR)) {
    throw new CliError(
      `the check's sentences are missing: ${CHECK_DATA_DIR} (data/check/ of relay's source tree)`,
    );
  }
  const rows: Row[] = [];
  const notes: string[] = [];
  let floresCount = 0;
  if (speech) {
    const sentences = await lines("speech-en.txt");
    const [recognizerEntry] = recognizers;
    const recognizerName = recognizerEntry?.name ?? `whisper ${DEFAULT_WHISPER_MODEL}`;
    let engine: AsrEngine | undefined;
    try {
      if (recognizerEntry) {
        const { createSherpaRecognizer } = await import("../engines/sherpa-onnx/recognizer.js");
        // Scored without punctuation and case, so the punctuation model is not loaded.
        engine = await createSherpaRecognizer({
          ...recognizerFiles(recognizerEntry.name, false, dir),
          timeoutMs: TIMEOUT_MS,
        });
      } else {
        const { createWhisperCppEngine } = await import("../engines/whisper-cpp/index.js");
        engine = await createWhisperCppEngine({ modelPath: whisperFile, decodeTimeoutMs: TIMEOUT_MS });
      }
    } catch (error) {
      for (const voice of englishVoices)
        rows.push(failedRow("speech (en)", `${voice.name} → ${recognizerName}`, error));
    }
    if (engine) {
      try {
        for (const voice of englishVoices) {
          rows.push(await speechCheck(voice, { name: recognizerName, engine }, dir, sentences, options));
        }
      } finally {
        await engine.close();
      }
    }
  }
  if (clone) {
    const { cloneChecks, cloneModelLabel } = await import("./models-check-clone.js");
    const setup = { dir, toneColor, speaker: speakerModel, voice: englishVoices[0] };
    const model = cloneModelLabel(setup);
    progress(`clone: ${model} converts to each speaker of data/check/speakers/`);
    const outcomes = await cloneChecks({
      ...setup,
      recordings: `${CHECK_DATA_DIR}speakers/`,
      sentences: await lines("speech-en.txt"),
      timeoutMs: TIMEOUT_MS,
    });
    rows.push(...outcomes.map((outcome) => cloneRow(model, outcome)));
  }
  if (translators.length > 0) {
    const languages = new Set(
      translators.flatMap((entry) => entry.directions.flatMap((d) => [d.from, d.to])),
    );
    const flores = new Map<LanguageCode, string[]>();
    for (const language of languages) {
      const sentences = await lines(`flores-dev/${language}.txt`).catch(() => undefined);
      if (sentences) flores.set(language, sentences);
      floresCount = Math.max(floresCount, sentences?.length ?? 0);
    }
    for (const entry of translators)
      rows.push(...(await translationChecks(entry, dir, flores, options, notes)));
  }

  printTable(
    CHECK_COLUMNS,
    rows.map((row) => [
      row.check,
      row.model,
      row.score,
      row.limit,
      row.published,
      row.msPerSentence,
      row.ttsRtf,
      row.asrRtf,
      row.cloneRtf,
      row.result,
    ]),
  );
  console.log("");
  if (speech) {
    console.log(
      "speech: WER of the round trip (voice → recognizer) on data/check/speech-en.txt; limit: 3 × the published " +
        "LibriSpeech test-other WER + 10 points, or for whisper 2 × the round trip measured on real weights + 15.",
    );
  }
  if (clone) {
    console.log(
      "clone: the speaker model's cosine similarity of each speaker's recording (data/check/speakers/) and speech " +
        "converted to that speaker's tone colour; limit: the same speech's, unconverted (higher: more alike).",
    );
  }
  if (translators.length > 0) {
    console.log(
      `translation: chrF2 (sacrebleu's definition) on ${floresCount} FLORES-101 dev sentences (data/check/flores-dev/); ` +
        "the published figures are on FLORES-101 devtest or other test sets.",
    );
    notes.forEach((note, i) => console.log(`[${i + 1}] ${note}`));
  }
  console.log(
    "RTF: processing time over the speech's duration (below 1: faster than real time). Few sentences: the " +
      "limits catch a broken model, not a slightly worse one.",
  );
  const failed = rows.filter((row) => row.failed).length;
  if (failed > 0) {
    throw new CliError(
      `${failed} of ${rows.length} checks failed or fell short of their limits (\`--verbose\` shows each sentence)`,
    );
  }
  console.log(`all ${rows.length} checks passed`);
  return 0;
}
