import type { SpeakerEngine, Voiceprint } from "../../src/core/contracts.js";

/** Voiceprint of the level double: the sum of |sample| over the non-zero samples. */
interface LevelPrint extends Voiceprint {
  readonly samples: number;
  readonly sum: number;
}

/**
 * A speaker engine double for unit tests of the tracker and the pipeline: the audio's level says
 * who speaks (a person with voice code c speaks at the constant level c / 100 of full scale;
 * digital silence is no speech), and the distance of two voiceprints is the difference of their
 * mean codes. Codes 2 or more apart are different people (above `newSpeakerAbove`); one code is one
 * person (distance 0).
 */
export const levelSpeakerEngine: SpeakerEngine = {
  info: { id: "level-double", version: "test" },
  capabilities: { sampleRate: 16_000, sameSpeakerBelow: 0.5, newSpeakerAbove: 1.5 },
  async voiceprint(samples) {
    let count = 0;
    let sum = 0;
    for (const sample of samples) {
      if (sample === 0) continue;
      count++;
      sum += Math.abs(sample);
    }
    return { samples: count, sum, speechSeconds: count / 16_000 } satisfies LevelPrint;
  },
  merge(a, b) {
    const [x, y] = [a as LevelPrint, b as LevelPrint];
    return {
      samples: x.samples + y.samples,
      sum: x.sum + y.sum,
      speechSeconds: (x.samples + y.samples) / 16_000,
    };
  },
  distance(a, b) {
    const [x, y] = [a as LevelPrint, b as LevelPrint];
    return Math.abs(x.sum / x.samples - y.sum / y.samples) * 100;
  },
  close: async () => {},
};
