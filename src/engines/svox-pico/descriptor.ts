import { z } from "zod";
import type { TtsEngine } from "../../core/contracts.js";
import { base, role } from "../kit/descriptor.js";

/** `svox-pico` in the engines file: its entries' schema, and the factory that imports and builds the engine. */
export const descriptor = {
  id: "svox-pico",
  tts: role(
    z.strictObject({ engine: z.literal("svox-pico"), ...base, dir: z.string().optional() }),
    async (spec, c): Promise<TtsEngine> => {
      const dir = spec.dir ?? c.svoxPicoDir;
      if (!dir) throw new Error("SVOX_PICO_DIR does not exist");
      const { createSvoxPicoEngine } = await import("./index.js");
      return createSvoxPicoEngine({ lingwareDir: dir });
    },
  ),
} as const;
