import { z } from "zod";
import type { MtEngine } from "../../core/contracts.js";
import { base, environment, familySettings, role } from "../kit/descriptor.js";

/** APERTIUM_MODES_DIR: where the installed language pairs' modes are. */
const settings = environment(
  "apertium",
  { APERTIUM_MODES_DIR: z.string().default("/usr/share/apertium/modes") },
  (e) => ({ modesDir: e.APERTIUM_MODES_DIR }),
);

/** `apertium` in the engines file: its entries' schema, and the factory that imports and builds the engine. */
export const descriptor = {
  id: "apertium",
  environment: settings,
  mt: role(
    z.strictObject({ engine: z.literal("apertium"), ...base, modesDir: z.string().optional() }),
    async (spec, c): Promise<MtEngine> => {
      const { createApertiumEngine } = await import("./index.js");
      return createApertiumEngine({ modesDir: spec.modesDir ?? familySettings(c, settings).modesDir });
    },
  ),
} as const;
