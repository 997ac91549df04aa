import { readFile, writeFile } from "node:fs/promises";
import wavefile from "wavefile";
import { resample } from "./resampler.js";

const { WaveFile } = wavefile;

export interface MonoAudio {
  readonly samples: Float32Array;
  readonly sampleRate: number;
}

/** Reads a WAV file of any common encoding as mono float samples (channels are averaged). */
export async function readWav(path: string): Promise<MonoAudio> {
  const wav = new WaveFile(await readFile(path));
  wav.toBitDepth("32f");
  const channels = wav.getSamples(false, Float64Array) as unknown as Float64Array[] | Float64Array;
  const fmt = wav.fmt as { sampleRate: number };
  const list = Array.isArray(channels) ? channels : [channels];
  const first = list[0]!;
  const samples = new Float32Array(first.length);
  for (const channel of list) {
    for (let i = 0; i < samples.length; i++) samples[i]! += channel[i]! / list.length;
  }
  return { samples, sampleRate: fmt.sampleRate };
}

/** Reads a WAV file as PCM16 mono at `sampleRate` (the service's input format at 16 kHz). */
export async function readWavAsPcm16(path: string, sampleRate = 16_000): Promise<Int16Array> {
  const audio = await readWav(path);
  const samples = await resample(audio.samples, audio.sampleRate, sampleRate);
  const pcm = new Int16Array(samples.length);
  for (let i = 0; i < samples.length; i++)
    pcm[i] = Math.round(Math.max(-1, Math.min(1, samples[i]!)) * 32767);
  return pcm;
}

export async function writeWavFloat32(path: string, audio: MonoAudio): Promise<void> {
  const wav = new WaveFile();
  wav.fromScratch(1, audio.sampleRate, "32f", audio.samples);
  await writeFile(path, wav.toBuffer());
}
