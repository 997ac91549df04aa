import wavefile from "wavefile";
import { describe, expect, it } from "vitest";
import { decodeWav, encodeWav } from "../../src/audio/wav.js";

const { WaveFile } = wavefile;

describe("decodeWav", () => {
  it("decodes 16-bit PCM (the fast path) exactly as wavefile's generic conversion does, channels averaged", () => {
    const left = Int16Array.from([0, 32767, -32768, 1000, -1000, 7]);
    const right = Int16Array.from([0, 32767, 0, -1000, 3000, -7]);
    const stereo = new WaveFile();
    stereo.fromScratch(2, 22_050, "16", [left, right]);
    const decoded = decodeWav(stereo.toBuffer());

    const generic = new WaveFile(stereo.toBuffer());
    generic.toBitDepth("32f");
    const [l, r] = generic.getSamples(false, Float64Array) as unknown as Float64Array[];
    expect(decoded.sampleRate).toBe(22_050);
    expect(Array.from(decoded.samples)).toEqual(
      Array.from(l!, (value, i) => Math.fround(Math.fround(value / 2) + r![i]! / 2)),
    );
    expect(decoded.samples[1]).toBe(1);
    expect(decoded.samples[2]).toBe(-0.5);
  });

  it("round-trips mono PCM16 through encodeWav", () => {
    const pcm = Int16Array.from({ length: 1600 }, (_, i) => Math.round(Math.sin(i / 10) * 20_000));
    const { samples, sampleRate } = decodeWav(encodeWav(pcm, 16_000));
    expect(sampleRate).toBe(16_000);
    expect(samples).toHaveLength(1600);
    samples.forEach((value, i) => expect(Math.round(value * (pcm[i]! < 0 ? 32768 : 32767))).toBe(pcm[i]));
  });

  it("still decodes other encodings (32-bit float) through wavefile", () => {
    const float = new WaveFile();
    float.fromScratch(1, 8_000, "32f", [0.25, -0.5, 1]);
    expect(Array.from(decodeWav(float.toBuffer()).samples)).toEqual([0.25, -0.5, 1]);
  });
});
