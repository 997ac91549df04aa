/**
 * `relay models list | pull | verify` for the tone colour model (OpenVoice V2's converter, which
 * speaks in the speaker's own voice for rooms' `voice_type=clone`): its section of the list, and
 * what its pull checks and says. models.ts runs the pull and the verification.
 */
import type { DownloadOptions } from "../engines/kit/models/download.js";
import type { HubPullResult } from "../engines/kit/models/hugging-face.js";
import { TONE_COLOR_CATALOGUE, type ToneColorModelEntry } from "../engines/openvoice/catalogue.js";
import { isToneColorPulled } from "../engines/openvoice/models.js";
import { pullToneColorModel, verifyToneColorModel } from "../engines/openvoice/pull.js";
import { printTable } from "./output.js";

/** The tone colour models' section of `relay models list`. */
export function listToneColorModels(dir: string): void {
  console.log(
    "\nTone colour (voice_type=clone; DEFAULT: pulled by `npm run setup`; without it, clone picks the nearest library voice):\n",
  );
  printTable(
    ["NAME", "SIZE", "DEFAULT", "PULLED", "LICENCE", "DESCRIPTION"],
    TONE_COLOR_CATALOGUE.map((entry) => [
      entry.name,
      `~${entry.approxMiB} MiB`,
      entry.default ? "yes" : "",
      isToneColorPulled(entry, dir) ? "yes" : "no",
      entry.licence,
      entry.description,
    ]),
  );
}

/** What `relay models pull tone-color` does and says (models.ts's pullIntoDirectory runs it). */
export function toneColorPullSteps(
  entry: ToneColorModelEntry,
  dir: string,
): {
  verified: () => Promise<boolean>;
  pull: (options: DownloadOptions) => Promise<HubPullResult>;
  detail: (result: HubPullResult) => string;
  after: (result: HubPullResult) => string;
} {
  return {
    verified: async () => isToneColorPulled(entry, dir) && (await verifyToneColorModel(entry, dir)).ok,
    pull: (options) => pullToneColorModel(entry, dir, options),
    detail: (result) =>
      `${result.checked} of ${result.files} files checked against the SHA-256 Hugging Face states`,
    after: () => `licence: ${entry.licence} (${entry.source})`,
  };
}
