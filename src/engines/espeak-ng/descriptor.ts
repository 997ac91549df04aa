import { z } from "zod";
import type { TtsEngine } from "../../core/contracts.js";
import { base, environment, familySettings, role } from "../kit/descriptor.js";

/** ESPEAK_NG_BIN: the eSpeak NG program. */
const settings = environment("espeak-ng", { ESPEAK_NG_BIN: z.string().default("espeak-ng") }, (e) => ({
  binary: e.ESPEAK_NG_BIN,
}));

/** `espeak-ng` in the engines file: its entries' schema, and the factory that imports and builds the engine. */
export const descriptor = {
  id: "espeak-ng",
  environment: settings,
  tts: role(
    z.strictObject({ engine: z.literal("espeak-ng"), ...base, binary: z.string().optional() }),
    async (spec, c): Promise<TtsEngine> => {
      const { createEspeakEngine } = await import("./index.js");
      return createEspeakEngine({ binary: spec.binary ?? familySettings(c, settings).binary });
    },
  ),
} as const;
