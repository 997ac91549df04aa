import { z } from "zod";
import type { MtEngine } from "../../core/contracts.js";
import { base, hostLimits, role } from "../kit/descriptor.js";

/** `transformers-js` in the engines file: its entries' schema, and the factory that imports and builds the engine. */
export const descriptor = {
  id: "transformers-js",
  mt: role(
    z.strictObject({
      engine: z.literal("transformers-js"),
      ...base,
      /** Catalogue names of pulled translation models, in order of preference (default: every pulled one). */
      models: z.array(z.string().min(1)).min(1).optional(),
      threads: z.number().int().min(1).max(16).optional(),
      maxBatch: z.number().int().min(1).max(64).optional(),
      maxQueued: z.number().int().min(1).max(4096).optional(),
      maxLoaded: z.number().int().min(1).max(64).optional(),
      maxHostMiB: z.number().int().min(256).optional(),
      ...hostLimits,
    }),
    async (spec, c): Promise<MtEngine> => {
      const [{ createTransformersEngine }, { translationModels }] = await Promise.all([
        import("./index.js"),
        import("./models.js"),
      ]);
      return createTransformersEngine({
        models: translationModels(spec.models, c.modelsDir),
        threads: spec.threads,
        maxBatch: spec.maxBatch,
        maxQueued: spec.maxQueued,
        maxLoaded: spec.maxLoaded,
        maxHostMiB: spec.maxHostMiB,
        timeoutMs: spec.timeoutMs,
      });
    },
  ),
} as const;
