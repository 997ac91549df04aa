import { OUTPUT_SAMPLE_RATE } from "@relay-translate/client/protocol";
import { concatFloat32 } from "../audio/pcm.js";

/** What the commands write: speech files and tables. */

/** Concatenates the received speech frames into one float32 24 kHz WAV; returns its duration in s. */
export async function writeSpeech(path: string, frames: readonly Float32Array[]): Promise<number> {
  const samples = concatFloat32(frames);
  // Loaded here, not with this module: every command imports it, few write speech.
  const { writeWavFloat32 } = await import("../audio/wav.js");
  await writeWavFloat32(path, { samples, sampleRate: OUTPUT_SAMPLE_RATE });
  return samples.length / OUTPUT_SAMPLE_RATE;
}

/** Prints rows under a header in left-aligned columns (`relay voices`, `relay models list`). */
export function printTable(header: readonly string[], rows: readonly string[][]): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  for (const row of [header, ...rows]) {
    console.log(
      row
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join("  ")
        .trimEnd(),
    );
  }
}
