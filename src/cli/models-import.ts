import { ModelError } from "../engines/kit/models/download.js";
import { importPiperVoice } from "../engines/sherpa-onnx/piper-import.js";
import { CliError } from "./network.js";

/**
 * `relay models import piper <voice.onnx>`: a Piper voice as Piper publishes it, installed beside
 * the pulled ones (src/engines/sherpa-onnx/piper-import.ts); the service, `verify` and `check` then
 * take it by its name, `piper-<voice>`.
 */
export async function importModel(
  format: string,
  file: string,
  dir: string,
  espeakData: string | undefined,
): Promise<number> {
  if (format !== "piper") throw new CliError(`cannot import "${format}" models (only: piper)`);
  try {
    const result = await importPiperVoice(file, dir, espeakData ? { espeakData } : {});
    console.log(
      `imported ${result.name}: ${result.dir} (${result.language}, ${result.speakers} speaker${result.speakers === 1 ? "" : "s"}; eSpeak NG data from ${result.espeakData})`,
    );
    console.log(
      result.licence
        ? `licence, as its model card states it: ${result.licence}`
        : "no model card states its licence: check the voice's source before offering it",
    );
    return 0;
  } catch (error) {
    throw error instanceof ModelError ? new CliError(error.message) : error;
  }
}
