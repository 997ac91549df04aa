/**
 * Pulling and verifying translation models from Hugging Face (or a mirror with its layout:
 * `<base>/<repo>/resolve/main/<file>`), as kit/models/hugging-face.ts pulls any such model: each
 * file resumable, checked against the SHA-256 the Hub states for LFS files, the model's directory
 * `<models>/mt/<name>` appearing only once every file is there and checked. Here: which files a
 * repository may lack, and that the model has what transformers.js needs (model-check.ts).
 */
import { problemWithTranslationModel } from "./model-check.js";
import type { DownloadOptions } from "../kit/models/download.js";
import {
  pullHubModel,
  readHubManifest,
  verifyHubModel,
  type HubManifest,
  type HubPullResult,
  type HubVerifyResult,
} from "../kit/models/hugging-face.js";
import type { MtModelEntry } from "./catalogue.js";
import { isMtPulled, mtLoadProblem, mtModelDir } from "./models.js";

/** Files a repository may lack (transformers.js falls back to the model's config). */
const OPTIONAL = new Set(["generation_config.json"]);

export type MtManifest = HubManifest;
export type MtPullResult = HubPullResult;
export type MtVerifyResult = HubVerifyResult;

/** The record `pull` leaves in a model's directory, if it is there, whole, and not a link. */
export function readMtManifest(dir: string): MtManifest | undefined {
  return readHubManifest(dir);
}

/** Downloads (or resumes) `entry`'s files, checks them, and moves the model into place. */
export function pullMtModel(
  entry: MtModelEntry,
  modelsDir: string,
  options: DownloadOptions = {},
): Promise<MtPullResult> {
  return pullHubModel(
    entry,
    {
      target: mtModelDir(entry, modelsDir),
      optional: OPTIONAL,
      check: (dir) => problemWithTranslationModel(dir, entry.family),
    },
    options,
  );
}

/** Checks a pulled model's files against its manifest and what transformers.js needs. */
export function verifyMtModel(entry: MtModelEntry, modelsDir: string): Promise<MtVerifyResult> {
  return verifyHubModel(entry, {
    dir: mtModelDir(entry, modelsDir),
    pulled: isMtPulled(entry, modelsDir),
    loadProblem: () => mtLoadProblem(entry, modelsDir),
    check: (dir) => problemWithTranslationModel(dir, entry.family),
  });
}
