/**
 * `relay models check`, run as a child process (the built CLI) on stand-in models
 * (test/support/stand-in-models/) in a models directory of its own. The stand-ins have random
 * weights and echo or hum rather than speak, hear or translate, so what is checked is the
 * mechanics: every installed model is found and run on the shipped sentences (data/check/), each
 * gets a row with its score, limit and timings, and the stand-ins — far below every published
 * figure, as they should be — make the command fail. No score or timing value is asserted.
 */
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  installStandInRecognizer,
  installStandInTranslation,
  installStandInVoice,
} from "../support/stand-in-models/install.js";
import { runScript, type Run } from "../support/run-script.js";

const HEADER = [
  "CHECK",
  "MODEL",
  "SCORE",
  "LIMIT",
  "PUBLISHED",
  "MS/SENTENCE",
  "TTS RTF",
  "ASR RTF",
  "RESULT",
];

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
    }
    for (const row of rows.filter((r) => r.CHECK!.startsWith("translation"))) {
      expect(row.SCORE).toMatch(/^chrF \d+\.\d$/u);
      expect(row.LIMIT).toMatch(/^≥ \d+\.\d \[\d\]$/u);
      expect(row["TTS RTF"]).toBe("-");
      expect(row["ASR RTF"]).toBe("-");
    }
    expect(rows.find((r) => r.CHECK === "translation en-es")!.PUBLISHED).toBe(
      "BLEU 26.7, COMET 0.8499 (FLORES-101 devtest)",
    );
    expect(rows.find((r) => r.CHECK === "translation en-ja")!.PUBLISHED).toBe("none");
    // The notes say where each floor comes from.
    expect(run.stdout).toMatch(/^\[1\] translation en-es, opus-mt-en-es: floor \d+\.\d = /mu);
    expect(run.stdout).toMatch(/^\[3\] translation en-ko, m2m100-418m: floor \d+\.\d = nothing published/mu);
    expect(run.stderr).toContain("relay: 5 of 5 checks failed or are far below the published figures");

    // --verbose shows each shipped sentence and what came out (the stand-in echoes its input).
    const verbose = await check(dir, "--verbose");
    expect(verbose.code).toBe(1);
    expect(verbose.stdout).toContain(
      "  want: The library opens early in the morning and closes late in the evening.",
    );
    expect(verbose.stdout).toMatch(
      / {2}got: {2}On Monday, scientists from the Stanford University .*\[es\]/u,
    );
  }, 180_000);

  it("skips a kind of model that is not installed, saying what to pull", async () => {
    const dir = await modelsDir("voice-and-translation");
    await installStandInVoice(dir, "piper-en_US-amy-medium", { speakers: 1 });
    installStandInTranslation(dir, "opus-mt-en-es");
    const run = await check(dir);
    expect(run.code).toBe(1);
    expect(run.stdout).toContain(
      "speech: skipped, no streaming recognizer is installed (`relay models pull streaming-zipformer-en`)",
    );
    expect(tableRows(run.stdout).map((row) => row.CHECK)).toEqual(["translation en-es"]);
  }, 120_000);

  it("with nothing checkable installed, says what to pull and exits 0", async () => {
    const empty = await modelsDir("empty");
    const run = await check(empty);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain(`nothing to check in ${empty}`);
    expect(run.stdout).toContain("`relay models pull piper-en_US-libritts_r-medium`");
    expect(run.stdout).toContain("`relay models pull streaming-zipformer-en`");
    expect(run.stdout).toContain("`relay models pull mt en-es`");
    expect(run.stdout).not.toContain("CHECK");

    // A recognizer alone has nothing to hear.
    const recognizerOnly = await modelsDir("recognizer-only");
    await installStandInRecognizer(recognizerOnly, { punctuation: false });
    const alone = await check(recognizerOnly);
    expect(alone.code, alone.stderr).toBe(0);
    expect(alone.stdout).toContain(`nothing to check in ${recognizerOnly}`);
  }, 60_000);
});
