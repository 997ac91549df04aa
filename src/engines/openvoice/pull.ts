/**
 * Pulling and verifying the tone colour model from Hugging Face (or a mirror with its layout:
 * `<base>/<repo>/resolve/main/<file>`), as kit/models/hugging-face.ts pulls any such model: each
 * file resumable, the two ONNX files (LFS) checked against the SHA-256 the Hub states, the model's
 * directory `<models>/tone-color/<name>` appearing only once every file is there and checked
 * (model-check.ts: the configuration's spectrogram settings, the ONNX files' inputs).
 */
import type { DownloadOptions } from "../kit/models/download.js";
import {
  pullHubModel,
  readHubManifest,
  verifyHubModel,
  type HubManifest,
  type HubModel,
  type HubPullResult,
  type HubVerifyResult,
} from "../kit/models/hugging-face.js";
import type { ToneColorModelEntry } from "./catalogue.js";
import { problemWithToneColorModel } from "./model-check.js";
import { isToneColorPulled, toneColorLoadProblem, toneColorModelDir } from "./models.js";

/** The entry as a pull sees it: its files in the order they download (the small configuration first). */
function hubModel(entry: ToneColorModelEntry): HubModel {
  const { config, extractor, converter } = entry.files;
  return {
    name: entry.name,
    repo: entry.repo,
    licence: entry.licence,
    files: [config, extractor, converter],
    // The whole model's bound while it downloads (src/engines/kit/models/sizes.ts).
    approxMiB: entry.approxMiB,
  };
}

/** The record `pull` leaves in a model's directory, if it is there, whole, and not a link. */
export function readToneColorManifest(dir: string): HubManifest | undefined {
  return readHubManifest(dir);
}

/** Downloads (or resumes) `entry`'s files, checks them, and moves the model into place. */
export function pullToneColorModel(
  entry: ToneColorModelEntry,
  modelsDir: string,
  options: DownloadOptions = {},
): Promise<HubPullResult> {
  return pullHubModel(
    hubModel(entry),
    {
      target: toneColorModelDir(entry, modelsDir),
      check: (dir) => problemWithToneColorModel(dir, entry),
    },
    options,
  );
}

/** Checks a pulled model's files against its manifest and what the converter needs. */
export function verifyToneColorModel(
  entry: ToneColorModelEntry,
  modelsDir: string,
): Promise<HubVerifyResult> {
  return verifyHubModel(entry, {
    dir: toneColorModelDir(entry, modelsDir),
    pulled: isToneColorPulled(entry, modelsDir),
    loadProblem: () => toneColorLoadProblem(entry, modelsDir),
    check: (dir) => problemWithToneColorModel(dir, entry),
  });
}
