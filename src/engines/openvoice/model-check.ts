/**
 * Checks a tone colour model's directory before it is loaded (and when it is pulled or verified):
 * `configuration.json` gives the spectrogram's settings (season-studio/MeloTTS-ONNX `main.py` reads
 * `data.sampling_rate`, `filter_length`, `hop_length` and `win_length`), and the two ONNX files
 * take the inputs the converter feeds them (catalogue.ts: the extractor's `input`; the converter's
 * `audio`, `audio_length`, `src_tone`, `dest_tone`, `tau`). A file without them is refused here
 * with the file and what it lacks, not deep inside onnxruntime at the first sentence.
 */
import { readFile } from "node:fs/promises";
import path from "node:path";
import { onnxModelProblem } from "../kit/models/onnx-file.js";
import type { ToneColorModelEntry } from "./catalogue.js";

/** The spectrogram the models take, as `configuration.json` states it. */
export interface ToneColorConfig {
  readonly sampleRate: number;
  /** FFT size: filterLength / 2 + 1 frequency bins. */
  readonly filterLength: number;
  readonly hopLength: number;
  readonly winLength: number;
}

const EXTRACTOR_INPUTS = ["input"] as const;
const CONVERTER_INPUTS = ["audio", "audio_length", "src_tone", "dest_tone", "tau"] as const;
const ENGINE = "the tone colour converter";

/** The settings in `configuration.json`'s text (shown as `shown`), or why they cannot be used. */
export function parseToneColorConfig(text: string, shown: string): ToneColorConfig | string {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return `${shown}: ${(error as Error).message}`;
  }
  const data = (value as { data?: unknown } | null)?.data;
  if (typeof data !== "object" || data === null) return `${shown} has no "data" object`;
  const fields = data as Record<string, unknown>;
  const values = new Map<string, number>();
  for (const key of ["sampling_rate", "filter_length", "hop_length", "win_length"]) {
    const field = fields[key];
    if (!(typeof field === "number" && Number.isSafeInteger(field) && field > 0))
      return `${shown}: data.${key} is ${JSON.stringify(field) ?? "missing"}, not a positive integer`;
    values.set(key, field);
  }
  const config: ToneColorConfig = {
    sampleRate: values.get("sampling_rate")!,
    filterLength: values.get("filter_length")!,
    hopLength: values.get("hop_length")!,
    winLength: values.get("win_length")!,
  };
  // A window longer than the FFT, or a hop longer than the window, is no STFT the models were trained on.
  if (config.winLength > config.filterLength)
    return `${shown}: data.win_length ${config.winLength} exceeds data.filter_length ${config.filterLength}`;
  if (config.hopLength > config.winLength)
    return `${shown}: data.hop_length ${config.hopLength} exceeds data.win_length ${config.winLength}`;
  return config;
}

/** The model's settings, or why the directory does not hold a usable tone colour model. */
export async function readToneColorModel(
  dir: string,
  entry: ToneColorModelEntry,
): Promise<ToneColorConfig | string> {
  let text: string;
  try {
    text = await readFile(path.join(dir, entry.files.config), "utf8");
  } catch (error) {
    return `cannot read ${entry.files.config} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`;
  }
  const config = parseToneColorConfig(text, entry.files.config);
  if (typeof config === "string") return config;
  const extractor = entry.files.extractor;
  const converter = entry.files.converter;
  const problem =
    (await onnxModelProblem(path.join(dir, extractor), extractor, EXTRACTOR_INPUTS, ENGINE)) ??
    (await onnxModelProblem(path.join(dir, converter), converter, CONVERTER_INPUTS, ENGINE));
  return problem ?? config;
}

/** What keeps the model in `dir` from loading, if anything. */
export async function problemWithToneColorModel(
  dir: string,
  entry: ToneColorModelEntry,
): Promise<string | undefined> {
  const model = await readToneColorModel(dir, entry);
  return typeof model === "string" ? model : undefined;
}
