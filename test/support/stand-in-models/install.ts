/**
 * Puts stand-in models where `relay models pull` would: the catalogue's directory and file names
 * under a models directory, so the service finds and loads them as it would the real ones.
 */
import { symlink, writeFile, mkdir } from "node:fs/promises";
import path from "node:path";
import { findSherpaModel } from "../../../src/models/sherpa-catalogue.js";
import { buildVitsStandIn, findEspeakNgData, piperTokensText, type VitsStandInOptions } from "./vits.js";

/** A stand-in Piper voice as catalogue model `name` (e.g. "piper-en_US-libritts_r-medium"). */
export async function installStandInVoice(
  modelsDir: string,
  name: string,
  options: Omit<VitsStandInOptions, "dir"> = {},
): Promise<string> {
  const entry = findSherpaModel(name);
  if (entry?.tts?.kind !== "vits") throw new Error(`${name} is not a Piper voice of the catalogue`);
  const dir = path.join(modelsDir, entry.dir);
  await mkdir(dir, { recursive: true });
  await writeFile(path.join(dir, entry.tts.model), buildVitsStandIn(options));
  await writeFile(path.join(dir, entry.tts.tokens), piperTokensText());
  // The real archives carry their own espeak-ng-data; Debian's serves the stand-in.
  await symlink(findEspeakNgData(), path.join(dir, "espeak-ng-data"));
  return dir;
}
