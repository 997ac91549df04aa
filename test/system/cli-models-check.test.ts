/**
 * `relay models check`, run as a child process (the built CLI) on stand-in models
 * (test/support/stand-in-models/) in a models directory of its own. The stand-ins have random
 * weights and echo or hum rather than speak, hear or translate, so what is checked is the
 * mechanics: every installed model is found and run on the shipped sentences and recordings
 * (data/check/), each gets a row with its score, limit and timings, and the stand-ins — far below
 * every published figure, as they should be — make the command fail. No score or timing value is
 * asserted, nor the clone rows' verdict (the stand-in converter hums, so either may come out).
 */
import { mkdir, mkdtemp, rename, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findSherpaModelOf } from "../../src/engines/sherpa-onnx/catalogue.js";
import { sherpaModelDir } from "../../src/engines/sherpa-onnx/models.js";
import {
  installStandInRecognizer,
  installStandInToneColor,
  installStandInTranslation,
  installStandInVoice,
} from "../support/stand-in-models/install.js";
import { writeSpeakerEmbeddingStandIn } from "../support/stand-in-models/speaker-embedding.js";
import { runScript, type Run } from "../support/run-script.js";
import { CHECK_COLUMNS } from "../../src/cli/models-check.js";

const HEADER = CHECK_COLUMNS;

let tmp: string;

