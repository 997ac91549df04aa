import { z } from "zod";
import type { MtEngine } from "../../core/contracts.js";
import { base, resilience, role } from "../kit/descriptor.js";

/** `libretranslate` in the engines file: its entries' schema, and the factory that imports and builds the engine. */
export const descriptor = {
  id: "libretranslate",
  mt: role(
    z.strictObject({
      engine: z.literal("libretranslate"),
      ...base,
      url: z.url({ protocol: /^https?$/u, error: "must be an http(s) URL such as http://localhost:5000" }),
      /** Sent as `api_key` (servers started with `--api-keys`). */
      apiKey: z.string().optional(),
      ...resilience,
    }),
    async (spec): Promise<MtEngine> => {
      const { createLibreTranslateEngine } = await import("./index.js");
      return createLibreTranslateEngine(spec);
    },
  ),
} as const;
