import type { VadEngine } from "../../src/core/contracts.js";

/** A VAD double for pipeline tests: speech is any 16 kHz window whose samples are not all zero. */
export const energyVad: VadEngine = {
  info: { id: "energy-double", version: "test" },
  capabilities: { sampleRate: 16_000, windowSamples: 512 },
  createStream: () => ({ probability: async (w) => (w.some((s) => s !== 0) ? 0.9 : 0.01) }),
  close: async () => {},
};
