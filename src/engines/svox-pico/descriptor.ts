import { existsSync } from "node:fs";
import path from "node:path";
import { z } from "zod";
import type { TtsEngine } from "../../core/contracts.js";
import { base, environment, familySettings, role } from "../kit/descriptor.js";

/** SVOX_PICO_DIR: the lingware; absent, the engine cannot be built (the default list leaves it out). */
const settings = environment("svox-pico", { SVOX_PICO_DIR: z.string().optional() }, (e, service) => {
  const dir = e.SVOX_PICO_DIR ?? path.resolve(service.projectRoot, "../shared/models/svox-pico");
  return { dir: existsSync(dir) ? dir : undefined };
});

/** `svox-pico` in the engines file: its entries' schema, and the factory that imports and builds the engine. */
export const descriptor = {
  id: "svox-pico",
  environment: settings,
  tts: role(
    z.strictObject({ engine: z.literal("svox-pico"), ...base, dir: z.string().optional() }),
    async (spec, c): Promise<TtsEngine> => {
      const dir = spec.dir ?? familySettings(c, settings).dir;
      if (!dir) throw new Error("SVOX_PICO_DIR does not exist");
      const { createSvoxPicoEngine } = await import("./index.js");
      return createSvoxPicoEngine({ lingwareDir: dir });
    },
  ),
} as const;
