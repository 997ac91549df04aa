/**
 * Loudness levelling for synthesized speech. eSpeak NG variants differ by up to 6 dB (e.g. "Hugo" vs
 * "antonio") and SVOX Pico is louder still, so every engine levels its output to one target: a
 * listener switching voices or engines should not have to touch the volume.
 */

/** Target RMS of the voiced part (≈ −20 dBFS), typical for broadcast speech. */
const TARGET_RMS = 0.1;
/** Peaks are kept below this so the gain never clips. */
const PEAK_LIMIT = 0.95;
/** Frames quieter than this (≈ −50 dBFS) are pauses and do not count towards the RMS. */
const SILENCE_RMS = 0.003;
const FRAME = 256;

/** Scales `samples` in place so the speech sits at the common level; silence is left untouched. */
export function levelSpeech(samples: Float32Array): Float32Array {
  let energy = 0;
  let counted = 0;
  let peak = 0;
  for (let start = 0; start < samples.length; start += FRAME) {
    const end = Math.min(samples.length, start + FRAME);
    let frameEnergy = 0;
    for (let i = start; i < end; i++) {
      const s = samples[i]!;
      frameEnergy += s * s;
      if (Math.abs(s) > peak) peak = Math.abs(s);
    }
    if (Math.sqrt(frameEnergy / (end - start)) >= SILENCE_RMS) {
      energy += frameEnergy;
      counted += end - start;
    }
  }
  if (counted === 0 || peak === 0) return samples;
  const gain = Math.min(TARGET_RMS / Math.sqrt(energy / counted), PEAK_LIMIT / peak);
  for (let i = 0; i < samples.length; i++) samples[i]! *= gain;
  return samples;
}
