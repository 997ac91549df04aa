import { z } from "zod";
import type { AsrEngine } from "../../core/contracts.js";
import { base, role } from "../kit/descriptor.js";

/** `whisper-cpp` in the engines file: its entries' schema, and the factory that imports and builds the engine. */
export const descriptor = {
  id: "whisper-cpp",
  asr: role(
    z.strictObject({
      engine: z.literal("whisper-cpp"),
      ...base,
      /** A catalogue name (`relay models list`) or a path to a ggml model file. */
      model: z.string().min(1),
      threads: z.number().int().min(1).max(64).optional(),
      maxConcurrent: z.number().int().min(1).max(16).optional(),
      partialIntervalMs: z.number().int().min(200).optional(),
      decodeTimeoutMs: z.number().int().min(1000).optional(),
      binding: z.enum(["auto", "native", "prebuilt"]).optional(),
      fitEncoderWindow: z.boolean().optional(),
    }),
    async (spec, c): Promise<AsrEngine> => {
      const [{ createWhisperCppEngine }, { resolveModel }] = await Promise.all([
        import("./index.js"),
        import("./models.js"),
      ]);
      return createWhisperCppEngine({
        modelPath: resolveModel(spec.model, c.modelsDir),
        threads: spec.threads,
        maxConcurrent: spec.maxConcurrent,
        partialIntervalMs: spec.partialIntervalMs,
        decodeTimeoutMs: spec.decodeTimeoutMs,
        languages: spec.languages,
        binding: spec.binding,
        fitEncoderWindow: spec.fitEncoderWindow,
      });
    },
  ),
} as const;