beforeAll(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), "relay-cli-models-check-"));
});
afterAll(async () => {
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

const check = (dir: string, ...args: string[]): Promise<Run> =>
  runScript("src/cli/main.ts", ["models", "check", ...args], { MODELS_DIR: dir });

async function modelsDir(name: string): Promise<string> {
  const dir = path.join(tmp, name);
  await mkdir(dir, { recursive: true });
  return dir;
}

/** The stand-in speaker-embedding model where `relay models pull speaker-campplus-en` puts it. */
async function installStandInSpeakerModel(dir: string): Promise<void> {
  const entry = findSherpaModelOf("speaker", "speaker-campplus-en")!;
  const { model } = writeSpeakerEmbeddingStandIn({ dir: path.join(dir, ".stand-in-speaker") });
  await mkdir(sherpaModelDir(entry, dir), { recursive: true });
  await rename(model, path.join(sherpaModelDir(entry, dir), entry.speaker.model));
  await rm(path.join(dir, ".stand-in-speaker"), { recursive: true, force: true });
}

/** The table's rows as records by column (printTable separates columns by two spaces or more). */
function tableRows(stdout: string): Record<string, string>[] {
  const lines = stdout.split("\n");
  const start = lines.findIndex((line) => line.startsWith("CHECK "));
  expect(start, stdout).toBeGreaterThanOrEqual(0);
  expect(lines[start]!.split(/ {2,}/u)).toEqual(HEADER);
  const rows: Record<string, string>[] = [];
  for (const line of lines.slice(start + 1)) {
    if (line.trim() === "") break;
    const cells = line.split(/ {2,}/u);
    rows.push(Object.fromEntries(HEADER.map((column, i) => [column, cells[i] ?? ""])));
  }
  return rows;
}

const NUMBER = /^\d+(\.\d+)?$/u;

/** A clone row: the cosine similarities and timings are there, whichever the verdict. */
function expectCloneRow(row: Record<string, string>, model: string): void {
  expect(row.MODEL, JSON.stringify(row)).toBe(model);
  expect(row.SCORE).toMatch(/^cos -?\d\.\d{3}$/u);
  expect(row.LIMIT).toMatch(/^> -?\d\.\d{3} \(unconverted\)$/u);
  expect(row.PUBLISHED).toBe("none");
  expect(row.RESULT).toMatch(/^(ok|NOT CLOSER)$/u);
  expect(row["MS/SENTENCE"]).toMatch(NUMBER);
  expect(row["TTS RTF"]).toMatch(NUMBER);
  expect(row["ASR RTF"]).toBe("-");
  expect(row["CLONE RTF"]).toMatch(NUMBER);
}

/** The shipped recordings (data/check/speakers/), one clone row each. */
const CLONE_CHECKS = ["clone (man-librivox)", "clone (woman-ljspeech)"];

describe("relay models check", () => {
  it("runs every installed voice, the recognizer and every translation direction, and fails the stand-ins", async () => {
    const dir = await modelsDir("all");
    await installStandInVoice(dir, "piper-en_US-amy-medium", { speakers: 1 });
    await installStandInVoice(dir, "piper-en_US-libritts_r-medium", { speakers: 2 });
    // A Spanish voice has no English sentences to speak: not part of the speech check.
    await installStandInVoice(dir, "piper-es_ES-sharvard-medium", {
      speakers: 1,
      voice: "es",
      language: "Spanish",
    });
    await installStandInRecognizer(dir, { punctuation: true });
    installStandInTranslation(dir, "opus-mt-en-es");
    installStandInTranslation(dir, "m2m100-418m");

    const run = await check(dir);
    expect(run.code, run.stderr).toBe(1);
    const rows = tableRows(run.stdout);
    expect(rows.map((row) => `${row.CHECK} | ${row.MODEL}`)).toEqual([
      "speech (en) | piper-en_US-libritts_r-medium → streaming-zipformer-en",
      "speech (en) | piper-en_US-amy-medium → streaming-zipformer-en",
      "translation en-es | opus-mt-en-es",
      "translation en-ja | m2m100-418m",
      "translation en-ko | m2m100-418m",
    ]);
    // No tone colour model: no clone row, and a line says what to pull.
    expect(run.stdout).toContain(
      "clone: skipped, no tone colour model is installed (`relay models pull tone-color`)",
    );
    for (const row of rows) {
      // Every check ran (none FAILED to load) and came out far below its limit.
      expect(row.RESULT, JSON.stringify(row)).toBe("FAR BELOW");
      expect(row["MS/SENTENCE"]).toMatch(NUMBER);
    }
    for (const row of rows.filter((r) => r.CHECK === "speech (en)")) {
      expect(row.SCORE).toMatch(/^WER \d+\.\d %$/u);
      expect(row.LIMIT).toBe("≤ 33.4 %");
      expect(row.PUBLISHED).toBe("WER 3.1 / 7.8 % (LibriSpeech)");
      expect(row["TTS RTF"]).toMatch(NUMBER);
      expect(row["ASR RTF"]).toMatch(NUMBER);
      expect(row["CLONE RTF"]).toBe("-");
    }
    for (const row of rows.filter((r) => r.CHECK!.startsWith("translation"))) {
      expect(row.SCORE).toMatch(/^chrF \d+\.\d$/u);
      expect(row.LIMIT).toMatch(/^≥ \d+\.\d \[\d\]$/u);
      expect(row["TTS RTF"]).toBe("-");
      expect(row["ASR RTF"]).toBe("-");
      expect(row["CLONE RTF"]).toBe("-");
    }
    expect(rows.find((r) => r.CHECK === "translation en-es")!.PUBLISHED).toBe(
      "BLEU 26.7, COMET 0.8499 (FLORES-101 devtest)",
    );
    expect(rows.find((r) => r.CHECK === "translation en-ja")!.PUBLISHED).toBe("none");
    // The notes say where each floor comes from.
    expect(run.stdout).toMatch(/^\[1\] translation en-es, opus-mt-en-es: floor \d+\.\d = /mu);
    expect(run.stdout).toMatch(/^\[3\] translation en-ko, m2m100-418m: floor \d+\.\d = nothing published/mu);
    expect(run.stderr).toContain("relay: 5 of 5 checks failed or fell short of their limits");

    // --verbose shows each shipped sentence and what came out (the stand-in echoes its input).
    const verbose = await check(dir, "--verbose");
    expect(verbose.code).toBe(1);
    expect(verbose.stdout).toContain(
      "  want: The library opens early in the morning and closes late in the evening.",
    );
    expect(verbose.stdout).toMatch(
      / {2}got: {2}On Monday, scientists from the Stanford University .*\[es\]/u,
    );
  });

  it("skips a kind of model that is not installed, saying what to pull; clones with the English voice", async () => {
    const dir = await modelsDir("voice-translation-and-clone");
    await installStandInVoice(dir, "piper-en_US-amy-medium", { speakers: 1 });
    installStandInTranslation(dir, "opus-mt-en-es");
    await installStandInToneColor(dir);
    await installStandInSpeakerModel(dir);
    const run = await check(dir);
    expect(run.code).toBe(1);
    expect(run.stdout).toContain(
      "speech: skipped, no recognizer is installed (`relay models pull streaming-zipformer-en` or `relay models pull base`)",
    );
    const rows = tableRows(run.stdout);
    expect(rows.map((row) => row.CHECK)).toEqual([...CLONE_CHECKS, "translation en-es"]);
    for (const row of rows.slice(0, CLONE_CHECKS.length))
      expectCloneRow(row, "piper-en_US-amy-medium → tone-color (speaker-campplus-en)");
    expect(run.stdout).toMatch(/^clone: the speaker model's cosine similarity /mu);
  });

  it("with a tone colour and a speaker model alone, clones eSpeak NG's speech", async () => {
    const dir = await modelsDir("clone-only");
    await installStandInToneColor(dir);
    await installStandInSpeakerModel(dir);
    const run = await check(dir);
    expect(run.stdout).not.toContain("nothing to check");
    const rows = tableRows(run.stdout);
    expect(rows.map((row) => row.CHECK)).toEqual(CLONE_CHECKS);
    for (const row of rows) expectCloneRow(row, "espeak-ng → tone-color (speaker-campplus-en)");
    const failed = rows.filter((row) => row.RESULT !== "ok").length;
    expect(run.code, run.stderr).toBe(failed > 0 ? 1 : 0);
  });

  it("with nothing checkable installed, says what to pull and exits 0", async () => {
    const empty = await modelsDir("empty");
    const run = await check(empty);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain(`nothing to check in ${empty}`);
    expect(run.stdout).toContain("`relay models pull piper-en_US-libritts_r-medium`");
    expect(run.stdout).toContain("`relay models pull streaming-zipformer-en`");
    expect(run.stdout).toContain("`relay models pull mt en-es`");
    expect(run.stdout).toContain("`relay models pull tone-color`");
    expect(run.stdout).not.toContain("CHECK");

    // A recognizer alone has nothing to hear; a speaker model without a tone colour model, nothing to judge.
    const recognizerOnly = await modelsDir("recognizer-only");
    await installStandInRecognizer(recognizerOnly, { punctuation: false });
    await installStandInSpeakerModel(recognizerOnly);
    const alone = await check(recognizerOnly);
    expect(alone.code, alone.stderr).toBe(0);
    expect(alone.stdout).toContain(`nothing to check in ${recognizerOnly}`);
  });
});
