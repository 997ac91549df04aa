import { z } from "zod";
import type { TtsEngine } from "../../core/contracts.js";
import { base, role } from "../kit/descriptor.js";

/** `espeak-ng` in the engines file: its entries' schema, and the factory that imports and builds the engine. */
export const descriptor = {
  id: "espeak-ng",
  tts: role(
    z.strictObject({ engine: z.literal("espeak-ng"), ...base, binary: z.string().optional() }),
    async (spec, c): Promise<TtsEngine> => {
      const { createEspeakEngine } = await import("./index.js");
      return createEspeakEngine({ binary: spec.binary ?? c.espeakBinary });
    },
  ),
} as const;
