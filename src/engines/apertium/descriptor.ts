import { z } from "zod";
import type { MtEngine } from "../../core/contracts.js";
import { base, role } from "../kit/descriptor.js";

/** `apertium` in the engines file: its entries' schema, and the factory that imports and builds the engine. */
export const descriptor = {
  id: "apertium",
  mt: role(
    z.strictObject({ engine: z.literal("apertium"), ...base, modesDir: z.string().optional() }),
    async (spec, c): Promise<MtEngine> => {
      const { createApertiumEngine } = await import("./index.js");
      return createApertiumEngine({ modesDir: spec.modesDir ?? c.apertiumModesDir });
    },
  ),
} as const;
