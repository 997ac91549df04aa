import { describe, expect, it } from "vitest";
import {
  DEFAULT_ENGINES,
  defaultEngines,
  recognizersToBuild,
  selectEngines,
} from "../../src/engines/routing/engine-config.js";

describe("default engines", () => {
  it("are the embedded engines until the default whisper model is pulled", () => {
    expect(defaultEngines({ modelPresent: false, nativeBuild: true })).toEqual(DEFAULT_ENGINES);
    expect(DEFAULT_ENGINES.asr).toEqual([{ engine: "pocketsphinx" }]);
  });

  it("put whisper.cpp first and keep PocketSphinx for English once the model is there", () => {
    const engines = defaultEngines({ modelPresent: true, nativeBuild: true });
    expect(engines.asr).toEqual([{ engine: "whisper-cpp", model: "base" }, { engine: "pocketsphinx" }]);
    expect(engines.mt).toEqual(DEFAULT_ENGINES.mt);
    expect(engines.tts).toEqual(DEFAULT_ENGINES.tts);
  });

  it("leave English to PocketSphinx when only the slow prebuilt whisper.cpp is there", () => {
    expect(defaultEngines({ modelPresent: true, nativeBuild: false }).asr).toEqual([
      { engine: "pocketsphinx" },
      { engine: "whisper-cpp", model: "base" },
    ]);
  });

  it("are ordered by the whisper.cpp build where the engines are built, asking only for the defaults", () => {
    const defaults = { asr: defaultEngines({ modelPresent: true, nativeBuild: true }).asr };
    let asked = 0;
    const loads = (result: boolean) => () => (asked++, result);
    expect(recognizersToBuild({ ...defaults, asrFollowsWhisperBuild: true }, loads(true))).toEqual(
      defaults.asr,
    );
    expect(recognizersToBuild({ ...defaults, asrFollowsWhisperBuild: true }, loads(false))).toEqual([
      { engine: "pocketsphinx" },
      { engine: "whisper-cpp", model: "base" },
    ]);
    expect(asked).toBe(2);
    // A configured list is built as it is, without loading the addon.
    expect(recognizersToBuild({ ...defaults, asrFollowsWhisperBuild: false }, loads(false))).toEqual(
      defaults.asr,
    );
    expect(asked).toBe(2);
  });

  it("put pulled sherpa-onnx models first: the streaming recognizer for English, voices before eSpeak NG", () => {
    const neural = { streamingEnglish: true, neuralVoices: true };
    expect(defaultEngines({ modelPresent: false, nativeBuild: true, ...neural })).toEqual({
      ...DEFAULT_ENGINES,
      asr: [{ engine: "sherpa-onnx" }, { engine: "pocketsphinx" }],
      tts: [{ engine: "sherpa-onnx" }, { engine: "espeak-ng" }],
    });
    expect(defaultEngines({ modelPresent: true, nativeBuild: true, ...neural }).asr).toEqual([
      { engine: "sherpa-onnx" },
      { engine: "whisper-cpp", model: "base" },
      { engine: "pocketsphinx" },
    ]);
    // Without whisper.cpp's build for this CPU the streaming recognizer stays first.
    const defaults = { asr: defaultEngines({ modelPresent: true, nativeBuild: true, ...neural }).asr };
    expect(recognizersToBuild({ ...defaults, asrFollowsWhisperBuild: true }, () => false)).toEqual([
      { engine: "sherpa-onnx" },
      { engine: "pocketsphinx" },
      { engine: "whisper-cpp", model: "base" },
    ]);
  });

  it("translate with pulled translation models first, Apertium behind them", () => {
    for (const modelPresent of [false, true]) {
      expect(defaultEngines({ modelPresent, nativeBuild: true, neuralTranslation: true }).mt).toEqual([
        { engine: "transformers-js" },
        { engine: "apertium" },
      ]);
    }
    expect(defaultEngines({ modelPresent: true, nativeBuild: true }).mt).toEqual([{ engine: "apertium" }]);
  });

  it("give way to anything configured", () => {
    const defaults = defaultEngines({ modelPresent: true, nativeBuild: true });
    expect(
      selectEngines("asr", { asr: [{ engine: "pocketsphinx" }], mt: [], tts: [] }, undefined, defaults),
    ).toEqual([{ engine: "pocketsphinx" }]);
    expect(selectEngines("asr", undefined, ["pocketsphinx"], defaults)).toEqual([{ engine: "pocketsphinx" }]);
    expect(selectEngines("asr", undefined, undefined, defaults)).toEqual(defaults.asr);
  });
});
