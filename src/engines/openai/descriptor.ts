import { z } from "zod";
import type { AsrEngine, MtEngine, TtsEngine } from "../../core/contracts.js";
import { base, remote, languages, role } from "../kit/descriptor.js";

/** `openai` in the engines file: its entries' schema, and the factory that imports and builds the engine. */
export const descriptor = {
  id: "openai",
  asr: role(
    z.strictObject({
      engine: z.literal("openai"),
      ...base,
      ...remote,
      languages,
      partialIntervalMs: z.number().int().min(200).optional(),
    }),
    async (spec): Promise<AsrEngine> => {
      const { createOpenAiAsrEngine } = await import("./index.js");
      return createOpenAiAsrEngine(spec);
    },
  ),
  mt: role(
    z.strictObject({ engine: z.literal("openai"), ...base, ...remote, languages }),
    async (spec): Promise<MtEngine> => {
      const { createOpenAiMtEngine } = await import("./index.js");
      return createOpenAiMtEngine(spec);
    },
  ),
  tts: role(
    z.strictObject({
      engine: z.literal("openai"),
      ...base,
      ...remote,
      languages,
      /** Server voices for the library's female and male voices (assigned round-robin). */
      voices: z.strictObject({ female: z.array(z.string()).min(1), male: z.array(z.string()).min(1) }),
      responseFormat: z.enum(["pcm", "wav"]).default("pcm"),
    }),
    async (spec): Promise<TtsEngine> => {
      const { createOpenAiTtsEngine } = await import("./index.js");
      return createOpenAiTtsEngine(spec);
    },
  ),
} as const;
