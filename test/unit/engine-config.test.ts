import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../src/config.js";
import { findModel } from "../../src/engines/whisper-cpp/catalogue.js";
import { installStandInToneColor } from "../support/stand-in-models/install.js";

/** The engines file and its environment overrides, as `loadConfig` reads them at start-up. */
const dir = mkdtempSync(path.join(tmpdir(), "relay-engines-"));
let files = 0;

function enginesFile(content: unknown): string {
  const file = path.join(dir, `engines-${files++}.json`);
  writeFileSync(file, typeof content === "string" ? content : JSON.stringify(content));
  return file;
}

function load(env: Record<string, string>) {
  return loadConfig({ DATA_DIR: dir, ...env });
}

function problem(env: Record<string, string>): string {
  try {
    load(env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error("expected the configuration to be refused");
}

const remote = { engine: "openai", baseUrl: "http://gpu:8000/v1", model: "m", languages: ["en", "de"] };

describe("engine configuration", () => {
  it("defaults to the embedded engines", () => {
    const { engines } = load({});
    expect(engines.asr).toEqual([{ engine: "pocketsphinx" }]);
    expect(engines.mt).toEqual([{ engine: "apertium" }]);
    expect(engines.tts).toEqual([{ engine: "espeak-ng" }]);
    expect(engines.pivotLanguages).toEqual(["en", "es"]);
    expect(engines.modelsDir).toBe(path.join(dir, "models"));
  });

  it("converts clone voices with a pulled tone colour model unless VOICE_CLONE=off", async () => {
    const models = mkdtempSync(path.join(dir, "models-"));
    expect(load({ MODELS_DIR: models }).engines.families.openvoice).toEqual({
      enabled: true,
      model: undefined,
    });
    await installStandInToneColor(models);
    expect(load({ MODELS_DIR: models }).engines.families.openvoice).toEqual({
      enabled: true,
      model: "tone-color",
    });
    expect(load({ MODELS_DIR: models, VOICE_CLONE: "off" }).engines.families.openvoice).toEqual({
      enabled: false,
      model: undefined,
    });
    expect(problem({ VOICE_CLONE: "yes" })).toMatch(/VOICE_CLONE/u);
  });

  it("leaves the whisper.cpp build to where the engines are built once the default model is pulled", () => {
    const models = mkdtempSync(path.join(dir, "models-"));
    writeFileSync(path.join(models, findModel("base")!.file), "");
    const { engines } = load({ MODELS_DIR: models });
    expect(engines.asr).toEqual([{ engine: "whisper-cpp", model: "base" }, { engine: "pocketsphinx" }]);
    expect(engines.asrFollowsWhisperBuild).toBe(true);
    expect(load({ MODELS_DIR: models, ASR_ENGINES: "pocketsphinx" }).engines.asrFollowsWhisperBuild).toBe(
      false,
    );
    expect(load({}).engines.asrFollowsWhisperBuild).toBe(false);
  });

  it("reads the file in order, fills defaults and substitutes ${VARIABLES}", () => {
    const file = enginesFile({
      asr: [{ engine: "whisper-cpp", model: "base-q5_1" }, { engine: "pocketsphinx" }],
      mt: [{ engine: "apertium" }, { ...remote, apiKey: "${LLM_KEY}" }],
      pivotLanguage: "en",
    });
    const { engines } = load({ ENGINES_FILE: file, LLM_KEY: "sk-secret" });
    expect(engines.asr.map((spec) => spec.engine)).toEqual(["whisper-cpp", "pocketsphinx"]);
    expect(engines.mt[1]).toMatchObject({
      engine: "openai",
      apiKey: "sk-secret",
      timeoutMs: 30_000,
      maxRetries: 2,
      concurrency: 4,
    });
    expect(engines.tts).toEqual([{ engine: "espeak-ng" }]);
    expect(engines.pivotLanguages).toEqual(["en"]);
    // the environment wins over the file
    expect(
      load({ ENGINES_FILE: file, LLM_KEY: "k", TRANSLATION_PIVOT_LANGUAGE: "fr,es" }).engines.pivotLanguages,
    ).toEqual(["fr", "es"]);
    expect(() => load({ TRANSLATION_PIVOT_LANGUAGE: "english" })).toThrow(/ISO 639-1/u);
  });

  it("lets ASR_ENGINES / MT_ENGINES / TTS_ENGINES pick and order entries by id", () => {
    const file = enginesFile({ mt: [{ ...remote, id: "llm" }, { engine: "apertium" }] });
    expect(load({ ENGINES_FILE: file, MT_ENGINES: "apertium,llm" }).engines.mt.map((s) => s.engine)).toEqual([
      "apertium",
      "openai",
    ]);
    expect(load({ TTS_ENGINES: "svox-pico,espeak-ng" }).engines.tts).toEqual([
      { engine: "svox-pico" },
      { engine: "espeak-ng" },
    ]);
    expect(problem({ ENGINES_FILE: file, MT_ENGINES: "deepl" })).toMatch(
      /MT_ENGINES: unknown engine "deepl" \(known: llm, apertium, transformers-js;/,
    );
  });

  it("refuses invalid files with the place and the reason", () => {
    expect(problem({ ENGINES_FILE: path.join(dir, "absent.json") })).toMatch(
      /ENGINES_FILE .*absent\.json: ENOENT/,
    );
    expect(problem({ ENGINES_FILE: enginesFile("{ not json") })).toMatch(/ENGINES_FILE .*JSON/);
    expect(problem({ ENGINES_FILE: enginesFile({ mt: [{ ...remote, baseUrl: "gpu:8000" }] }) })).toMatch(
      /mt\[0\]\.baseUrl: must be an http\(s\) URL/,
    );
    expect(problem({ ENGINES_FILE: enginesFile({ asr: [{ engine: "kaldi" }] }) })).toMatch(
      /asr\[0\]\.engine/,
    );
    expect(problem({ ENGINES_FILE: enginesFile({ asr: [{ engine: "whisper-cpp" }] }) })).toMatch(
      /asr\[0\]\.model/,
    );
    expect(
      problem({
        ENGINES_FILE: enginesFile({ asr: [{ engine: "whisper-cpp", model: "tiny", decodeTimeoutMs: 5 }] }),
      }),
    ).toMatch(/asr\[0\]\.decodeTimeoutMs/);
    expect(problem({ ENGINES_FILE: enginesFile({ tts: [{ ...remote }] }) })).toMatch(/tts\[0\]\.voices/);
    expect(problem({ ENGINES_FILE: enginesFile({ mt: [{ ...remote, languages: ["English"] }] }) })).toMatch(
      /mt\[0\]\.languages\[0\]: use ISO 639-1 codes/,
    );
    expect(problem({ ENGINES_FILE: enginesFile({ mt: [{ ...remote, temperature: 0 }] }) })).toMatch(
      /mt\[0\].*temperature/,
    );
    expect(problem({ ENGINES_FILE: enginesFile({ mt: [remote, remote] }) })).toMatch(
      /two entries have the id "openai"/,
    );
    expect(
      problem({ ENGINES_FILE: enginesFile({ mt: [{ ...remote, apiKey: "${NOT_SET_ANYWHERE}" }] }) }),
    ).toMatch(/environment variable\(s\) not set: NOT_SET_ANYWHERE/);
  });
});
