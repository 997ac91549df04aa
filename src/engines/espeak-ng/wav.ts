/**
 * Decodes the WAV eSpeak NG writes with `--stdout`. Because stdout cannot be rewound, its RIFF and
 * data sizes are placeholders (0x7ffff000), so generic WAV readers reject or over-read it: the data
 * chunk is taken to run to the end of the stream instead.
 */

export interface DecodedWav {
  readonly samples: Float32Array;
  readonly sampleRate: number;
}

export function decodeStreamedWav(bytes: Buffer): DecodedWav {
  if (
    bytes.length < 12 ||
    bytes.toString("ascii", 0, 4) !== "RIFF" ||
    bytes.toString("ascii", 8, 12) !== "WAVE"
  ) {
    throw new Error(`eSpeak NG output is not a WAV stream (${bytes.length} bytes)`);
  }
  let sampleRate = 0;
  let offset = 12;
  while (offset + 8 <= bytes.length) {
    const id = bytes.toString("ascii", offset, offset + 4);
    const size = bytes.readUInt32LE(offset + 4);
    const body = offset + 8;
    if (id === "fmt ") {
      const format = bytes.readUInt16LE(body);
      const channels = bytes.readUInt16LE(body + 2);
      const bits = bytes.readUInt16LE(body + 14);
      if (format !== 1 || channels !== 1 || bits !== 16) {
        throw new Error(`unexpected eSpeak NG WAV format (format ${format}, ${channels} ch, ${bits} bit)`);
      }
      sampleRate = bytes.readUInt32LE(body + 4);
    } else if (id === "data") {
      if (sampleRate === 0) throw new Error("eSpeak NG WAV stream has no fmt chunk before its data");
      const end = Math.min(bytes.length, body + size);
      const count = (end - body) >> 1;
      const samples = new Float32Array(count);
      for (let i = 0; i < count; i++) samples[i] = bytes.readInt16LE(body + 2 * i) / 32768;
      return { samples, sampleRate };
    }
    offset = body + size + (size & 1);
  }
  throw new Error("eSpeak NG WAV stream has no data chunk");
}
