/**
 * `relay live`'s input files (src/cli/audio-input.ts, src/audio/wav.ts): every WAV encoding ffmpeg
 * writes decodes to the same speech (not noise), other formats go through ffmpeg, and what cannot be
 * decoded is refused naming what it is. The variants are made by ffmpeg from one real recording.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readWavAsPcm16 } from "../../src/audio/wav.js";
import { readAudioInput } from "../../src/cli/audio-input.js";
import { sharedMissing, sharedPath } from "../support/shared.js";

const execFileAsync = promisify(execFile);
const CLIP = "data/speech/misc/jfk.wav";
let dir: string;
let reference: Int16Array;

const ffmpeg = (output: string, ...args: string[]) =>
  execFileAsync("ffmpeg", ["-v", "error", "-y", "-i", sharedPath(CLIP), ...args, path.join(dir, output)]);

/** Correlation of two signals over their common length (1: the same speech). */
function correlation(a: Int16Array, b: Int16Array): number {
  const n = Math.min(a.length, b.length);
  let ab = 0;
  let aa = 0;
  let bb = 0;
  for (let i = 0; i < n; i++) {
    ab += a[i]! * b[i]!;
    aa += a[i]! * a[i]!;
    bb += b[i]! * b[i]!;
  }
  return ab / Math.sqrt(aa * bb);
}

beforeAll(async () => {
  if (sharedMissing(CLIP)) return;
  dir = await mkdtemp(path.join(tmpdir(), "relay-audio-input-"));
  reference = await readWavAsPcm16(sharedPath(CLIP));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe.skipIf(sharedMissing(CLIP))("relay live's audio input", () => {
  it.each([
    ["float 32-bit (WAVE_FORMAT_EXTENSIBLE, as ffmpeg writes it)", "f32.wav", ["-c:a", "pcm_f32le"]],
    ["float 64-bit", "f64.wav", ["-c:a", "pcm_f64le"]],
    ["24-bit PCM", "s24.wav", ["-c:a", "pcm_s24le"]],
    ["32-bit PCM", "s32.wav", ["-c:a", "pcm_s32le"]],
    ["8-bit PCM", "u8.wav", ["-c:a", "pcm_u8"]],
    ["stereo 16-bit at 44.1 kHz", "st.wav", ["-ac", "2", "-ar", "44100", "-c:a", "pcm_s16le"]],
    ["MP3 (through ffmpeg)", "speech.mp3", []],
    ["A-law WAV (through ffmpeg)", "alaw.wav", ["-c:a", "pcm_alaw"]],
  ])("decodes %s to the same speech", async (_what, file, args) => {
    await ffmpeg(file, ...args);
    const pcm = await readAudioInput(path.join(dir, file));
    expect(Math.abs(pcm.length - reference.length)).toBeLessThan(2_000);
    // MP3 shifts the audio by its encoder delay (its loudness is checked below); every other
    // variant lines up with the recording sample for sample.
    if (!file.endsWith(".mp3")) expect(correlation(pcm, reference)).toBeGreaterThan(0.98);
  });

  it("an MP3 holds the speech: its loudness is the recording's, not noise's", async () => {
    await ffmpeg("loud.mp3");
    const pcm = await readAudioInput(path.join(dir, "loud.mp3"));
    const rms = (x: Int16Array) => Math.sqrt(x.reduce((sum, v) => sum + v * v, 0) / x.length);
    expect(rms(pcm) / rms(reference)).toBeGreaterThan(0.8);
    expect(rms(pcm) / rms(reference)).toBeLessThan(1.25);
  });

  it("refuses what nothing can decode, saying what it is", async () => {
    const text = path.join(dir, "notes.txt");
    await writeFile(text, "these are not sounds\n".repeat(100));
    await expect(readAudioInput(text)).rejects.toThrow(
      /notes\.txt is not a WAV file, and ffmpeg cannot decode it either/u,
    );
    const broken = path.join(dir, "broken.wav");
    await writeFile(broken, Buffer.concat([Buffer.from("RIFF\0\0\0\0WAVE"), Buffer.alloc(20)]));
    await expect(readAudioInput(broken)).rejects.toThrow(/broken\.wav/u);
    await expect(readAudioInput(path.join(dir, "missing.wav"))).rejects.toThrow(
      /cannot read .*missing\.wav \(ENOENT\)/u,
    );
  });
});
