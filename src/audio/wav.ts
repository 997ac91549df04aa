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
  return decodeWav(await readFile(path));
}

/** A WAV file whose encoding this module does not decode (compressed: A-law, ADPCM, MP3 in WAV…). */
export class UnsupportedWavError extends Error {
  override readonly name = "UnsupportedWavError";
}

/** WAVE_FORMAT_EXTENSIBLE: the encoding is the first field of the sub-format GUID. */
const EXTENSIBLE = 0xfffe;
const PCM = 1;
const IEEE_FLOAT = 3;
const ENCODING_NAMES: Record<number, string> = {
  2: "Microsoft ADPCM",
  6: "A-law",
  7: "µ-law",
  17: "IMA ADPCM",
  49: "GSM 6.10",
  80: "MPEG",
  85: "MP3",
};

/** Decodes the bytes of a WAV file of any common encoding as mono float samples (see `readWav`). */
export function decodeWav(bytes: Uint8Array): MonoAudio {
  const wav = new WaveFile(bytes);
  const format = wav.fmt as {
    audioFormat: number;
    bitsPerSample: number;
    numChannels: number;
    sampleRate: number;
    subformat?: readonly number[];
  };
  // Extensible files (ffmpeg writes them for float, 24-bit and multichannel audio) name their
  // encoding in the sub-format; read as the plain format they would be, not as raw integers.
  const encoding = format.audioFormat === EXTENSIBLE ? (format.subformat?.[0] ?? 0) : format.audioFormat;
  if (encoding !== PCM && encoding !== IEEE_FLOAT) {
    const name = ENCODING_NAMES[encoding] ?? `format 0x${encoding.toString(16).padStart(4, "0")}`;
    throw new UnsupportedWavError(`a WAV file in ${name}, which relay does not decode itself`);
  }
  const data = (wav.data as { samples: Uint8Array }).samples;
  // 16-bit PCM (what eSpeak NG, Pico and most servers answer) directly: wavefile's generic
  // conversion unpacks sample by sample and takes about 60 ms per second of speech.
  if (encoding === PCM && format.bitsPerSample === 16 && format.numChannels >= 1) {
    return { samples: pcm16ToMono(data, format.numChannels), sampleRate: format.sampleRate };
  }
  if (encoding === IEEE_FLOAT && (format.bitsPerSample === 32 || format.bitsPerSample === 64)) {
    return {
      samples: floatToMono(data, format.bitsPerSample, format.numChannels),
      sampleRate: format.sampleRate,
    };
  }
  if (encoding === PCM && [8, 24, 32].includes(format.bitsPerSample)) {
    return {
      samples: pcmToMono(data, format.bitsPerSample, format.numChannels),
      sampleRate: format.sampleRate,
    };
  }
  throw new UnsupportedWavError(
    `a WAV file of ${format.bitsPerSample}-bit ${encoding === PCM ? "PCM" : "float"} samples, which relay does not decode itself`,
  );
}

/** Interleaved little-endian 8 (unsigned), 24 or 32-bit PCM frames as mono floats, channels averaged. */
function pcmToMono(data: Uint8Array, bits: number, channels: number): Float32Array {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const width = bits / 8;
  const frames = Math.floor(data.byteLength / (width * channels));
  const samples = new Float32Array(frames);
  const read = (offset: number): number => {
    if (width === 1) return (view.getUint8(offset) - 128) / 128;
    if (width === 4) return view.getInt32(offset, true) / 2 ** 31;
    const value = view.getUint8(offset) | (view.getUint8(offset + 1) << 8) | (view.getInt8(offset + 2) << 16);
    return value / 2 ** 23;
  };
  for (let frame = 0, offset = 0; frame < frames; frame++) {
    let sum = 0;
    for (let channel = 0; channel < channels; channel++, offset += width) sum += read(offset);
    samples[frame] = sum / channels;
  }
  return samples;
}

/**
 * Interleaved little-endian 16-bit frames as mono floats, channels averaged; scaled as wavefile
 * scales them (negative by 1/32768, positive by 1/32767), so both paths give the same samples.
 */
function pcm16ToMono(data: Uint8Array, channels: number): Float32Array {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const frames = Math.floor(data.byteLength / (2 * channels));
  const samples = new Float32Array(frames);
  for (let frame = 0, offset = 0; frame < frames; frame++) {
    let sum = 0;
    for (let channel = 0; channel < channels; channel++, offset += 2) {
      const value = view.getInt16(offset, true);
      // Accumulated in float32 like the generic path below, which adds each channel in turn.
      sum = Math.fround(sum + (value < 0 ? value / 32768 : value / 32767) / channels);
    }
    samples[frame] = sum;
  }
  return samples;
}

/** Interleaved little-endian float frames (32 or 64 bits) as mono floats, channels averaged. */
function floatToMono(data: Uint8Array, bits: number, channels: number): Float32Array {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const width = bits / 8;
  const frames = Math.floor(data.byteLength / (width * channels));
  const samples = new Float32Array(frames);
  for (let frame = 0, offset = 0; frame < frames; frame++) {
    let sum = 0;
    for (let channel = 0; channel < channels; channel++, offset += width)
      sum += width === 4 ? view.getFloat32(offset, true) : view.getFloat64(offset, true);
    samples[frame] = sum / channels;
  }
  return samples;
}

/** Whether the bytes start like a WAV file (RIFF … WAVE). */
export function isWav(bytes: Uint8Array): boolean {
  return (
    bytes.byteLength >= 12 &&
    String.fromCharCode(...bytes.subarray(0, 4)) === "RIFF" &&
    String.fromCharCode(...bytes.subarray(8, 12)) === "WAVE"
  );
}

/**
 * Streaming writers put WAV headers out before they know the length (size 0 or 0xFFFFFFFF): the data
 * chunk is then taken to run to the end of the bytes. Returns a copy with consistent sizes (16-bit
 * samples), for `decodeWav`.
 */
export function withConsistentSizes(bytes: Uint8Array): Uint8Array {
  const fixed = new Uint8Array(bytes);
  const view = new DataView(fixed.buffer);
  view.setUint32(4, fixed.byteLength - 8, true);
  let offset = 12;
  while (offset + 8 <= fixed.byteLength) {
    const id = String.fromCharCode(...fixed.subarray(offset, offset + 4));
    const size = view.getUint32(offset + 4, true);
    const body = offset + 8;
    if (id === "data") {
      let length = fixed.byteLength - body;
      if (size !== 0 && size <= length) length = size;
      length -= length % 2;
      view.setUint32(offset + 4, length, true);
      return fixed.subarray(0, body + length);
    }
    offset = body + size + (size & 1);
  }
  throw new Error("the WAV answer has no data chunk");
}

/** Encodes PCM16 mono as a WAV file. */
export function encodeWav(pcm: Int16Array, sampleRate = 16_000): Uint8Array {
  const wav = new WaveFile();
  wav.fromScratch(1, sampleRate, "16", pcm);
  return wav.toBuffer();
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
