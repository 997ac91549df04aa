import { z } from "zod";
import type { AsrEngine } from "../../core/contracts.js";
import { base, role } from "../kit/descriptor.js";

/** `pocketsphinx` in the engines file: its entries' schema, and the factory that imports and builds the engine. */
export const descriptor = {
  id: "pocketsphinx",
  asr: role(
    z.strictObject({
      engine: z.literal("pocketsphinx"),
      ...base,
      modelDir: z.string().optional(),
      maxDecoders: z.number().int().min(1).optional(),
    }),
    async (spec, c): Promise<AsrEngine> => {
      const { createPocketSphinxEngine } = await import("./index.js");
      return createPocketSphinxEngine({
        modelDir: spec.modelDir ?? c.pocketsphinxModelDir,
        maxDecoders: spec.maxDecoders ?? c.pocketsphinxMaxDecoders,
        decoderSettings: c.pocketsphinxSettings,
      });
    },
  ),
} as const;
